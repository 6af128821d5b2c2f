#!/bin/bash
bash /tests/expect.sh "$EXPECTED"
