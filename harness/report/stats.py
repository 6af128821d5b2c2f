"""The report's statistics, in one place: every interval the report, the pages and comparisons show.

* ``wilson_interval(correct, n)``: the Wilson score interval of correct / n; (0, 1) when n is 0.
* ``mean_interval(values)``: the normal-approximation interval of a mean of values in [0, 1] (a
  reducer's graded values, e.g. pass@k), clamped to [0, 1]; (0, 1) with fewer than two values.
* ``paired_delta(pairs)``: two runs' values on the same instances, each value in [0, 1] (a verdict
  is 0 or 1; a run with epochs gives its headline reducer's value, e.g. a mean of 0.5). The delta is
  mean(other - base). Its interval is the adjusted Wald interval for paired proportions (Agresti
  and Min): two pseudo-instances are added, one with differences +1 and -1 at half weight each
  and one with no difference, and the normal interval of the adjusted mean difference is taken.
  For 0/1 values this is adding 1/2 to each cell of the 2x2 table. It never has zero width (two
  identical runs of 9 instances: 0 [-17.8%, +17.8%]), always contains the delta and is clipped
  to [-1, +1]. There is no delta without pairs: comparisons say "no common instances" instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054


def wilson_interval(correct: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval; (0, 1) when there is nothing to estimate from."""
    if n <= 0:
        return (0.0, 1.0)
    p = correct / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # the interval always contains p; clamp away float rounding at p = 0 or 1
    return (max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half)))


def mean_interval(values: Sequence[float], z: float = Z95) -> tuple[float, float]:
    """Normal-approximation 95% interval of a mean of values in [0, 1], clamped."""
    n = len(values)
    if n < 2:
        return (0.0, 1.0)
    m = sum(values) / n
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))
    half = z * sd / math.sqrt(n)
    return (max(0.0, m - half), min(1.0, m + half))


def clustered_interval(passes: Mapping[str, Sequence[bool]], z: float = Z95) -> tuple[float, float]:
    """The 95% interval of a pass rate whose rows come in clusters (an instance's epochs: not
    independent draws): each cluster's pass rate, then Wilson over the clusters when every one is 0 or
    1, else the normal interval of their mean (what the headline's mean reducer gives)."""
    means = [sum(p) / len(p) for p in passes.values() if p]
    if all(m in (0.0, 1.0) for m in means):
        return wilson_interval(int(sum(means)), len(means), z)
    return mean_interval(means, z)


@dataclass(frozen=True)
class PairedDelta:
    n: int  # pairs
    base: float  # mean base value
    other: float  # mean other value
    delta: float  # other - base
    ci95: tuple[float, float]  # within [-1, 1], contains delta


def paired_delta(pairs: Sequence[tuple[float, float]], z: float = Z95) -> PairedDelta:
    """(base value, other value) per instance, each in [0, 1] -> the delta and its interval.
    ValueError without pairs or with a value outside [0, 1]."""
    n = len(pairs)
    if n == 0:
        raise ValueError("no pairs: there is no difference to estimate")
    if any(not (0.0 <= v <= 1.0) for pair in pairs for v in pair):
        raise ValueError("paired values must lie in [0, 1]")
    diffs = [o - b for b, o in pairs]
    delta = sum(diffs) / n
    # the pseudo-instances: d = +1 and d = -1 at weight 1/2 each, d = 0 at weight 1
    n_adj = n + 2
    mean_adj = sum(diffs) / n_adj
    second = (sum(d * d for d in diffs) + 1.0) / n_adj
    half = z * math.sqrt(max(second - mean_adj * mean_adj, 0.0) / n_adj)
    low, high = mean_adj - half, mean_adj + half
    return PairedDelta(n=n, base=sum(b for b, _ in pairs) / n, other=sum(o for _, o in pairs) / n, delta=delta,
                       ci95=(max(-1.0, min(delta, low)), min(1.0, max(delta, high))))
