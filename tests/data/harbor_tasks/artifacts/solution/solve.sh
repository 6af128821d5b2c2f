#!/bin/bash
echo hello > /app/answer.txt
mkdir -p /app/out/deeper
echo kept > /app/out/a.txt
echo kept > /app/out/deeper/b.txt
echo dropped > /app/out/c.tmp
