"""A run's noise floor, from reruns of its instances with the same configuration and re-judgings of its
answers (`harness noise`: harness/runner/noise.py runs them; this module only counts).

Per instance, over the original run and its K reruns (those that ended with a verdict):
* `flip_rate`: the share of pairs of runs whose verdicts differ (for an instance passed with probability p in
  each run, independently, its expectation is 2p(1-p));
* `answer_flip_rate`: the same for the answers (normalised), the agent's own churn;
* `judge_flip_rate`: the same over the original verdict and K re-judgings of the original answer (the agent
  fixed, the judge alone); 0 with deterministic scorers, which are not re-judged.

Over the instances: each rate's mean and the 95% interval of that mean (stats.mean_interval over instances:
an instance's runs are not independent draws, instances are); the headline (pass rate over the measured
instances) of the original and of each rerun, and its spread (min, max, standard deviation); the minimum
detectable difference (significance.min_detectable) at the run's own size. `agent churn` is the verdict flip
rate the judge does not explain: max(flip_rate - judge_flip_rate, 0).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.report.significance import min_detectable
from harness.report.stats import mean_interval


def pair_flips(values: Sequence[Any]) -> float | None:
    """The share of pairs that differ (None with fewer than two values)."""
    pairs = list(itertools.combinations(values, 2))
    return sum(a != b for a, b in pairs) / len(pairs) if pairs else None


def _mean(rates: dict[str, float | None]) -> tuple[float, list[float]]:
    known = [r for r in rates.values() if r is not None]
    if not known:
        return 0.0, [0.0, 1.0]
    return sum(known) / len(known), list(mean_interval(known)) if len(known) > 1 else [0.0, 1.0]


def measure(original: Mapping[str, tuple[bool, str]], reruns: Sequence[Mapping[str, tuple[bool, str]]],
            rejudged: Sequence[Mapping[str, bool]], *, run_size: int, ids: Sequence[str],
            normalize: Callable[[str], str] = lambda a: a.strip().lower()) -> dict[str, Any]:
    """`original` and each of `reruns`: id -> (passed, answer) of the instances that ended with a verdict;
    `rejudged`: id -> passed of each re-judging of the original answers (empty: deterministic scorers);
    `run_size`: the run's selected instances (the minimum detectable difference is at that size)."""
    per: dict[str, dict[str, Any]] = {}
    for iid in ids:
        runs = [r[iid] for r in [original, *reruns] if iid in r]
        judged = ([original[iid][0]] if iid in original else []) + [j[iid] for j in rejudged if iid in j]
        per[iid] = {"verdicts": [p for p, _ in runs], "flip_rate": pair_flips([p for p, _ in runs]),
                    "answer_flip_rate": pair_flips([normalize(a or "") for _, a in runs]),
                    "judge_verdicts": judged if rejudged else [],
                    "judge_flip_rate": pair_flips(judged) if rejudged else 0.0}
    flip, flip_ci = _mean({i: p["flip_rate"] for i, p in per.items()})
    answers, answers_ci = _mean({i: p["answer_flip_rate"] for i, p in per.items()})
    judge, judge_ci = _mean({i: p["judge_flip_rate"] for i, p in per.items()})
    heads = [sum(run[i][0] for i in ids if i in run) / max(1, sum(i in run for i in ids))
             for run in [original, *reruns]]
    return {"n": len(ids), "reruns": len(reruns), "rejudged": len(rejudged), "run_size": run_size,
            "flip_rate": flip, "flip_rate_ci95": flip_ci, "answer_flip_rate": answers,
            "answer_flip_rate_ci95": answers_ci, "judge_flip_rate": judge, "judge_flip_rate_ci95": judge_ci,
            "agent_churn": max(flip - judge, 0.0), "judge_churn": judge,
            "headline": heads, "headline_spread": {"min": min(heads), "max": max(heads),
                                                   "sd": statistics.stdev(heads) if len(heads) > 1 else 0.0},
            "min_detectable": min_detectable(flip, run_size), "instances": per}


def noise_lines(m: dict[str, Any]) -> list[str]:
    """The noise floor in words, for the terminal."""
    lo, hi = m["flip_rate_ci95"]
    spread = m["headline_spread"]
    mdd = m["min_detectable"]
    lines = [f"noise over {m['reruns']} reruns of {m['n']} instances: verdict flip rate {m['flip_rate']:.1%} "
             f"[{lo:.1%}, {hi:.1%}] (the share of pairs of runs whose verdicts differ)",
             f"  headline over the runs: {', '.join(f'{h:.1%}' for h in m['headline'])} (min {spread['min']:.1%}, "
             f"max {spread['max']:.1%}, sd {spread['sd']:.1%})",
             f"  judge churn {m['judge_churn']:.1%}" + (f" (the same answers re-judged {m['rejudged']} times)"
                                                        if m["rejudged"] else " (deterministic scorers: not re-judged)")
             + f"; agent churn {m['agent_churn']:.1%} (answers changed in {m['answer_flip_rate']:.1%} of pairs)"]
    if mdd is not None:
        lines.append(f"  minimum detectable difference at the run's {m['run_size']} instances: {mdd:.1%} "
                     "(a smaller difference between two runs is within this noise)")
    flippers = [i for i, p in m["instances"].items() if p["flip_rate"]]
    if flippers:
        lines.append(f"  instances that flipped: {' '.join(flippers)}")
    return lines
