#!/bin/bash
# The oracle asks the task's server itself, over its stdio, as an MCP client would.
printf '%s\n' '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_secret", "arguments": {}}}' \
  | python3 /opt/vault/server.py \
  | python3 -c 'import json, sys; print(json.loads(sys.stdin.readline())["result"]["content"][0]["text"].split()[0])' \
  > /app/answer.txt
