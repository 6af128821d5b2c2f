#!/bin/bash
# [environment] env reaches the verifier as well.
if [ -n "$GREETING" ] && [ "$(cat /app/answer.txt 2>/dev/null)" = "$GREETING" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
