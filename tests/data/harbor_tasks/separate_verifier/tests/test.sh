#!/bin/bash
# A fresh container holds the declared artifacts (an executable one runs) and the agent's /logs/artifacts, nothing
# else of the agent's.
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = hello ] && [ ! -e /app/scratch.txt ] && [ "$(/app/bin/greet)" = hello ] \
    && [ "$(cat /logs/artifacts/note.txt 2>/dev/null)" = published ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
