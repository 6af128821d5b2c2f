"""Every HARNESS_* variable is read in one place (harness/settings.py), typed, and documented in
one table of docs/reference.md; a bad value is an input error naming the variable. The docs' other
reference lists (a run directory's files, the error kinds) follow the code too. Pure Python."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from harness.errors import InputError
from harness.settings import ELSEWHERE, Settings, settings

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "docs" / "reference.md"  # the settings table, the error kinds, the exit codes
RESULTS = ROOT / "docs" / "results.md"  # the files of a run directory
NAME = re.compile(r"HARNESS_[A-Z0-9_]+(\*)?")
ROW = re.compile(r"^\| `(HARNESS_[A-Z0-9_]+)` \| (.*?) \| (.*?) \|$")
# Runs inside the sandbox container (or builds its base), so it cannot import harness.settings:
# the variables it reads are ELSEWHERE's.
IN_IMAGE = ROOT / "images"


def field_vars() -> dict[str, object]:
    return {f"HARNESS_{name.upper()}": field for name, field in Settings.model_fields.items()}


def known() -> set[str]:
    return set(field_vars()) | set(ELSEWHERE)


def documented_rows() -> dict[str, tuple[str, str]]:
    """The settings table's rows; no other page of the docs may have a second table of them."""
    rows: dict[str, tuple[str, str]] = {}
    for page in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))):
        for line in page.read_text().splitlines():
            if (match := ROW.match(line)) and page != REFERENCE:
                raise AssertionError(f"{page.name} has a row for {match.group(1)}: the table is {REFERENCE.name}'s")
    for line in REFERENCE.read_text().splitlines():
        if match := ROW.match(line):
            assert match.group(1) not in rows, f"{REFERENCE.name}: two rows for {match.group(1)}"
            rows[match.group(1)] = (match.group(2), match.group(3))
    return rows


def source_files() -> list[Path]:
    files = [p for top in ("harness", "images", "scripts", "bench") for p in (ROOT / top).rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]
    assert any(p.name == "sandboxd.py" for p in files) and any(p.name == "ensure-docker.sh" for p in files)
    return files


def shown(default) -> str:
    if isinstance(default, bool):
        return str(int(default))
    if isinstance(default, float | int):
        return f"{default:g}"
    return str(default)


def test_every_variable_has_one_documented_row_and_every_row_a_variable():
    rows = documented_rows()
    assert not sorted(known() - set(rows)), f"the settings table lacks rows for {sorted(known() - set(rows))}"
    assert not sorted(set(rows) - known()), f"the settings table has unknown variables {sorted(set(rows) - known())}"
    for var, field in field_vars().items():
        default, meaning = rows[var]
        assert meaning.strip(), var
        if field.default is not None:
            assert shown(field.default) in default, f"documented default of {var} is {default!r}, not {field.default!r}"


def test_every_harness_variable_in_the_source_is_a_setting_or_documented_elsewhere():
    undocumented = {}
    for path in source_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for match in NAME.finditer(text):
            name, wildcard = match.group(0).rstrip("*"), match.group(1)
            ok = any(v.startswith(name) for v in known()) if wildcard else name in known()
            if not ok:
                undocumented.setdefault(name, set()).add(path.relative_to(ROOT).as_posix())
    assert not undocumented, f"read but neither a Settings field nor in ELSEWHERE: {undocumented}"


ENV_READ = re.compile(r"(?:^|\.)(?:environ\.(?:get|pop|setdefault)|getenv)$")


