#!/bin/bash
# Run in the working directory before the step's agent: the word the step asks for.
echo world > /app/suffix.txt
