#!/bin/bash
# Runs in the verifier's own image (tests/Dockerfile): its tool, its WORKDIR's file, the declared artifact.
mkdir -p /logs/verifier
if [ "$(cat marker 2>/dev/null)" = verifier ] && check-answer /app/answer.txt; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
