#!/bin/bash
# The healthcheck ran (and passed on its second try) before the agent.
mkdir -p /logs/verifier
if [ -e /tmp/checked-once ] && [ "$(cat /app/answer.txt 2>/dev/null)" = hello ]; then echo 1; else echo 0; fi \
  > /logs/verifier/reward.txt
