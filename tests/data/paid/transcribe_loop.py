"""An in-sandbox agent program (stdlib only) that calls transcribe_audio over $HARNESS_MCP_URL again and again,
asking its model nothing: each call is a paid one on the host (tests/test_paid_calls.py)."""

import json
import os
import sys
import urllib.request


def post(message):
    request = urllib.request.Request(os.environ["HARNESS_MCP_URL"], data=json.dumps(message).encode(), headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read().decode() or "null")


post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "loop", "version": "1"}}})
said = []
for i in range(int(sys.argv[1])):
    answer = post({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                   "params": {"name": "transcribe_audio", "arguments": {"path": "tone.wav"}}})
    said.append(answer["result"]["content"][0]["text"].splitlines()[0])
print("<solution>fox</solution>", json.dumps(said))
