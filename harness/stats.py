"""Statistics of timing samples: median with a distribution-free 95% interval, SEM, paired ratios.

The interval for the median uses order statistics (the binomial(n, 1/2) quantiles), so it assumes
nothing about the shape of the latency distribution, which is skewed and often multi-modal.
"""

from __future__ import annotations

import functools
import math
import statistics
from typing import Sequence

from .report import LatencyStats, PairedRatio


@functools.lru_cache(maxsize=4096)
def median_ci_indices(n: int, level: float = 0.95) -> tuple[int, int]:
    """0-based order-statistic indices (lo, hi) bracketing the median with at least ``level`` coverage.

    The binomial(n, 1/2) CDF is accumulated term by term in exact integers (C(n, i+1) from C(n, i)), so
    one call is O(n) and the stop rule, which asks after every chunk of samples, stays cheap: summing
    ``math.comb`` afresh for each candidate index was O(n^2) big-integer work, 69 ms at n=550 and 0.7 s
    at n=1000, and made up most of the "timing" phase of a small workload."""
    if n < 6:
        return 0, n - 1
    if n > 1000:  # normal approximation; the exact sum and it agree here
        half = 1.959964 * math.sqrt(n) / 2
        lo = max(0, int(math.floor(n / 2 - half)) - 1)
        hi = min(n - 1, int(math.ceil(n / 2 + half)))
        return lo, hi
    alpha = (1 - level) / 2
    total = 1 << n
    term = 1  # C(n, 0)
    cdf = 1  # sum of C(n, i) for i <= lo, in units of 2**-n
    lo = 0
    while lo + 1 < n // 2 and cdf / total <= alpha:
        lo += 1
        term = term * (n - lo + 1) // lo
        cdf += term
    lo = max(0, lo - 1)
    return lo, n - 1 - lo


def summarize(samples: Sequence[float]) -> LatencyStats:
    if not samples:
        raise ValueError("no samples")
    xs = sorted(float(x) for x in samples)
    n = len(xs)
    lo, hi = median_ci_indices(n)
    sd = statistics.stdev(xs) if n > 1 else 0.0
    return LatencyStats(
        median=statistics.median(xs),
        mean=statistics.fmean(xs),
        ci95=(xs[lo], xs[hi]),
        stdev=sd,
        sem=sd / math.sqrt(n) if n > 1 else 0.0,
        n=n,
        min=xs[0],
        max=xs[-1],
    )


def median_halfwidth(samples: Sequence[float]) -> tuple[float, float]:
    """(half the width of the median's 95% interval, the median).

    The stopping rule uses this rather than the standard error of the mean: GPU timings have rare
    large outliers (a preempted host, a clock change), which inflate the SEM without moving the median.
    """
    n = len(samples)
    if n < 6:
        return float("inf"), float("nan")
    xs = sorted(samples)
    lo, hi = median_ci_indices(n)
    return (xs[hi] - xs[lo]) / 2, statistics.median(xs)


def precise_enough(samples: Sequence[float], rel: float, resolution: float) -> bool:
    """The median is known to ±``rel`` of itself, or to within the timer's ``resolution`` (a few ticks
    of the event clock, 32 ns each on the H200: an interval cannot shrink below that, however long it
    is sampled)."""
    half, med = median_halfwidth(samples)
    return med == med and half <= max(rel * med, resolution)


def paired_ratio(baseline: Sequence[float], candidate: Sequence[float]) -> PairedRatio:
    """Per-iteration ratios baseline/candidate from interleaved runs; >1 means the candidate is faster."""
    if len(baseline) != len(candidate) or not baseline:
        raise ValueError("paired samples must have the same, non-zero length")
    rs = sorted(b / c for b, c in zip(baseline, candidate) if c > 0)
    n = len(rs)
    lo, hi = median_ci_indices(n)
    return PairedRatio(median=statistics.median(rs), ci95=(rs[lo], rs[hi]), n=n)
