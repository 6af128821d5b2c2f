"""Write datasets/gaia-smoke/replay.jsonl: recorded model turns for the offline main job.

Each instance is replayed as a model that lists the workspace, runs the reference
solution (datasets/gaia-smoke/solutions/<task_id>.py) in the sandbox, and answers.
Two instances are deliberately imperfect, as recorded models are: one answers
without <solution> tags (the final message is used) and one answers wrongly.
The media tasks (scripts/make_smoke_web.py's search task, scripts/make_smoke_media.py's image and
audio tasks) are answered by a model that searches the site (web_search, the `site` provider
over --website), one that sees the attached chart (its turns are marked "needs_image": replayed
to a request without the image part they are a model error), and one that transcribes the memo
(its turn holds the transcript under the WAV's sha256: the replay's answer to /audio/transcriptions).

The turns are then recorded for real: replayed once in real sandboxes with the bundled
website (`harness run --record`), so each tool-call turn keeps the fingerprints of the
results it got, and a later replay notices a broken environment (harness/models/replay.py).
Needs the Docker engine and the sandbox image, like the main job.
Format: harness/models/replay.py.   Usage: .venv/bin/python scripts/make_smoke_replay.py
"""

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_smoke_media  # noqa: E402 - a sibling script, not a package

ROOT = Path(__file__).resolve().parents[1] / "datasets" / "gaia-smoke"
NO_TAGS = "5a79f795-8c1f-5451-9f49-e9fd38daa1f9"
SITE = "http://shop.gaia.test/"
Q3_CODE = """import pandas as pd
df = pd.read_csv("/workspace/downloads/supplier-deliveries-2023.csv", parse_dates=["date"])
q3 = df[(df.date >= "2023-07-01") & (df.date < "2023-10-01")]
print(q3.groupby("supplier").quantity.sum().sort_values(ascending=False))
print(q3.groupby("supplier").quantity.sum().idxmax())
"""


def call(name: str, **arguments) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}],
            "usage": {"prompt_tokens": 700, "completion_tokens": 30}}


# Browsing tasks (scripts/make_smoke_web.py): a model that browses the offline website.
WEB_TURNS = {
    "9cb9fa0f-0690-58a0-b62a-5d6e05c663d0": [
        call("visit_url", url=SITE + "catalog"), call("click", target="Next page"),
        call("click", target="Next page")],
    "220e4558-9eb1-5246-b9e6-02823d126c41": [
        call("visit_url", url=SITE), call("click", target="Supplier reports"),
        call("click", target="Supplier deliveries 2023 (CSV)"), call("run_python", code=Q3_CODE)],
    "a9360975-2563-5f10-a1be-68dcb8e24b46": [
        call("visit_url", url=SITE), call("type_text", target="Search products", text="hose"),
        call("click", target="Hose Reel Cart"), call("find_on_page", text="Warranty")],
}
WRONG = "964d85c4-677b-56b1-946d-d39b4af02e50"
SEARCH = "186b065e-32f9-5511-b2ad-03adaac76864"
WEB_TURNS[SEARCH] = [call("web_search", query="safety notice recall batch"),
                     call("visit_url", url=SITE + "notices/safety-recall-2023")]
# A turn's keys that --record cannot know (a hand-made assertion about the request it answers): kept from
# the script when the recording replaces the scripted turns.
SCRIPTED_ONLY = ("needs_image",)


def media_turns(ident: str, answer: str) -> list[dict] | None:
    """The image and audio tasks' turns (scripts/make_smoke_media.py), None for any other instance."""
    final = {"content": f"<solution>{answer}</solution>", "usage": {"prompt_tokens": 900, "completion_tokens": 12}}
    if ident == make_smoke_media.task_id("tallest-bar-colour"):
        return [{**call("list_files", path="."), "needs_image": True},
                {**final, "content": f"The green bar is the tallest. {final['content']}", "needs_image": True}]
    if ident == make_smoke_media.task_id("voice-memo-bay"):
        audio = (ROOT / "2023" / "validation" / make_smoke_media.MEMO_FILE).read_bytes()
        heard = {hashlib.sha256(audio).hexdigest()[:16]: {"model": "replay", "text": make_smoke_media.MEMO}}
        return [{**call("transcribe_audio", path=make_smoke_media.MEMO_FILE), "transcripts": heard},
                {**final, "content": f"The memo says bay {answer}. {final['content']}"}]
    return None


def turns_for(row: dict) -> list[dict]:
    answer = row["Final answer"]
    media = media_turns(row["task_id"], answer)
    if media is not None:
        return media
    if row["task_id"] in WEB_TURNS:
        final = f"From the website: <solution>{answer}</solution>"
        usage = {"prompt_tokens": 1500, "completion_tokens": 20}
        return WEB_TURNS[row["task_id"]] + [{"content": final, "usage": usage}]
    code = (ROOT / "solutions" / f"{row['task_id']}.py").read_text()
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


def record(scripted: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """The scripted turns replayed with the website, as --record wrote them (with fingerprints)."""
    with tempfile.TemporaryDirectory(prefix="smoke-record-") as tmp:
        recording = Path(tmp, "recorded.jsonl")
        proc = subprocess.run([sys.executable, "-m", "harness", "run", "--dataset", str(ROOT), "--model", "replay",
                               "--website", str(ROOT / "website"), "--output-dir", str(Path(tmp, "run")),
                               "--workers", "2", "--record", str(recording)], capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"recording the smoke set failed (exit {proc.returncode}):\n"
                     f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        recorded = {}
        for line in recording.read_text().splitlines():
            item = json.loads(line)
            recorded[item["instance_id"]] = item["turns"]
    for ident, turns in scripted.items():
        bare = [{k: v for k, v in turn.items() if k != "results"} for turn in recorded.get(ident, [])]
        if bare != [{k: v for k, v in turn.items() if k not in SCRIPTED_ONLY} for turn in turns]:
            sys.exit(f"instance {ident}: the recording does not replay the scripted turns")
        if any(None in turn.get("results", []) for turn in recorded[ident]):
            sys.exit(f"instance {ident}: a tool call got no result while recording")
        recorded[ident] = [{**got, **{k: mine[k] for k in SCRIPTED_ONLY if k in mine}}
                           for got, mine in zip(recorded[ident], turns, strict=True)]
    return recorded


def main() -> None:
    scripted = {}
    for line in (ROOT / "2023" / "validation" / "metadata.jsonl").read_text().splitlines():
        row = json.loads(line)
        scripted[row["task_id"]] = turns_for(row)
    target = ROOT / "replay.jsonl"
    target.write_text("".join(json.dumps({"instance_id": i, "turns": t}) + "\n" for i, t in scripted.items()))
    recorded = record(scripted)
    target.write_text("".join(json.dumps({"instance_id": i, "turns": recorded[i]}) + "\n" for i in scripted))
    print(f"wrote {len(scripted)} instances, recorded with fingerprints, to {target}")


if __name__ == "__main__":
    main()
