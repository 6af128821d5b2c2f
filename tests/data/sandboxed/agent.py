"""A small agent program of our own, run inside the sandbox by `--agent sandbox:...` (stdlib only).

It speaks the OpenAI chat completions wire format with urllib to $OPENAI_BASE_URL (the harness's
relay), offers four tools it runs itself (run_python, run_shell, list_files, read_file; any other
tool a recording asks for is answered as unknown) and prints the model's last text. Flags:
`--answer-file` writes that text to $HARNESS_ANSWER_FILE instead and prints "see the file";
`--env-dump` first prints whether each variable it was given holds the host's key (tests);
`--mcp` takes the harness's tools instead of its own: it lists them from $HARNESS_MCP_URL (MCP over
streamable HTTP: initialize, tools/list), offers them to the model, runs each call there (tools/call),
and ends its answer with a line naming the tools it was given.
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


class Mcp:
    """The harness's tools over MCP's streamable HTTP, with urllib: one JSON-RPC message a POST."""

    def __init__(self):
        self.ids = 0
        self.post("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "agent.py", "version": "1"}})
        self.post("notifications/initialized", None)
        self.tools = self.post("tools/list", {})["tools"]

    def post(self, method, params):
        message = {"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})}
        if not method.startswith("notifications/"):
            self.ids += 1
            message["id"] = self.ids
        request = urllib.request.Request(os.environ["HARNESS_MCP_URL"], data=json.dumps(message).encode(), headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-06-18", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
        with urllib.request.urlopen(request, timeout=600) as response:
            text = response.read().decode()
        if "id" not in message:
            return None
        answer = json.loads(text)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    def schemas(self):
        return [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                                  "parameters": t["inputSchema"]}} for t in self.tools]

    def call(self, name, args):
        result = self.post("tools/call", {"name": name, "arguments": args})
        return "\n".join(c.get("text", "") for c in result["content"])


def complete(messages, tools):
    body = json.dumps({"model": os.environ["HARNESS_MODEL"], "messages": messages, "tools": tools}).encode()
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
    mcp = Mcp() if "--mcp" in sys.argv else None
    tools = mcp.schemas() if mcp else [schema(n, p) for n, p in TOOLS.items()]
    for _ in range(50):
        message = complete(messages, tools)
        calls = message.get("tool_calls") or []
        messages.append({"role": "assistant", "content": message.get("content"),
                         **({"tool_calls": calls} if calls else {})})
        if not calls:
            break
        for call in calls:
            try:
                name, args = call["function"]["name"], json.loads(call["function"]["arguments"] or "{}")
                result = mcp.call(name, args) if mcp else run_tool(name, args)
            except Exception as exc:  # noqa: BLE001 - told to the model, as any agent does
                result = f"Error: {type(exc).__name__}: {exc}"
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    answer = message.get("content") or ""
    if mcp:
        answer += "\ntools: " + ", ".join(t["name"] for t in mcp.tools)
    if "--answer-file" in sys.argv:
        with open(os.environ["HARNESS_ANSWER_FILE"], "w") as fh:
            fh.write(answer)
        answer = "see the file"
    print(answer)


if __name__ == "__main__":
    main()
