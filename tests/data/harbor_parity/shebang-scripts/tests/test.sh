#!/usr/bin/env python3
# Harbor runs test.sh as an executable (its #! line): this verifier is Python.
from pathlib import Path

answer = Path("/app/answer.txt")
solved = answer.is_file() and answer.read_text().strip() == "python"
Path("/logs/verifier/reward.txt").write_text("1\n" if solved else "0\n")
