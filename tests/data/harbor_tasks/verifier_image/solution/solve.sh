#!/bin/bash
echo hello > /app/answer.txt
