#!/bin/bash
# [environment] env is in the environment of every command: the solution's too.
printf "%s\n" "$GREETING" > /app/answer.txt
