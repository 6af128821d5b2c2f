#!/bin/bash
# A reward.json that is a bare number, not an object of rewards: Harbor 0.25 reads no reward from it.
if [ "$(cat /app/answer.txt 2>/dev/null)" = yes ]; then echo 1; else echo 0; fi > /logs/verifier/reward.json
