#!/bin/bash
# Reward 1 when /app/answer.txt says hello, else 0 (Harbor reads /logs/verifier/reward.txt).
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = hello ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
