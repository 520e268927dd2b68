"""The physical-floor check: a time below the roofline floor is impossible, never a win.

Torch-free on purpose: the runner applies it in the parent process, where the candidate cannot reach it.
"""

from __future__ import annotations

from ..report import Finding
from .policy import why


def roofline_floor_check(median_ms: float, floor_ms: float | None, tolerance: float = 0.9) -> Finding | None:
    """A finding when ``median_ms`` is below ``floor_ms * tolerance`` (impossible: a bug or a cheat).

    ``tolerance`` (0 < t <= 1) leaves room for clock and measurement error. A missing or zero floor
    (definition without a cost model) gives no finding.
    """
    if not (0.0 < tolerance <= 1.0):
        raise ValueError(f"tolerance must be in (0, 1], got {tolerance}")
    if floor_ms is None or floor_ms == 0:
        return None
    if median_ms != median_ms or floor_ms != floor_ms or median_ms < 0 or floor_ms < 0:
        raise ValueError(f"times must be non-negative numbers, got median_ms={median_ms}, floor_ms={floor_ms}")
    if median_ms < floor_ms * tolerance:
        return Finding(rule="below-roofline", why=why("below-roofline"), message=f"median {median_ms:.6g} ms is below the physical floor {floor_ms:.6g} ms "
                                          f"(x{tolerance} tolerance): {floor_ms / max(median_ms, 1e-12):.2f}x faster than possible")
    return None
