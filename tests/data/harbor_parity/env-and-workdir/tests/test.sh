#!/bin/bash
# Run in the image's working directory with [verifier] env; a partial reward when only the place is right.
if [ "$(pwd)" != /app ]; then echo 0 > /logs/verifier/reward.txt; exit 0; fi
if [ "$(cat answer.txt 2>/dev/null)" = "$EXPECTED" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0.25 > /logs/verifier/reward.txt
fi
