#!/bin/bash
# Harbor runs the verifier in [environment] workdir too.
if [ "$(pwd)" = /srv/task ] && [ "$(cat answer.txt 2>/dev/null)" = done ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
