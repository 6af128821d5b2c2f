"""Is a paired difference distinguishable from noise? The tests `harness compare` and the report run, each
from scipy (never by hand), and the noise floor `harness noise` measures.

* ``mcnemar(fixed, broken)``: the exact McNemar test of two runs' pass/fail verdicts on the same instances:
  under "no difference" each discordant instance (fixed or broken) is fixed with probability 1/2, so the
  two-sided p-value is scipy's exact binomial test of `fixed` successes in `fixed + broken` trials at 1/2
  (1.0 with no discordant instance).
* ``paired_bootstrap(pairs)``: for graded values (with epochs, each instance's pass rate): the percentile
  bootstrap 95% interval of mean(other - base), instances resampled in pairs (scipy.stats.bootstrap,
  paired), with a fixed seed so a report is the same each time it is built.
* ``min_detectable(flip_rate, n)``: the smallest paired difference a comparison of n instances tells apart
  from the noise measured as `flip_rate` (the share of instances whose verdict differs between two runs
  of one configuration): under no difference the paired delta has standard deviation sqrt(flip_rate / n),
  and a difference is detected at alpha 0.05 (two-sided) with power 0.8 from (z_0.975 + z_0.8) of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

ALPHA = 0.05
Z_POWER = 2.801585218  # z_0.975 + z_0.8
RESAMPLES = 4000
SEED = 20260


def mcnemar(fixed: int, broken: int) -> float:
    """The exact McNemar test's two-sided p-value from the discordant counts."""
    if fixed < 0 or broken < 0:
        raise ValueError("counts are never negative")
    if fixed + broken == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(min(1.0, binomtest(fixed, fixed + broken, 0.5, alternative="two-sided").pvalue))


def paired_bootstrap(pairs: Sequence[tuple[float, float]], *, resamples: int = RESAMPLES,
                     seed: int = SEED) -> tuple[float, float]:
    """The percentile bootstrap 95% interval of mean(other - base) over (base, other) pairs."""
    if not pairs:
        raise ValueError("no pairs: there is no difference to estimate")
    diffs = [o - b for b, o in pairs]
    if len(set(diffs)) == 1:  # every resample gives the same mean: the interval is that point
        return (diffs[0], diffs[0])
    import numpy as np
    from scipy.stats import bootstrap

    base = np.array([b for b, _ in pairs], dtype=float)
    other = np.array([o for _, o in pairs], dtype=float)
    found = bootstrap((base, other), lambda b, o, axis=-1: np.mean(o - b, axis=axis), paired=True,
                      vectorized=True, n_resamples=resamples, confidence_level=0.95, method="percentile",
                      rng=np.random.default_rng(seed))
    low, high = found.confidence_interval
    return (float(low), float(high))


def min_detectable(flip_rate: float, n: int) -> float | None:
    """The minimum detectable paired difference at n instances for a measured flip rate (None without n)."""
    if n <= 0:
        return None
    return Z_POWER * math.sqrt(max(flip_rate, 0.0) / n)
