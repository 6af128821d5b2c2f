"""A small agent program of our own, run inside the sandbox by `--agent sandbox:...` (stdlib only).

It speaks the OpenAI chat completions wire format with urllib to $OPENAI_BASE_URL (the harness's
relay), offers four tools it runs itself (run_python, run_shell, list_files, read_file; any other
tool a recording asks for is answered as unknown) and prints the model's last text. Flags:
`--answer-file` writes that text to $HARNESS_ANSWER_FILE instead and prints "see the file";
`--env-dump` first prints whether each variable it was given holds the host's key (tests).
"""

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

TOOLS = {
    "run_python": {"code": "string"},
    "run_shell": {"command": "string"},
    "list_files": {"path": "string"},
    "read_file": {"path": "string"},
}


def schema(name, params):
    return {"type": "function", "function": {"name": name, "description": name, "parameters": {
        "type": "object", "properties": {k: {"type": v} for k, v in params.items()}, "required": list(params)}}}


def run_tool(name, args):
    if name == "run_python":
        done = subprocess.run([sys.executable, "-c", args.get("code", "")], capture_output=True, text=True, timeout=120)
        return done.stdout + done.stderr + f"\nexit code: {done.returncode}"
    if name == "run_shell":
        done = subprocess.run(["bash", "-c", args.get("command", "")], capture_output=True, text=True, timeout=120)
        return done.stdout + done.stderr + f"\nexit code: {done.returncode}"
    if name == "list_files":
        return "\n".join(sorted(os.listdir(args.get("path") or ".")))
    if name == "read_file":
        with open(args["path"], errors="replace") as fh:
            return fh.read()[:20000]
    return f"Error: no tool named {name!r}"


def complete(messages):
    body = json.dumps({"model": os.environ["HARNESS_MODEL"], "messages": messages,
                       "tools": [schema(n, p) for n, p in TOOLS.items()]}).encode()
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body, headers={
        "Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            return json.load(response)["choices"][0]["message"]
    except urllib.error.HTTPError as exc:
        print(f"model refused: {exc.code} {exc.read().decode(errors='replace')}", file=sys.stderr)
        sys.exit(3)


def main():
    if "--env-dump" in sys.argv:
        print(json.dumps({k: v for k, v in os.environ.items() if k.startswith(("OPENAI", "ANTHROPIC", "HARNESS"))}))
    messages = [{"role": "system", "content": "Solve the task with the tools; answer in <solution></solution>."},
                {"role": "user", "content": sys.stdin.read()}]
    for _ in range(50):
        message = complete(messages)
        calls = message.get("tool_calls") or []
        messages.append({"role": "assistant", "content": message.get("content"),
                         **({"tool_calls": calls} if calls else {})})
        if not calls:
            break
        for call in calls:
            try:
                result = run_tool(call["function"]["name"], json.loads(call["function"]["arguments"] or "{}"))
            except Exception as exc:  # noqa: BLE001 - told to the model, as any agent does
                result = f"Error: {type(exc).__name__}: {exc}"
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    answer = message.get("content") or ""
    if "--answer-file" in sys.argv:
        with open(os.environ["HARNESS_ANSWER_FILE"], "w") as fh:
            fh.write(answer)
        answer = "see the file"
    print(answer)


if __name__ == "__main__":
    main()
