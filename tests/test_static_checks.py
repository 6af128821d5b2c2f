"""The static checks of scripts/check.sh (configured in pyproject.toml) hold on the tree, and each one
bites: ruff's rule families and line length, mypy's strictness on the contracts only, and every
import-linter contract finds a planted violation of its rule. A tool that is missing fails the test
with how to install it (nothing is skipped)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
INSTALL = "bash scripts/setup.sh (it installs pyproject.toml's dev extra: ruff, mypy, import-linter)"
# Every import-linter contract of pyproject.toml: each must hold on the tree and break on its plant below.
CONTRACTS = [contract["name"] for contract in
             tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]]
LAYERS = "One layer order, top to bottom"


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run {INSTALL}")
    return str(path)


def _run(argv: list[str], cwd: Path = ROOT, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_ruff_finds_nothing():
    done = _run([_tool("ruff"), "check", "--output-format", "concise", "--no-cache"])
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_nothing():
    # The cache of scripts/check.sh for this checkout (pyproject.toml's [tool.mypy] says why one per path).
    cache = Path.home() / ".cache" / "harness" / "mypy" / hashlib.sha1(str(ROOT).encode()).hexdigest()[:12]
    done = _run([_tool("mypy"), "--cache-dir", str(cache)], timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports with root/pyproject.toml over root/harness (wide: a long contract name is not wrapped)."""
    # The editable install's finder would resolve `harness` to the real tree: drop it, read root's.
    code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f)]; "
            f"sys.path.insert(0, {str(root)!r}); sys.argv = ['lint-imports', '--no-logo', '--no-cache']; "
            "from importlinter.cli import lint_imports_command; lint_imports_command()")
    _tool("lint-imports")
    return subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "1000"})


def test_import_contracts_hold():
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert LAYERS in CONTRACTS
    for name in CONTRACTS:
        assert f"{name} KEPT" in done.stdout, done.stdout


def test_ruff_applies_each_rule_family_at_the_line_length(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent("""\
        import sys
        import os
        from typing import Optional


        def f(x: Optional[int], seen=[]) -> None:
            l = 1
            print(l, x, seen)   \n
        WIDE = "%s"  # {pad}
        FITS = "%s"  # {fits}
        """).format(pad="x" * 106, fits="x" * 105))  # 121 and 120 characters
    done = _run([_tool("ruff"), "check", "--no-cache", "--output-format", "concise",
                 "--config", str(ROOT / "pyproject.toml"), str(bad)])
    assert done.returncode == 1
    found = {line.split(" ")[1] for line in done.stdout.splitlines() if line.startswith(str(bad))}
    # pyflakes, isort, pyupgrade, bugbear, pycodestyle (E and W); only the line over 120 is too long
    assert {"F401", "I001", "UP045", "B006", "E741", "W291", "E501"} <= found, done.stdout
    wide = 1 + next(n for n, line in enumerate(bad.read_text().splitlines()) if line.startswith("WIDE"))
    too_long = [line for line in done.stdout.splitlines() if " E501 " in line]
    assert len(too_long) == 1 and f":{wide}:" in too_long[0], done.stdout  # 121 is over, 120 is in


def test_mypy_is_strict_on_the_contracts_and_lenient_elsewhere(tmp_path):
    """The strict flags apply to harness.errors (one of the strict modules) and not to other modules;
    a plain type error is found everywhere."""
    pkg = tmp_path / "harness"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    untyped = "def untyped(x):\n    return x\n\n\ndef typed() -> int:\n    return 'not an int'\n"
    (pkg / "errors.py").write_text(untyped)
    (pkg / "elsewhere.py").write_text(untyped)
    done = _run([_tool("mypy"), "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "c"),
                 "harness"], cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 1
    assert any(line.startswith("harness/errors.py:1:") and "[no-untyped-def]" in line for line in lines), done.stdout
    assert not any(line.startswith("harness/elsewhere.py:1:") for line in lines), done.stdout
    for module in ("errors", "elsewhere"):
        assert any(line.startswith(f"harness/{module}.py:6:") and "[return-value]" in line for line in lines)


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "harness", tmp_path / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_every_import_contract_catches_a_planted_violation(tmp_path):
    """A copy of harness/ with one forbidden import per contract: each contract is reported broken."""
    _copy(tmp_path)
    planted = {
        "harness/scoring/planted_runner.py": "import harness.runner.run\n",
        "harness/report/planted_docker.py": "import docker\n",
        "harness/datasets/planted_autogen.py": "from autogen_core import CancellationToken\n",
        "harness/models/planted_provider.py": "from harness.sandbox.docker import provider\n",
        "harness/datasets/planted_hub.py": "import huggingface_hub\n",
        "harness/traces/planted_upward.py": "import harness.models.meter\n",  # a layer imports one above it
        "harness/sandbox/docker/planted_swarm.py": "import harness.sandbox.swarm.provider\n",
        "harness/agents/sandboxed/planted_plain.py": "import harness.agents.plain.runner\n",
        "harness/runner/planted_benchmark.py": "import harness.benchmarks.gaia2\n",  # not through the registry
    }
    for path, text in planted.items():
        (tmp_path / path).write_text(text)
    appended = {
        # The fork server once imported the Docker provider under an ignore entry: no such entry is left.
        "harness/runner/agent_process/forkserver.py": "harness.sandbox.docker.provider",
        "harness/scoring/judge.py": "harness.scoring.gaia",  # one scorer on another
        "harness/benchmarks/math500/scorer.py": "harness.benchmarks.gaia2.scorer",  # one benchmark on another
        "harness/environments/code.py": "harness.environments.audio",  # one environment on another
        "harness/environments/families/code.py": "harness.environments.families.audio",  # one family on another
    }
    for path, module in appended.items():
        with open(tmp_path / path, "a") as fh:
            fh.write(f"\nimport {module}\n")
    with open(tmp_path / "harness/models/chat.py", "a") as fh:  # a circle: factory.py builds on chat.py
        fh.write("\nimport harness.models.factory\n")
    done = _lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    for name in CONTRACTS:
        assert f"{name} BROKEN" in done.stdout, done.stdout
    assert "No cycles are allowed in harness.models." in done.stdout and "- .chat -> .factory" in done.stdout
    for path in planted:
        assert path.removesuffix(".py").replace("/", ".") in done.stdout, done.stdout
    for path, module in appended.items():
        assert f"{path.removesuffix('.py').replace('/', '.')} -> {module}" in done.stdout, done.stdout


def test_the_layers_contract_names_an_upward_import_and_an_unplaced_module(tmp_path):
    """One upward import (the report importing the runner) and one new top-level module in no layer:
    lint-imports fails on the layers contract, naming both."""
    _copy(tmp_path)
    with open(tmp_path / "harness/report/build.py", "a") as fh:
        fh.write("\nimport harness.runner.prompt\n")
    (tmp_path / "harness/unplaced.py").write_text("")
    done = _lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    broken = [name for name in CONTRACTS if f"{name} BROKEN" in done.stdout]
    # the runner contract forbids this import too, and it closes a circle (the runner imports the report);
    # every other contract holds
    assert sorted(broken) == sorted([LAYERS, "The stages below the runner never import it",
                                     "No import cycle among the siblings of any package"]), done.stdout
    assert "harness.report is not allowed to import harness.runner" in done.stdout, done.stdout
    assert "harness.report.build -> harness.runner.prompt" in done.stdout, done.stdout
    assert "harness.unplaced" in done.stdout, done.stdout
