"""`harness export DIR --format gaia2 --out FOLDER`: what ARE's leaderboard takes, laid out as ARE's
``gaia2-submit`` uploads it (its benchmark/hf_upload_utils.py): a Hub dataset folder, to be pushed with
``hf upload OWNER/NAME FOLDER --repo-type dataset`` and named to the leaderboard.

- ``CONFIG/validation-00000-of-00001.parquet``, one per config and phase under ARE's config name (the config for
  the standard phase, ``CONFIG_a2a`` for agent2agent, ``CONFIG_noise`` for noise): a row per scenario run in
  ARE's schema (SCHEMA, its create_hf_schema): scenario_id, run_number (the epoch), task_id, score (1.0 / 0.0,
  null when not judged), status (success, failed, exception: the row errored, no_validation: ARE gave no
  verdict), data, config, phase_name, a2a_app_prop, has_app_noise, has_env_noise, run_config, has_exception,
  exception_type, exception_message, rationale (run_type stays null, as ARE leaves it);
- ``README.md``: the dataset card, its YAML front matter naming each config's files and features, the figures;
- ``computed_stats.json``: the shape of ARE's statistics report (metadata, statistics.per_capability and
  .global, run_configurations), from harness/benchmarks/gaia2/report.py's figures (its denominators: module docstring).

A row's ``data`` is ARE's own exported trace of the run, as ARE's runner writes it and its leaderboard rows carry
it (the scenario with its apps and completed events: harness/benchmarks/gaia2/record.py), so ARE re-judges the
folder offline as it stands: ``are-benchmark judge --hf FOLDER --hf-config CONFIG --hf-split validation`` (docs/
guide.md, "Re-judging an export with ARE's own judge"); the row's score, status and rationale are the harness's
verdict (ARE's judge, run in the judge's sandbox). A run whose trace was not kept (a run made before the driver
exported it, one larger than the record's bounds, one ARE never judged) has a null ``data``, named in a warning.

Approximated, the rows being the harness's: ``run_config`` is run.json; a row's config is the run's --subset, else
its scenario's capability (a standard run of that capability's config); the split is "validation"; ARE's standard
deviations over runs are not given. A run (id, epoch) without a row is left out, and named in a warning.
Refused (nothing written): a run that is not Gaia2's, an --out that is not a new or empty folder; unless told,
a run any of whose runs ARE's scripted checks alone judged (no --judge-model: message texts not compared; ARE's
runner always judges with an LLM; `--allow-hard-judge`) and a run of fewer epochs than the leaderboard's three
runs per scenario (ARE's gaia2-submit forces three; `--allow-few-epochs`). A run exported all the same says so in
its card and computed_stats.json (metadata ``not_comparable``).

Names are built, never taken: a config's name (a folder of the export and a key of the card's YAML) keeps of the
--subset or scenario tag it comes from only ASCII letters, digits, ``_`` and ``-`` (a tag ``../../x`` is the config
``x``), and the card's YAML front matter is written by a YAML writer (PyYAML), so no tag adds a config or a key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from statistics import mean
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from harness.benchmarks.gaia2 import record
from harness.benchmarks.gaia2 import report as figures
from harness.errors import InputError
from harness.export.source import ExportRun
from harness.results.model import ResultRow
from harness.terminal import listed

SPLIT = "validation"
SCHEMA = pa.schema([("scenario_id", pa.string()), ("run_number", pa.int64()), ("task_id", pa.string()),
                    ("score", pa.float64()), ("status", pa.string()), ("data", pa.string()),
                    ("run_type", pa.string()), ("config", pa.string()), ("phase_name", pa.string()),
                    ("a2a_app_prop", pa.float64()), ("has_app_noise", pa.bool_()), ("has_env_noise", pa.bool_()),
                    ("run_config", pa.string()), ("has_exception", pa.bool_()), ("exception_type", pa.string()),
                    ("exception_message", pa.string()), ("rationale", pa.string())])
SUFFIX = {"standard": "", "agent2agent": "_a2a", "noise": "_noise"}
LEADERBOARD_RUNS = 3  # runs per scenario ARE's leaderboard takes (its gaia2-submit forces them)
UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def safe_name(text: str) -> str:
    """`text` as a config's name: a folder and a YAML key (the module docstring)."""
    return UNSAFE.sub("-", text).strip("-_") or "unknown"


def config_name(config: str, phase: str) -> str:
    """ARE's name of a config run in a phase (its create_config_name), made safe."""
    return safe_name(config + SUFFIX.get(phase, f"_{phase}"))


