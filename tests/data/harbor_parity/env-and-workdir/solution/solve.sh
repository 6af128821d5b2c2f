#!/bin/bash
# Run in the image's working directory, with [solution] env.
printf '%s\n' "$ANSWER" > answer.txt
