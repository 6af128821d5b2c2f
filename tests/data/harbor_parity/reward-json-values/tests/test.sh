#!/bin/bash
# reward.json's values as Harbor 0.25 reads them: a JSON true is a number (1) there.
if [ "$(cat /app/answer.txt 2>/dev/null)" = yes ]; then
  echo '{"reward": true, "checks": 2}' > /logs/verifier/reward.json
else
  echo '{"reward": false, "checks": 2}' > /logs/verifier/reward.json
fi