def _status(row: ResultRow) -> tuple[float | None, str]:
    if row.status == "error":
        return None, "exception"
    if row.correct is None:
        return None, "no_validation"
    return (1.0, "success") if row.correct else (0.0, "failed")


def _row(run: ExportRun, row: ResultRow, config: str, phase: str) -> dict[str, Any]:
    score, status = _status(row)
    verdict = row.verdicts.get("gaia2")
    rationale = (verdict or {}).get("rationale") or row.scores.get("gaia2", {}).get("explanation")
    return {"scenario_id": row.instance_id, "run_number": row.epoch, "task_id": row.instance_id, "score": score,
            "status": status, "data": record.read(run.figures.root, row.trace), "config": config,
            "phase_name": phase, "a2a_app_prop": 1.0 if phase == "agent2agent" else 0.0,
            "has_app_noise": phase == "noise", "has_env_noise": phase == "noise",
            "run_config": json.dumps(run.figures.run, sort_keys=True), "has_exception": row.status == "error",
            "exception_type": row.error_kind, "exception_message": row.error, "rationale": rationale or None}


def _stats(name: str, g: Mapping[str, Any]) -> dict[str, Any]:
    """One group's figures under ARE's names (percentages as ARE gives them)."""
    pct = lambda x: None if x is None else 100 * x  # noqa: E731
    count = lambda x: None if x is None else round(x * g["judged_scenarios"])  # noqa: E731
    return {"capability": name, "total_runs": g["runs"], "validated_runs": g["judged_runs"],
            "success_runs": g["passed_runs"], "failed_runs": g["judged_runs"] - g["passed_runs"],
            "exception_runs": g["errored_runs"], "missing_runs": g["missing_runs"],
            "no_validation_runs": g["not_judged_runs"], "success_rate": pct(g["accuracy"]),
            "pass_at_k": count(g["pass_at_k"]), "pass_at_k_percent": pct(g["pass_at_k"]),
            "pass_k": count(g["pass_hat_k"]), "pass_k_percent": pct(g["pass_hat_k"]),
            "total_scenarios": g["scenarios"], "validated_scenarios": g["judged_scenarios"],
            "avg_run_duration": g["time_per_run_s"], "cost_per_scenario": g["cost_per_scenario"]}


def _computed(run: ExportRun, groups: Mapping[tuple[str, str], Sequence[str]]) -> dict[str, Any]:
    report, k = run.figures.report, run.figures.epochs
    costs = report.costs.per_instance if report.priced else None
    per = {config_name(c, p): _stats(c if p == "standard" else f"{c} ({p})",
                                                 figures.group(ids, run.latest, k, costs))
           for (c, p), ids in groups.items()}
    rates = [s["success_rate"] for s in per.values() if s["success_rate"] is not None]
    overall = _stats("global", figures.group(run.figures.ids, run.latest, k, costs))
    model = run.figures.run.get("model_settings") or {}
    return {"metadata": {"model": model.get("model") or run.figures.run.get("model"),
                         "model_provider": model.get("provider") or model.get("kind") or "unknown",
                         "timestamp": datetime.now(UTC).isoformat(), "report_version": "harness-gaia2-1", "runs": k},
            "statistics": {"per_capability": per, "global": {
                **overall, "macro_success_rate": mean(rates) if rates else None,
                "micro_success_rate": overall["success_rate"]}},
            "run_configurations": [{"phase_name": p, "config": c, "a2a_app_prop": 1.0 if p == "agent2agent" else 0.0,
                                    "has_tool_augmentation": p == "noise", "has_env_events": p == "noise",
                                    **{key: per[config_name(c, p)][key] for key in
                                       ("total_runs", "validated_runs", "success_runs", "failed_runs",
                                        "exception_runs", "no_validation_runs")}} for c, p in groups]}


