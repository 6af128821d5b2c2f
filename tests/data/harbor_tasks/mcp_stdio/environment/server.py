"""A stdio MCP server of the standard library alone (the task's image has no MCP SDK): one tool, get_secret, whose
answer is the vault's word and the host it runs on. One JSON-RPC message a line, in and out."""

import json
import os
import sys

SECRET = open("/opt/vault/secret.txt").read().strip()
TOOLS = [{"name": "get_secret", "description": "The vault's secret word.",
          "inputSchema": {"type": "object", "properties": {}}}]

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:  # a notification: no answer
        continue
    method, params = message.get("method"), message.get("params") or {}
    answer = {"jsonrpc": "2.0", "id": message["id"]}
    if method == "initialize":
        answer["result"] = {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                            "capabilities": {"tools": {}}, "serverInfo": {"name": "vault", "version": "1.0"}}
    elif method == "tools/list":
        answer["result"] = {"tools": TOOLS}
    elif method == "tools/call" and params.get("name") == "get_secret":
        text = f"{SECRET} (from {os.uname().nodename})"
        answer["result"] = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "ping":
        answer["result"] = {}
    else:
        answer["error"] = {"code": -32601, "message": f"no method {method}"}
    print(json.dumps(answer), flush=True)
