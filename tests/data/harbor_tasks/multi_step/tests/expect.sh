#!/bin/bash
# Shared by both steps' tests: reward 1 when $ANSWER (from [verifier] env) holds exactly "$1", else 0.
mkdir -p /logs/verifier
if [ "$(cat "$ANSWER" 2>/dev/null)" = "$1" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
