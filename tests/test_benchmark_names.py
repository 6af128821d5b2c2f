"""Generic code never names a benchmark: what a benchmark is and does is declared in its own package
(harness/benchmarks/NAME/) and asked through the registry (harness/benchmark.py). The import contract forbids
importing a benchmark's package (pyproject.toml); this test forbids naming one in a generic module's code (an
identifier, an attribute, a string it compares or sends), its prose (docstrings, comments) aside."""

from __future__ import annotations

import ast
import re
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[1] / "harness"
NAMES = re.compile(r"gaia2|harbor|math500|multi_?hop", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def named(source: str) -> list[tuple[int, str]]:
    """(line, word) of each benchmark name in the code of `source`: identifiers, attributes, imported names,
    string constants other than docstrings (an f-string's text too)."""
    tree = ast.parse(source)
    docs, found = _docstrings(tree), []
    for node in ast.walk(tree):
        words: list[str] = []
        if isinstance(node, ast.Name):
            words = [node.id]
        elif isinstance(node, ast.Attribute):
            words = [node.attr]
        elif isinstance(node, ast.alias):
            words = [node.name, node.asname or ""]
        elif isinstance(node, ast.ImportFrom):
            words = [node.module or ""]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            words = [node.name]
        elif isinstance(node, ast.arg):
            words = [node.arg]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            words = [node.value]
        found += [(getattr(node, "lineno", 0), m.group(0)) for word in words for m in NAMES.finditer(word)]
    return found


def generic_modules() -> list[Path]:
    return sorted(p for p in HARNESS.rglob("*.py") if "benchmarks" not in p.relative_to(HARNESS).parts)


def test_no_generic_module_names_a_benchmark():
    found = {f"{path.relative_to(HARNESS.parent)}:{line}: {word}" for path in generic_modules()
             for line, word in named(path.read_text(encoding="utf-8"))}
    assert not found, "\n".join(sorted(found))


def test_the_check_sees_code_and_not_prose():
    source = '"""Gaia2 and Harbor, in prose."""\n# MATH500 in a comment\nx = {"b": "gaia2"}\nif b.harbor: pass\n'
    assert sorted(named(source)) == [(3, "gaia2"), (4, "harbor")]
