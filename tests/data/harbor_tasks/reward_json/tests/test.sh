#!/bin/bash
# Several rewards: "reward" is the headline, the others are kept beside it.
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = hello ]; then
  echo '{"reward": 1, "style": 0.5, "steps": 3}' > /logs/verifier/reward.json
else
  echo '{"reward": 0, "style": 0, "steps": 3}' > /logs/verifier/reward.json
fi
