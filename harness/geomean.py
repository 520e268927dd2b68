"""The geometric mean over workloads (speedups, latencies, energies), and its 95% interval for paired ratios.

One rule everywhere (the review, the promotion rules, the search tree, the report summary): a geometric
mean is defined only when every value is a positive, finite number. An empty input, or one value that
is missing (None), NaN, infinite, zero or negative, gives None rather than the mean of the rest: a
workload that failed or could not be measured must never disappear from an average of speedups.
Callers that mean "the mean over the workloads that have a value" filter first and say so.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

Z95 = 1.959963984540054  # two-sided 95% quantile of the standard normal


def _positive_finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def geomean(values: Iterable[float | None]) -> float | None:
    """exp(mean(log x)), or None for an empty input or any value that is not a positive finite number."""
    xs = list(values)
    if not xs or not all(_positive_finite(x) for x in xs):
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))  # type: ignore[arg-type]


def geomean_ci(ratios: Sequence[tuple[float, float, float]]) -> tuple[float, tuple[float, float]]:
    """Geometric mean of paired medians with a 95% interval, from (median, ci low, ci high) per workload.

    Per workload, the log-ratio's standard error is read off its 95% interval (width / 2z); workloads
    are independent measurements, so the mean log-ratio has se = sqrt(sum se_i^2) / k. Every number
    must be positive and finite (the promotion rules check that first); ValueError otherwise.
    """
    if not ratios or not all(_positive_finite(x) for r in ratios for x in r):
        raise ValueError("geomean_ci needs at least one ratio, every number positive and finite")
    k = len(ratios)
    mean = sum(math.log(m) for m, _, _ in ratios) / k
    ses = [(math.log(hi) - math.log(lo)) / (2 * Z95) for _, lo, hi in ratios]
    se = math.sqrt(sum(s * s for s in ses)) / k
    return math.exp(mean), (math.exp(mean - Z95 * se), math.exp(mean + Z95 * se))
