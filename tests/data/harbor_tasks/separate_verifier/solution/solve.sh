#!/bin/bash
echo hello > /app/answer.txt
echo scratch > /app/scratch.txt
mkdir -p /logs/artifacts && echo published > /logs/artifacts/note.txt
