"""MultiHop-RAG (queries ``MultiHopRAG.json`` + news corpus ``corpus.json``) into `Instance`s.

Layout (the official repository's ``dataset/`` folder):
- ``MultiHopRAG.json``: a JSON list of ``{query, answer, question_type, evidence_list: [{title,
  source, url, fact, published_at, ...}]}``;
- ``corpus.json``: a JSON list of articles ``{title, body, source, url, published_at, author,
  category}``.
Detected for a folder holding both files, or for a ``MultiHopRAG.json`` given directly (the
corpus beside it).

instance_id = ``mhr-`` + the first 12 hex digits of sha256(query) (a repeated query gets
``-2``, ``-3``... in file order); question = query; answer = answer. The corpus is an attachment
of every instance (``/workspace/corpus.json``, searched by the ``search_corpus`` tool);
metadata: ``question_type``, ``evidence`` (title, url, source, published_at of each evidence
item), ``corpus`` (the attachment's name). Every item and every article is checked before
anything is returned; problems raise one InputError naming the item.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from harness.datasets.fingerprint import dataset_fingerprint
from harness.datasets.model import Dataset, Instance
from harness.datasets.problems import raise_problems, refuse_split
from harness.errors import InputError
from harness.sandbox.files import MAX_ARCHIVE_BYTES

QUERIES = "MultiHopRAG.json"
CORPUS = "corpus.json"
EVIDENCE_FIELDS = ("title", "url", "source", "published_at")


def detect(path: Path) -> Path | None:
    """The queries file when `path` is a MultiHop-RAG folder or its MultiHopRAG.json, else None."""
    file = path / QUERIES if path.is_dir() else path
    if file.name != QUERIES or not file.is_file():
        return None
    return file if (file.parent / CORPUS).is_file() else None


def query_id(query: str) -> str:
    return "mhr-" + hashlib.sha256(query.strip().encode("utf-8")).hexdigest()[:12]


def _json_list(file: Path) -> list[Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"dataset file {file} could not be read: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"dataset file {file}: invalid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, list):
        raise InputError(f"dataset file {file}: expected a JSON list, got {type(data).__name__}")
    return data


def _nonempty(item: dict, key: str) -> bool:
    return isinstance(item.get(key), str) and bool(item[key].strip())


def corpus_problems(articles: list[Any]) -> list[str]:
    """What is wrong with the corpus: every article needs a title and a body."""
    problems = []
    for number, article in enumerate(articles, start=1):
        if not isinstance(article, dict):
            problems.append(f"{CORPUS} item {number}: expected an object, got {type(article).__name__}")
        elif missing := [k for k in ("title", "body") if not _nonempty(article, k)]:
            problems.append(f"{CORPUS} item {number}: empty or missing {', '.join(map(repr, missing))}")
    return problems


def evidence_of(item: dict) -> list[dict]:
    """The evidence list reduced to what reports need; ValueError when it is malformed."""
    evidence = item.get("evidence_list", [])
    if not isinstance(evidence, list) or not all(isinstance(e, dict) for e in evidence):
        raise ValueError("'evidence_list' must be a list of objects")
    return [{k: e.get(k) for k in EVIDENCE_FIELDS} for e in evidence]


def instance_of(item: Any, instance_id: str, root: Path) -> Instance:
    """One query as an Instance; ValueError says what is wrong with it."""
    if not isinstance(item, dict):
        raise ValueError(f"expected an object, got {type(item).__name__}")
    missing = [k for k in ("query", "answer", "question_type") if not _nonempty(item, k)]
    if missing:
        raise ValueError(f"empty or missing {', '.join(map(repr, missing))}")
    metadata = {"question_type": item["question_type"].strip(),
                "evidence": evidence_of(item), "corpus": CORPUS}
    return Instance(instance_id=instance_id, question=item["query"].strip(), answer=item["answer"].strip(),
                    files=[CORPUS], root=root, metadata=metadata, benchmark="multihoprag")


def load(file: Path, split: str | None = None) -> Dataset:
    """Every query of the MultiHop-RAG folder of `file`; raises InputError listing every problem
    (a --split: refused)."""
    refuse_split(split, file)
    root = file.parent.resolve()
    if (size := (root / CORPUS).stat().st_size) > MAX_ARCHIVE_BYTES:
        raise InputError(f"dataset {root}: {CORPUS} has {size} bytes, over the {MAX_ARCHIVE_BYTES} bytes "
                         "one sandbox upload may carry")
    problems = corpus_problems(_json_list(root / CORPUS))
    instances: list[Instance] = []
    counts: dict[str, int] = {}
    for number, item in enumerate(_json_list(file), start=1):
        base = query_id(item["query"]) if isinstance(item, dict) and _nonempty(item, "query") else ""
        counts[base] = counts.get(base, 0) + 1
        instance_id = base if counts[base] == 1 else f"{base}-{counts[base]}"
        try:
            instances.append(instance_of(item, instance_id, root))
        except ValueError as exc:
            problems.append(f"{QUERIES} item {number}" + (f" (id {instance_id!r})" if base else "") + f": {exc}")
    if problems:
        raise_problems(f"{root} (MultiHop-RAG layout)", problems)
    if not instances:
        raise InputError(f"dataset {file} (MultiHop-RAG layout) holds no queries")
    return Dataset(instances, dataset_fingerprint(instances))
