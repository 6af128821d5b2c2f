#!/usr/bin/env python3
# Harbor runs solve.sh as an executable (its #! line), not as `bash solve.sh`.
from pathlib import Path

Path("/app/answer.txt").write_text("python\n")
