"""`harness noise RUN --reruns K [--limit N]`: a finished run's noise floor, measured.

The first N instances of RUN that ended with a verdict are run again K times with the run's configuration, as
run.json records it (dataset, model section, agent, limits, scorers and judge, sandbox resources and network,
epochs, simulated user), each rerun a `harness run` of its own into RUN/noise/rerun-K/ (a process, as a user
would start it: the model and the judge live). What run.json holds only by its hash is given again by the user
(`--config` for the model sections, and after `--` any run flag: the `--website` folder, a
`--prompt-template` file); the environment is replayed where the run recorded it (RUN/web/: `--web-replay`).
Each rerun's run.json must fingerprint as the run's (runner/run_config.py: the same fields a resume checks),
else the measurement stops and says what differs. With a model-judged scorer (llm_judge) the original
answers are also re-judged K times (RUN/noise/rejudge-K/, a copy of the rows scored again: `harness score`'s
path), so judge churn is measured apart from the agent's. The figures (report/noise.py) go to RUN/noise.json,
which `harness compare` then uses as the run's noise floor.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.config import Scoring, TomlConfig
from harness.errors import InputError
from harness.fsutil import write_atomic
from harness.report.load import read_run
from harness.report.noise import measure
from harness.results.layout import RunDir
from harness.results.store import latest_by_key, read_rows
from harness.runner.rescore import rescore
from harness.runner.run_config import RunConfig, diff, load_run_config

RERUN_OK = (0, 3)  # `harness run`: every instance ended, or some errored (counted, not a verdict)


def run_flags(config: RunConfig, ids: Sequence[str], out: Path, web: Path | None) -> list[str]:
    """The `harness run` flags that rerun `ids` of a run with `config` (its run.json) into `out`."""
    limits, env, user = config.limits, config.environment, config.user
    flags = ["--dataset", config.dataset, "--model", config.model, "--agent", config.agent,
             "--ids", ",".join(ids), "--output-dir", str(out), "--epochs", str(config.epochs),
             "--command-timeout", str(limits.command_timeout), "--page-size", str(limits.page_size),
             "--network", env.network, "--memory", env.memory, "--cpus", str(env.cpus), "--disk", env.disk,
             "--user-reply", user.reply, "--max-user-replies", str(user.max_replies)]
    for name in ("max_steps", "max_tokens", "max_instance_cost", "instance_timeout"):
        if (value := getattr(limits, name)) is not None:
            flags += ["--" + name.replace("_", "-"), str(value)]
    for scorer in config.scorers:
        key, _, judge = scorer.partition("=")
        flags += ["--judge-model", judge] if key == "judge" and judge else ["--scorer", scorer]
    for reducer in config.reducers:
        flags += ["--reducer", reducer]
    if config.dataset_subset:
        flags += ["--subset", config.dataset_subset]
    if env.provider:
        flags += ["--sandbox", env.provider]
    if user.function:
        flags += ["--user-function", user.function]
    if web is not None:
        flags += ["--web-replay", str(web)]
    return flags


def chosen_ids(run_dir: Path, limit: int | None) -> tuple[list[str], int]:
    """The first `limit` selected ids that ended with a verdict, and the run's size (its selection)."""
    figures = read_run(run_dir)
    judged = [i for i in figures.ids if figures.verdicts[i][0] not in ("missing", "no_verdict", "unscored")]
    if not judged:
        raise InputError(f"{run_dir}: no instance ended with a verdict; there is nothing to rerun")
    return judged[:limit] if limit else judged, len(figures.ids)


def outcomes(run_dir: Path, ids: Sequence[str]) -> dict[str, tuple[bool, str]]:
    """id -> (passed under the headline, the first epoch's answer) of the ids that ended with a verdict."""
    figures = read_run(run_dir)
    latest = latest_by_key(figures.rows)
    found = {}
    for iid in ids:
        outcome, _, passed = figures.verdicts.get(iid, ("missing", 0.0, False))
        row = latest.get((iid, 1))
        if outcome not in ("missing", "no_verdict", "unscored") and row is not None:
            found[iid] = (passed, row.answer or "")
    return found