def _card(names: Sequence[str], stats: Mapping[str, Any]) -> str:
    """README.md: YAML front matter as the Hub reads a dataset's configs, then the figures."""
    dtype = {pa.string(): "string", pa.int64(): "int64", pa.float64(): "float64", pa.bool_(): "bool"}
    front = {"configs": [{"config_name": n, "data_files": [{"split": SPLIT, "path": f"{n}/{SPLIT}-*"}]} for n in names],
             "dataset_info": [{"config_name": n, "features": [{"name": f.name, "dtype": dtype[f.type]} for f in SCHEMA],
                               "splits": [{"name": SPLIT}]} for n in names]}
    meta, body = stats["metadata"], json.dumps(stats["statistics"], indent=2)
    line = lambda value: " ".join(str(value).split())  # noqa: E731 - one line of the card's text
    caveats = "".join(f"**Not comparable to ARE's leaderboard:** {said}.\n\n" for said in meta["not_comparable"] or ())
    return ("---\n" + yaml.safe_dump(front, sort_keys=False) + "---\n\n# GAIA2 Leaderboard Submission\n\n" + caveats +
            f"**Model:** {line(meta['model'])}\n**Provider:** {line(meta['model_provider'])}\n**Split:** {SPLIT}\n"
            f"**Runs per scenario:** {meta['runs']}\n\nMade by `harness export --format gaia2`: each row's `data` is "
            "ARE's exported trace of the run, which ARE's `are-benchmark judge --hf` re-judges offline; its score, "
            "status and rationale are the harness's verdict.\n\n"
            f"## Results\n\n```json\n{body}\n```\n")


def _not_comparable(run: ExportRun, allow_hard_judge: bool, allow_few_epochs: bool) -> list[str]:
    """Why the run's figures are not the leaderboard's, each allowed by its flag (InputError otherwise)."""
    k, why, refused = run.figures.epochs, list[tuple[str, str]](), list[tuple[str, str]]()
    if told := figures.judging(run.latest, run.figures.ids)["warning"]:
        (why if allow_hard_judge else refused).append(("--allow-hard-judge", told))
    if k < LEADERBOARD_RUNS:
        said = (f"each scenario ran {k} time(s), and ARE's leaderboard takes {LEADERBOARD_RUNS} runs per scenario "
                "(its gaia2-submit forces them; pass^K and the spread need them)")
        (why if allow_few_epochs else refused).append(("--allow-few-epochs", said))
    if refused:
        raise InputError(f"{run.figures.root} is not a leaderboard run, nothing written: " + "; ".join(
            f"{said} (export it all the same with {flag})" for flag, said in refused))
    return [said for _, said in why]


def render(run: ExportRun, *, allow_hard_judge: bool = False,
           allow_few_epochs: bool = False) -> tuple[Callable[[Path], None], list[str]]:
    """What writes the folder (module docstring) into a folder given, and the warnings. InputError for a run
    that is not Gaia2's, or not the leaderboard's unless allowed."""
    if not figures.applies(run.tasks):
        raise InputError(f"{run.figures.root} is not a Gaia2 run (its tasks carry no variant): --format gaia2 "
                         "exports Gaia2 runs")
    caveats = _not_comparable(run, allow_hard_judge, allow_few_epochs)
    subset, k = run.figures.run.get("dataset_subset"), run.figures.epochs
    groups: dict[tuple[str, str], list[str]] = {}
    for iid in run.figures.ids:
        task = run.tasks.get(iid, {})
        config = safe_name(str(subset or task.get("capability") or "unknown"))
        groups.setdefault((config, safe_name(str(task.get("variant")))), []).append(iid)

    def fill(into: Path) -> None:
        for (config, phase), ids in groups.items():
            rows = [_row(run, row, config, phase) for iid in ids for e in range(1, k + 1)
                    if (row := run.latest.get((iid, e))) is not None]
            folder = into / config_name(config, phase)
            folder.mkdir(parents=True)
            pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), folder / f"{SPLIT}-00000-of-00001.parquet")
        stats = _computed(run, groups)
        stats["metadata"]["not_comparable"] = caveats or None
        (into / "computed_stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
        names = [config_name(c, p) for c, p in groups]
        (into / "README.md").write_text(_card(names, stats), encoding="utf-8")

    missing = [f"{iid} epoch {e}" for iid in run.figures.ids for e in range(1, k + 1) if (iid, e) not in run.latest]
    warnings = [f"warning: not comparable to ARE's leaderboard: {said}" for said in caveats]
    untraced = [f"{iid} epoch {e}" for iid in run.figures.ids for e in range(1, k + 1)
                if (row := run.latest.get((iid, e))) is not None and not record.kept(run.figures.root, row.trace)]
    return fill, warnings + ([f"warning: {len(missing)} run(s) without a row left out: {listed(missing)}"]
                             if missing else []) + ([
        f"warning: {len(untraced)} run(s) without ARE's trace (their `data` is null: ARE cannot re-judge them): "
        f"{listed(untraced)}"] if untraced else [])
