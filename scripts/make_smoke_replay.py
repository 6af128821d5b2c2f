"""Write datasets/gaia-smoke/replay.jsonl: recorded model turns for the offline main job.

Each instance is replayed as a model that lists the workspace, runs the reference
solution (datasets/gaia-smoke/solutions/<task_id>.py) in the sandbox, and answers.
Two instances are deliberately imperfect, as recorded models are: one answers
without <solution> tags (the final message is used) and one answers wrongly.
Format: harness/models/replay.py.   Usage: python3 scripts/make_smoke_replay.py
"""

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "datasets" / "gaia-smoke"
NO_TAGS = "5a79f795-8c1f-5451-9f49-e9fd38daa1f9"
WRONG = "964d85c4-677b-56b1-946d-d39b4af02e50"


def turns_for(row: dict) -> list[dict]:
    code = (ROOT / "solutions" / f"{row['task_id']}.py").read_text()
    answer = row["Final answer"]
    turns = []
    if row["file_name"]:
        turns.append({"tool_calls": [{"name": "list_files", "arguments": {"path": "."}}],
                      "usage": {"prompt_tokens": 610, "completion_tokens": 18}})
    turns.append({"tool_calls": [{"name": "run_python", "arguments": {"code": code}}],
                  "usage": {"prompt_tokens": 680, "completion_tokens": 40 + len(code) // 4}})
    if row["task_id"] == NO_TAGS:
        final = f"The answer is {answer}."
    elif row["task_id"] == WRONG:
        final = "I read the timetable and the earliest arrival is <solution>17:05</solution>"
    else:
        final = f"The script printed the result.\n<solution>{answer}</solution>"
    turns.append({"content": final, "usage": {"prompt_tokens": 900 + len(code) // 3, "completion_tokens": 25}})
    return turns


def main() -> None:
    lines = []
    for line in (ROOT / "2023" / "validation" / "metadata.jsonl").read_text().splitlines():
        row = json.loads(line)
        lines.append(json.dumps({"instance_id": row["task_id"], "turns": turns_for(row)}))
    (ROOT / "replay.jsonl").write_text("\n".join(lines) + "\n")
    print(f"wrote {len(lines)} instances to {ROOT / 'replay.jsonl'}")


if __name__ == "__main__":
    main()
