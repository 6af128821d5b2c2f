#!/bin/bash
# The agent ran as [agent] user, the verifier runs as [verifier] user.
mkdir -p /logs/verifier
echo "agent: $(cat /app/who.txt 2>/dev/null); verifier: $(id -un)"
if [ "$(cat /app/who.txt 2>/dev/null)" = worker ] && [ "$(id -un)" = checker ]; then echo 1; else echo 0; fi \
  > /logs/verifier/reward.txt
