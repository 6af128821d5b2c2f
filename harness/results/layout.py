"""The run directory: every file a run writes, in one place (documented in docs/results.md).

    output.jsonl     one result row per instance and epoch (after its retries); a resume appends, the latest row wins
    run.json         the configuration the run started with; a resume must match it; run_ids lists every run
                 into the directory (the ids `harness cleanup --run-id` takes), not fingerprinted
    run.json.prev    the previous run.json, kept when --force resumed with another configuration
    selected.json    the selected instance ids and their levels (what the report divides by)
    questions.json   the selected instances' questions (what a rescore's judge reads)
    metadata.json    per selected instance with any, its dataset row's metadata (what a rescore's scorers
                 are told in ScoreContext.metadata, as the run's were)
    tasks.json       per selected instance, where set: its own expected_tool_calls / max_steps / max_tokens
                 (what a rescore's tool_calls and budget scorers read), its breakdown labels
                 (question_type, subject) and evidence (what the report's breakdowns read)
    report.json      the aggregate report (harness/report/build.py): accuracy with Wilson CIs overall, per
                 level and per scorer, id lists per outcome, env action outcomes, usage; rewritten by
                 each run (wall time summed over runs) and by `harness score`
    ../summary.csv   one row per output directory (its output_dir column), in the directory's parent; a
                 re-run or `harness score` replaces the directory's row
    traces/          one JSONL trace per instance attempt (and epoch) (harness/traces), screenshots beside them, a
                 task's declared artifacts too (`<trace>-artifacts/`, with their manifest.json); the
                 parent appends `limit` (a wall-clock kill), `divergence` (a replayed tool result that
                 differs from the recording) and `verdict` (after scoring) events; a Gaia2 run's
                 ARE trace beside its trace (NAME.are.json.gz: benchmarks/gaia2/record.py)
    noise.json       `harness noise DIR` (harness/report/noise.py): the run's measured noise floor (flip rates,
                 the headline's spread over reruns, the minimum detectable difference, judge vs agent churn)
    noise/           its reruns (rerun-K/, each a run directory) and re-judgings (rejudge-K/)
    .harness.lock    held while a run or rescore writes here (a second one is refused)
    report.html      `harness report DIR --html` (harness/report/html.py): one self-contained page, opens offline
    output.rescue.jsonl  rows output.jsonl would not take (it became unwritable); the next run merges them
    output.set-aside.jsonl  lines a run took out of output.jsonl before resuming: damaged ones (cut short,
                 glued) and, with --force, rows made from other instances than the dataset's
    .harness-tmp/    the agent processes' request files (they hold sandbox tokens), mode 0700; emptied
                     when a run starts here, so a killed run's are gone after the next one
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

from harness.fsutil import slug

# File names too generic to name a run by (datasets/math500-sample/test.jsonl: "math500-sample-test").
GENERIC_STEMS = ("metadata", "data", "dataset", "tasks", "test", "train", "validation", "dev")


def default_run_dir(dataset: Path, split: str | None = None, now: float | None = None) -> Path:
    """Where a run without --output-dir writes: runs/<dataset>-<YYYYmmdd-HHMMSS> under the working
    directory. <dataset> is a folder's name, or a file's stem (after its folder's name when the stem
    is generic), then the --split; a directory already there gets -2, -3, ... after it."""
    dataset = Path(dataset)
    is_file = not dataset.is_dir()
    name = dataset.stem if is_file else dataset.name
    if is_file and name.lower() in GENERIC_STEMS and dataset.parent.name:
        name = f"{dataset.parent.name}-{name}"
    if split:
        name = f"{name}-{split}"
    base = Path("runs") / f"{slug(name, 60)}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


@dataclass(frozen=True)
class RunDir:
    root: Path

    @property
    def output(self) -> Path:
        return self.root / "output.jsonl"

    @property
    def run_json(self) -> Path:
        return self.root / "run.json"

    @property
    def run_json_prev(self) -> Path:
        return self.root / "run.json.prev"

    @property
    def selected(self) -> Path:
        return self.root / "selected.json"

    @property
    def questions(self) -> Path:
        return self.root / "questions.json"

    @property
    def metadata(self) -> Path:
        return self.root / "metadata.json"

    @property
    def tasks(self) -> Path:
        return self.root / "tasks.json"

    @property
    def report(self) -> Path:
        return self.root / "report.json"

    @property
    def lock(self) -> Path:
        return self.root / ".harness.lock"

    @property
    def rescue(self) -> Path:
        return self.root / "output.rescue.jsonl"

    @property
    def set_aside(self) -> Path:
        return self.root / "output.set-aside.jsonl"

    @property
    def scratch(self) -> Path:
        return self.root / ".harness-tmp"

    @property
    def traces(self) -> Path:
        return self.root / "traces"

    @property
    def noise(self) -> Path:
        return self.root / "noise.json"

    @property
    def noise_runs(self) -> Path:
        return self.root / "noise"

    def trace_name(self, instance_id: str, attempt: int, epoch: int = 1) -> str:
        """The trace's path relative to the run directory (what a row's `trace` holds); epochs after
        the first carry their number."""
        digest = hashlib.sha256(instance_id.encode()).hexdigest()[:8]
        run = f"-e{epoch}" if epoch > 1 else ""
        return f"traces/{slug(instance_id, 60)}-{digest}{run}-a{attempt}.jsonl"
