"""The datasets package is split by job with one-way imports, and only its tabular reader touches pandas."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "harness" / "datasets"


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, at any depth (module level or inside a function)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_only_the_tabular_reader_imports_pandas():
    importers = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "harness").rglob("*.py")
                       if any(name.split(".")[0] == "pandas" for name in _imports(p)))
    assert importers == ["harness/datasets/tabular.py"]


def test_the_datasets_modules_import_each_other_one_way():
    modules = {p.stem: p for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    edges = {name: {other for other in modules if other != name
                    and f"harness.datasets.{other}" in _imports(path)} for name, path in modules.items()}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(name):] + [name]))
        if name not in done:
            for other in sorted(edges[name]):
                visit(other, path + [name])
            done.add(name)

    for name in sorted(modules):
        visit(name, [])
    assert "harness.benchmark.registered" in _imports(modules["load"])  # the adapters are the benchmarks'
    assert edges["load"] == {"hub", "model"}


def test_json_datasets_load_without_pandas_and_csv_with_it(tmp_path):
    (tmp_path / "data.jsonl").write_text(json.dumps({"instance_id": "a", "question": "q", "answer": "1"}) + "\n")
    (tmp_path / "data.csv").write_text("instance_id,question,answer\na,q,1\n")
    code = f"""if True:
        import sys
        from harness.datasets import load_dataset
        for path, split in [({str(tmp_path / 'data.jsonl')!r}, None), ('datasets/gaia-smoke', 'validation'),
                            ('datasets/math500-sample', None), ('datasets/multihoprag-sample', None)]:
            assert load_dataset(path, split).instances, path
            assert 'pandas' not in sys.modules, path
        load_dataset({str(tmp_path / 'data.csv')!r})
        print('pandas' in sys.modules)
        """
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"HARNESS_STATE_DIR": str(tmp_path / "state"), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"  # the CSV did need it: the check above can see an import
