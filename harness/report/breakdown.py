"""Breakdowns of a run's rows: accuracy per field value, and retrieval recall of evidence.

Pure functions over plain data: the row dicts of output.jsonl, the trace events of each row
(dicts as in the trace files, or harness.traces events) and the instances' metadata by id
(rows do not carry metadata: ``{instance.instance_id: instance.metadata}`` from the dataset).

- ``by_field(rows, field, metadata)``: rows grouped by ``row[field]`` if the row has that key,
  else ``metadata[id][field]``, else ``"unknown"``; per group ``n`` (rows), ``correct`` (rows whose
  ``correct`` is True), ``no_verdict`` (``correct`` None: the scorer reached no verdict, or no
  target), ``accuracy`` = correct / (n - no_verdict), over the judged rows (None when none is), and
  ``ci95``, its Wilson interval (with epochs, over instances: stats.clustered_interval). A list
  value (``tool_family``) counts the row in each of its groups.
  For MultiHop-RAG, ``by_field(rows, "question_type", metadata)`` gives accuracy per
  query type (inference_query, comparison_query, temporal_query, null_query); for GAIA,
  ``tool_family`` and ``steps`` (GAIA's labels: harness/benchmarks/gaia/capabilities.py) per tool family and steps
  bucket.
- ``retrieval_recall(rows, traces, metadata)``: for each row whose instance has evidence
  (``metadata[id]["evidence"]``, a list of ``{title, url, ...}``), the fraction of its distinct
  evidence documents that any ``search_corpus`` call of its trace returned (an ``env`` event
  with env "search", its ``results`` list). A document is identified by its url, or by its title
  (case and surrounding space ignored) when it has no url. Rows without evidence (null queries)
  are left out. Returns the mean over rows, per-row recalls, and the mean per question type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.benchmark import CUSTOM, get
from harness.report.stats import clustered_interval, wilson_interval

__all__ = ["FIELDS", "by_field", "doc_key", "evidence_recall", "retrieval_recall", "searched_docs", "task_labels"]

UNKNOWN = "unknown"
# metadata the report breaks accuracy down by, where a dataset has it (a benchmark's labels: `Benchmark.labels`)
FIELDS = ("question_type", "subject", "tool_family", "steps", "capability", "variant")  # the last two: Gaia2's


def task_labels(metadata: Mapping[str, Any], benchmark: str = CUSTOM) -> dict[str, Any]:
    """What of an instance's metadata the report needs later (tasks.json): its FIELDS (its benchmark's own labels:
    `Benchmark.labels`, GAIA's from its Annotator Metadata) and evidence."""
    if not metadata:  # most datasets' rows: nothing to look up (a 100k resume makes this call per row)
        return {}
    found = {key: metadata[key] for key in (*FIELDS, "evidence") if metadata.get(key) is not None}
    own = get(benchmark).labels
    return {**(own(metadata) if own is not None else {}), **found}


def _get(item: Any, key: str, default: Any = None) -> Any:
    """A field of a dict or of an object (trace events may be either)."""
    return item.get(key, default) if isinstance(item, Mapping) else getattr(item, key, default)


def _groups_of(row: Mapping[str, Any], field: str, metadata: Mapping[str, Mapping[str, Any]]) -> list[str]:
    value = row[field] if field in row and row[field] is not None else \
        metadata.get(str(row.get("instance_id")), {}).get(field)
    if isinstance(value, list):
        return sorted({str(v) for v in value}) or [UNKNOWN]
    return [UNKNOWN if value is None else str(value)]


def by_field(rows: Sequence[Mapping[str, Any]], field: str,
             metadata: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """Accuracy per value of `field` (see the module docstring), groups sorted by value."""
    groups: dict[str, dict[str, Any]] = {}
    passes: dict[str, dict[str, list[bool]]] = {}  # group -> instance -> its judged rows' verdicts
    for k, row in enumerate(rows):
        iid = row.get("instance_id")
        for key in _groups_of(row, field, metadata or {}):
            group = groups.setdefault(key, {"n": 0, "correct": 0, "no_verdict": 0})
            group["n"] += 1
            group["correct"] += row.get("correct") is True
            group["no_verdict"] += row.get("correct") is None
            if row.get("correct") is not None:
                cluster = f"id {iid}" if iid is not None else f"row {k}"  # a row without an id: its own
                passes.setdefault(key, {}).setdefault(cluster, []).append(row["correct"] is True)
    for key, group in groups.items():
        judged = group["n"] - group["no_verdict"]
        group["accuracy"] = group["correct"] / judged if judged else None
        clusters = passes.get(key, {})  # epochs: an instance's rows are one cluster, not independent
        group["ci95"] = list(clustered_interval(clusters) if len(clusters) < judged
                             else wilson_interval(group["correct"], judged))
    return dict(sorted(groups.items()))


def doc_key(doc: Mapping[str, Any]) -> str | None:
    """A document's identity: its url, else its title (lowercased, stripped); None if neither."""
    url = (doc.get("url") or "").strip() if isinstance(doc.get("url"), str) else ""
    if url:
        return "url:" + url
    title = doc.get("title")
    return "title:" + title.strip().lower() if isinstance(title, str) and title.strip() else None


def searched_docs(events: Sequence[Any]) -> set[str]:
    """Keys of every document the trace's search_corpus calls returned (by url and by title)."""
    found: set[str] = set()
    for event in events:
        if _get(event, "type") != "env" or _get(event, "env") != "search":
            continue
        for hit in _get(event, "results") or []:
            if isinstance(hit, Mapping):
                found.update(k for k in (doc_key({"url": hit.get("url")}), doc_key({"title": hit.get("title")})) if k)
    return found


def evidence_recall(evidence: Sequence[Mapping[str, Any]], events: Sequence[Any]) -> float | None:
    """The fraction of distinct evidence documents the searches returned; None without evidence."""
    wanted = {key for doc in evidence if (key := doc_key(doc)) is not None}
    if not wanted:
        return None
    return len(wanted & searched_docs(events)) / len(wanted)


def retrieval_recall(rows: Sequence[Mapping[str, Any]], traces: Sequence[Sequence[Any]],
                     metadata: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Retrieval recall of the evidence; `traces[i]` holds the events of `rows[i]`.

    Returns ``{"n": rows measured, "mean": mean recall or None, "per_row": [{instance_id, epoch,
    recall}], "by_question_type": {type: mean}}``.
    """
    if len(rows) != len(traces):
        raise ValueError(f"{len(rows)} rows but {len(traces)} traces: one trace per row")
    per_row: list[dict[str, Any]] = []
    by_type: dict[str, list[float]] = {}
    for row, events in zip(rows, traces, strict=True):
        meta = metadata.get(str(row.get("instance_id")), {})
        recall = evidence_recall(meta.get("evidence") or [], events)
        if recall is None:
            continue
        per_row.append({"instance_id": row.get("instance_id"), "epoch": row.get("epoch", 1), "recall": recall})
        by_type.setdefault(str(meta.get("question_type", UNKNOWN)), []).append(recall)
    mean = sum(r["recall"] for r in per_row) / len(per_row) if per_row else None
    return {"n": len(per_row), "mean": mean, "per_row": per_row,
            "by_question_type": {t: sum(v) / len(v) for t, v in sorted(by_type.items())}}
