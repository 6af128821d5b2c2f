"""Phase 2, run.json: under the output dir's lock (run.py), the run's configuration checked against the
directory's (a changed one is refused unless --force: runner/run_config.py) and written, and the files
that follow from the dataset and the selection (selected.json, questions.json, metadata.json, tasks.json).
A file the directory refuses here is the output dir's fault (InputError, exit 2)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from harness.benchmark import CUSTOM
from harness.config import RunConfiguration
from harness.errors import InputError
from harness.fsutil import write_atomic
from harness.report.breakdown import task_labels
from harness.report.build import unscored_task
from harness.results.integrity import refuse_foreign
from harness.results.layout import RunDir
from harness.runner.phases.preflight import Checked
from harness.runner.run_config import RunConfig, save_or_check, vouches
from harness.sandbox.site import site_info


@dataclass(frozen=True)
class Recorded:
    """What run.json's phase leaves the later ones: whether the directory's run.json vouched for its rows
    (the same dataset), the selected tasks' labels, and the basis of the report (`report_basis`)."""

    vouched: bool
    tasks: dict[str, dict]
    basis: str


def record(cfg: RunConfiguration, checked: Checked, layout: RunDir) -> Recorded:
    prepared, output_dir, force = checked.prepared, cfg.output.dir, cfg.output.force
    selected, fingerprint, website = prepared.selected, prepared.dataset.fingerprint, cfg.sandbox.website
    vouched = vouches(output_dir, fingerprint)  # before run.json is replaced
    refuse_foreign(layout.output, prepared.dataset.instances, vouched=vouched, force=force)  # rows of another dataset
    earlier = save_or_check(output_dir, RunConfig.of(
        cfg, dataset_fingerprint=fingerprint, image=checked.image, model_settings=prepared.section.public(),
        website=site_info(website) if website is not None else None,
        prompt_template=prepared.prompt.fingerprint, run_id=checked.run_id,
        dataset_revision=prepared.dataset.revision), force=force)
    tasks = {i.instance_id: t for i in selected  # an instance's benchmark but a dataset of one's own's (most rows)
             if (t := {**i.expectations(), **task_labels(i.metadata, i.benchmark), **unscored_task(i.answer),
                       **({"benchmark": i.benchmark} if i.benchmark != CUSTOM else {})})}
    tasks_json = json.dumps(tasks)
    # selected.json, questions.json and metadata.json follow from the dataset and the selection:
    # unchanged since the run before (the same dataset fingerprint and selection), they are not written again.
    if not (earlier is not None and earlier.dataset_fingerprint == fingerprint
            and earlier.selection == cfg.selection and layout.selected.exists() and layout.questions.exists()
            and layout.metadata.exists()):
        _write(layout.selected, json.dumps({i.instance_id: i.level for i in selected}))
        _write(layout.questions, json.dumps({i.instance_id: i.question for i in selected}))
        _write(layout.metadata, json.dumps({i.instance_id: i.metadata for i in selected if i.metadata}))
    _write(layout.tasks, tasks_json)
    return Recorded(vouched, tasks, report_basis(fingerprint, tasks_json, cfg))


def _write(path, text: str) -> None:
    """A file of the run directory written before any container: a refusal is the output dir's fault (exit 2)."""
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc}") from None


def report_basis(fingerprint: str, tasks_json: str, cfg: RunConfiguration) -> str:
    """What a report is computed from besides the rows: the dataset, the selection, the tasks' labels,
    epochs, reducers and scorers. A report with the same basis, newer than output.jsonl, is still true."""
    blob = json.dumps([fingerprint, cfg.selection.model_dump(mode="json"), tasks_json, cfg.epochs.count,
                       list(cfg.epochs.reducers), list(cfg.scoring.names)],
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