def env_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """HARNESS_* names read through os.environ / os.getenv (calls, subscripts, `in` tests)."""
    found = []

    def harness_name(node) -> bool:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value.startswith("HARNESS_")
        if isinstance(node, ast.JoinedStr) and node.values:  # f"HARNESS_{x}"
            return harness_name(node.values[0])
        return False

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and ENV_READ.search(ast.unparse(node.func)) \
                and harness_name(node.args[0]):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("environ") \
                and harness_name(node.slice):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Compare) and harness_name(node.left) \
                and any(ast.unparse(c).endswith("environ") for c in node.comparators):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_only_settings_reads_harness_variables_from_the_environment():
    assert env_reads(ast.parse('os.environ.get("HARNESS_X"); os.getenv(f"HARNESS_{k}"); os.environ["HARNESS_Y"]; '
                               '"HARNESS_Z" in os.environ; environ.pop("HARNESS_W")')) != []
    assert len(env_reads(ast.parse((IN_IMAGE / "sandbox" / "sandboxd.py").read_text()))) >= 2  # the check sees reads
    offenders = []
    for path in source_files():
        if path.suffix != ".py" or path == ROOT / "harness" / "settings.py" or path.is_relative_to(IN_IMAGE) \
                or path.is_relative_to(ROOT / "bench"):
            continue
        text = path.read_text()
        tree = ast.parse(text)
        offenders += [f"{path.relative_to(ROOT)}:{line}: {code}" for line, code in env_reads(tree)]
        # Belt and braces for reads the AST check cannot see (a name built elsewhere, then looked up). The
        # lines of a multi-line string are not this process's code: a docstring, or a script the sandbox runs
        # (environments/proxied.py reads the proxy's variables there, as sandboxd does: ELSEWHERE's).
        elsewhere = {i for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
                     for i in range(node.lineno, (node.end_lineno or node.lineno) + 1)
                     if node.end_lineno != node.lineno}
        offenders += [f"{path.relative_to(ROOT)}:{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1)
                      if re.search(r"\benviron\b|getenv", line) and "HARNESS_" in line
                      and not line.lstrip().startswith("#") and i not in elsewhere]
    assert not offenders, "read a HARNESS_ variable outside harness/settings.py:\n" + "\n".join(sorted(set(offenders)))


@pytest.fixture
def fresh_settings(monkeypatch):
    for var in field_vars():
        monkeypatch.delenv(var, raising=False)
    settings.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    settings.cache_clear()


@pytest.mark.parametrize("var, value", [
    ("HARNESS_PORT_RANGE", "abc"),
    ("HARNESS_PORT_RANGE", "9-1"),
    ("HARNESS_PORT_RANGE", "1-70000"),
    ("HARNESS_DOCKER_TIMEOUT", "-1"),
    ("HARNESS_DOCKER_MAX_STARTS", "0"),
    ("HARNESS_SANDBOX_READY_TIMEOUT", "soon"),
    ("HARNESS_NO_PULL", "perhaps"),
])
def test_a_bad_value_is_an_input_error_naming_the_variable(fresh_settings, var, value):
    fresh_settings.setenv(var, value)
    with pytest.raises(InputError, match=var):
        settings()
    settings.cache_clear()
    fresh_settings.delenv(var)
    assert settings() == Settings()  # nothing else in this environment is wrong


def test_values_are_typed_and_read_once(fresh_settings):
    fresh_settings.setenv("HARNESS_PORT_RANGE", " 20000-20009 ")
    fresh_settings.setenv("HARNESS_DOCKER_TIMEOUT", "7.5")
    fresh_settings.setenv("HARNESS_NO_PULL", "1")
    first = settings()
    assert first.ports() == range(20000, 20010) and first.docker_timeout == 7.5 and first.no_pull is True
    fresh_settings.setenv("HARNESS_DOCKER_TIMEOUT", "9")
    assert settings() is first  # cached until cache_clear()
    settings.cache_clear()
    assert settings().docker_timeout == 9


def test_the_docs_list_every_file_of_a_run_directory_and_every_error_kind():
    import harness.results.layout as layout
    from harness.errors import ERROR_KINDS

    section = RESULTS.read_text().split("## Files in an output directory", 1)[1].split("\n## ", 1)[0]
    entries = [line.strip() for line in layout.__doc__.split("\n\n", 1)[1].strip().splitlines()]
    assert len(entries) >= 9
    missing = [entry for entry in entries if entry not in section]
    assert not missing, f"{RESULTS.name}'s run directory files differ from harness/results/layout.py: {missing}"
    errors = REFERENCE.read_text().split("## Errors", 1)[1].split("\n## ", 1)[0]
    assert not [k for k in ERROR_KINDS if f"| `{k}` |" not in errors], f"{REFERENCE.name}'s Errors table lacks a kind"
