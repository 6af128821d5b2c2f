#!/bin/bash
# The work is done, then the agent's time runs out: Harbor still runs the verifier on what was done.
echo done > /app/answer.txt
sleep 600