def rejudge(run_dir: Path, ids: Sequence[str], into: Path, scoring: Scoring) -> dict[str, bool]:
    """The original answers of `ids` scored again in a copy of the run (`into`): id -> passed."""
    layout, copy = RunDir(run_dir), RunDir(into)
    if into.exists():
        shutil.rmtree(into)
    into.mkdir(parents=True)
    wanted = set(ids)
    rows = [r for r in read_rows(layout.output) if r.instance_id in wanted]
    for row in rows:  # rescore appends its verdict to each row's trace: the copy has none, the run's stay as they are
        row.trace = None
    write_atomic(copy.output, "".join(r.model_dump_json() + "\n" for r in rows))
    selected = json.loads(layout.selected.read_text(encoding="utf-8"))
    kept = {i: selected[i] for i in ids} if isinstance(selected, dict) else list(ids)
    write_atomic(copy.selected, json.dumps(kept))
    for name in ("run_json", "questions", "tasks", "metadata"):
        if getattr(layout, name).exists():
            shutil.copy(getattr(layout, name), getattr(copy, name))
    rescore(into, scoring)
    return {i: passed for i, (passed, _) in outcomes(into, ids).items()}


def judged_by_model(config: RunConfig) -> bool:
    return any(s.partition(":")[0].partition("@")[0] == "llm_judge" for s in config.scorers)


def noise(run_dir: Path, reruns: int, *, limit: int | None = None, config_file: Path | None = None,
          extra: Sequence[str] = (), log=print) -> dict[str, Any]:
    """Rerun, re-judge, measure; writes RUN/noise.json and returns its figures."""
    layout = RunDir(Path(run_dir))
    config = load_run_config(layout.root)
    if config is None:
        raise InputError(f"{run_dir} has no run.json: it is not a finished run to measure")
    if reruns < 1:
        raise InputError(f"--reruns {reruns}: at least 1")
    if config.environment.website and not (layout.root / "web").is_dir() and "--website" not in extra:
        raise InputError(f"{run_dir} served the website {config.environment.website[0]}, which run.json keeps by "
                         "its hash only: give its folder after --, e.g. harness noise RUN -- --website PATH")
    ids, size = chosen_ids(layout.root, limit)
    web = layout.root / "web" if (layout.root / "web").is_dir() else None
    runs: list[dict[str, tuple[bool, str]]] = []
    for k in range(1, reruns + 1):
        out = layout.noise_runs / f"rerun-{k}"
        argv = [sys.executable, "-m", "harness", "run", *run_flags(config, ids, out, web), *extra]
        if config_file is not None:
            argv += ["--config", str(config_file)]
        log(f"rerun {k}/{reruns}: {len(ids)} instances into {out}")
        done = subprocess.run(argv, check=False)
        if done.returncode not in RERUN_OK:
            raise InputError(f"rerun {k} ({' '.join(argv[2:])}) exited {done.returncode}; see its output above")
        again = load_run_config(out)
        if again is None or again.fingerprint() != config.fingerprint():
            changed = diff(config, again) if again is not None else ["no run.json written"]
            raise InputError(f"rerun {k} did not run the run's configuration: {'; '.join(changed)} (give what "
                             "differs after --, or --config with the run's model sections)")
        runs.append(outcomes(out, ids))
    judged: list[dict[str, bool]] = []
    if judged_by_model(config):
        names = [s for s in config.scorers if not s.startswith("judge=")]
        judge = next((s.partition("=")[2] for s in config.scorers if s.startswith("judge=")), None)
        scoring = Scoring.from_flags(names, judge, TomlConfig(config_file))
        for k in range(1, reruns + 1):
            log(f"re-judging {k}/{reruns}: the original answers of {len(ids)} instances")
            judged.append(rejudge(layout.root, ids, layout.noise_runs / f"rejudge-{k}", scoring))
    figures = measure(outcomes(layout.root, ids), runs, judged, run_size=size, ids=ids)
    write_atomic(layout.noise, json.dumps(figures, indent=2))
    return figures
