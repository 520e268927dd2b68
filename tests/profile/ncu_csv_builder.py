"""Build text in the exact shape of `ncu --csv --page raw`: a header of names, a units row, one row per launch.

Fixed columns come first (as ncu writes them), every cell is quoted, numbers may carry thousands
separators. Used to test the parser and the engine on realistic input without a GPU.
"""

from __future__ import annotations

import csv
import io
from typing import Any

FIXED = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
         "Grid Size", "Device", "CC"]


def fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.2f}" if abs(v) >= 1000 else f"{v:.6g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def raw_csv(launches: list[tuple[str, dict[str, tuple[str, Any]]]], preamble: str = "==PROF== Connected to process 4242\n") -> str:
    """launches: [(kernel_name, {metric: (unit, value)})]; all launches must use the same metric set."""
    metrics = list(launches[0][1])
    units = [launches[0][1][m][0] for m in metrics]
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(FIXED + metrics)
    w.writerow([""] * len(FIXED) + units)
    for i, (name, vals) in enumerate(launches):
        grid = vals.get("launch__grid_size", ("", 1))[1]
        block = vals.get("launch__block_size", ("", 128))[1]
        w.writerow([str(i), "4242", "python3", "h200", name, "1", "7", f"({block}, 1, 1)", f"({grid}, 1, 1)", "0", "9.0"]
                   + [fmt(vals[m][1]) for m in metrics])
    return preamble + buf.getvalue() + "==PROF== Disconnected from process 4242\n"


def stalls(**share: float) -> dict[str, tuple[str, Any]]:
    """Stall ratios (cycles per issued instruction) for the given reasons, 'selected' = 1."""
    from harness.profile.ncu import STALL_REASONS

    out = {}
    for r in STALL_REASONS:
        v = share.get(r, 1.0 if r == "selected" else 0.1)
        out[f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio"] = ("", v)
    return out
