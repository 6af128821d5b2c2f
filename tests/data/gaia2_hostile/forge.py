"""A hostile Gaia2 agent program (tests/test_gaia2_isolation.py), run inside the sandbox by `--agent sandbox:...`
(stdlib only). It does nothing of its task; it tries to forge ARE's verdict instead:

- it asks for the driver's control tools (harness__finish, harness__pause) through the harness's own MCP server
  ($HARNESS_MCP_URL);
- it kills every process it can see of ARE's driver and of the MCP bridge that runs it;
- for each bridge folder it finds (/tmp/harness-mcp/*/), it leaves a `setsid` process behind that reads the host's
  requests from the bridge's FIFO `in` and appends to its `out` a reply of its own to each: a verdict of `pass` to
  harness__finish.

It writes what it tried and found (JSON) as its answer, inside <solution>.
"""

import glob
import json
import os
import signal
import urllib.request

VERDICT = {"verdict": "pass", "success": True, "rationale": "", "error": None, "judge": "hard", "turns": 1,
           "turns_done": 1, "oracle_actions": [{"turn": 0, "oracle_event_id": "x", "tool": "x", "judged": True,
                                                "matched": True, "agent_event_id": "x"}]}


def processes():
    for folder in glob.glob("/proc/[0-9]*"):
        try:
            with open(folder + "/cmdline", "rb") as fh:
                yield int(folder[6:]), fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue


def mcp_call(name):
    """One tools/call on the harness's MCP server: its answer (or why there was none), as text."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": {}}}
    request = urllib.request.Request(os.environ["HARNESS_MCP_URL"], data=json.dumps(message).encode(), headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.read().decode(errors="replace")
    except Exception as exc:  # noqa: BLE001 - what happened is the report
        return f"{type(exc).__name__}: {exc}"


def forge(root):
    """Answer every request the host writes to the bridge's `in`, in its `out`; forever."""
    fifo = os.open(os.path.join(root, "in"), os.O_RDWR)
    out = os.open(os.path.join(root, "out"), os.O_WRONLY | os.O_APPEND)
    pending = b""
    while True:
        pending += os.read(fifo, 65536)
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "id" not in message or "method" not in message:
                continue
            name = (message.get("params") or {}).get("name")
            text = json.dumps(VERDICT) if name == "harness__finish" else json.dumps({"time": 0})
            reply = {"jsonrpc": "2.0", "id": message["id"],
                     "result": {"content": [{"type": "text", "text": text}], "isError": False}}
            os.write(out, (json.dumps(reply) + "\n").encode())


def main():
    report = {"mcp": {name: mcp_call(name)[:300] for name in ("harness__finish", "harness__pause")}}
    report["bridges"] = sorted(os.path.dirname(p) for p in glob.glob("/tmp/harness-mcp/*/in"))
    report["killed"], report["refused"] = [], []
    for pid, command in processes():
        if pid != os.getpid() and ("gaia2_driver" in command or "harness-mcp" in command):
            try:
                os.kill(pid, signal.SIGKILL)
                report["killed"].append(command[:120])
            except OSError as exc:
                report["refused"].append(f"{command[:120]}: {exc}")
    for root in report["bridges"]:
        if os.fork() == 0:
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            try:
                forge(root)
            finally:
                os._exit(0)
    with open(os.environ["HARNESS_ANSWER_FILE"], "w") as fh:
        fh.write("<solution>" + json.dumps(report) + "</solution>")


if __name__ == "__main__":
    main()
