#!/bin/bash
echo "hello $(cat /app/suffix.txt)" > /app/answer.txt
