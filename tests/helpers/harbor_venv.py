"""Harbor 0.25 itself, for the tests that compare the harness with it: a Python 3.12 venv with `harbor==0.25.0`,
made once per machine (a file lock: concurrent pytest processes and checkouts share it) and reused.

`harbor_python()` is the venv's interpreter, or a pytest skip saying why there is none (no Python 3.12 on this
machine: Harbor needs it; pip could not install Harbor). It never fails a test for that. Python 3.12 is found as
HARNESS_TEST_PYTHON312, a pyenv version under ~/.pyenv/versions (the image has one) or `python3.12` on PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.locks import machine_lock

HARBOR = "harbor==0.25.0"
VENV = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "harness-tests" / "harbor-0.25.0-py3.12"
INSTALL_S = 900  # pip's download and install of Harbor and its dependencies


def python312() -> Path | None:
    """A Python 3.12 interpreter that runs on this machine, or None (a pyenv shim without 3.12 selected does not)."""
    found = [os.environ.get("HARNESS_TEST_PYTHON312"),
             *map(str, sorted((Path.home() / ".pyenv" / "versions").glob("3.12*/bin/python3.12"), reverse=True)),
             shutil.which("python3.12")]
    for candidate in filter(None, found):
        try:
            said = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"],
                                  capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if said.stdout.strip() == "True":
            return Path(candidate)
    return None


def harbor_python() -> Path:
    """The interpreter of a venv holding Harbor 0.25.0 (made on first use, under the lock), or a skip."""
    python = VENV / "bin" / "python"
    ready = VENV / ".ready"  # written last: a venv whose install was cut off is made again
    if ready.is_file():
        return python
    base = python312()
    if base is None:
        pytest.skip("Harbor 0.25 needs Python 3.12, and this machine has none (set HARNESS_TEST_PYTHON312)")
    with machine_lock("harbor-venv", timeout=INSTALL_S + 60):
        if ready.is_file():
            return python
        shutil.rmtree(VENV, ignore_errors=True)
        VENV.parent.mkdir(parents=True, exist_ok=True)
        steps = ([str(base), "-m", "venv", str(VENV)],
                 [str(python), "-m", "pip", "install", "--quiet", HARBOR])
        for step in steps:
            try:
                done = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_S)
            except subprocess.TimeoutExpired:
                pytest.skip(f"{' '.join(step[-3:])} did not end within {INSTALL_S} s")
            if done.returncode != 0:
                pytest.skip(f"could not make Harbor's venv ({' '.join(step[-3:])}): {done.stderr.strip()[-500:]}")
        ready.write_text(HARBOR + "\n")
    return python
