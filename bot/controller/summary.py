"""The compact view of an evaluation report that the search tree keeps per node.

It holds everything selection, rewards, stop rules and prompts need, so the tree can be rebuilt from
node records alone (the bot stores them in PR bodies, where a full report does not fit).
"""

from __future__ import annotations

from typing import Any

from harness.geomean import geomean
from harness.report import FeedbackItem, Report, top_feedback
from harness.schema import Status

MAX_FEEDBACK = 8


def summarize(report: Report) -> dict[str, Any]:
    ws = report.workloads
    passed = report.all_passed
    statuses: dict[str, int] = {}
    for w in ws:
        statuses[w.status.value] = statuses.get(w.status.value, 0) + 1
    sp_ref = [w.speedup_vs_reference for w in ws if w.speedup_vs_reference]
    sp_base = [w.speedup_vs_baseline.median for w in ws if w.speedup_vs_baseline]
    # Relative half-width of the paired ratio's CI: how much of a difference is noise for this node.
    noise = [
        (w.speedup_vs_baseline.ci95[1] - w.speedup_vs_baseline.ci95[0]) / (2 * w.speedup_vs_baseline.median)
        for w in ws
        if w.speedup_vs_baseline and w.speedup_vs_baseline.median > 0
    ]
    fractions = [w.roofline.fraction for w in ws if w.roofline and w.roofline.fraction is not None]
    # The headline roofline figures: at the largest workload (the largest floor, where the fraction
    # says most about the kernel and least about launching it) and the geometric mean over workloads.
    placed = [w for w in ws if w.roofline and w.roofline.fraction is not None and w.roofline.fraction > 0]
    largest = max(placed, key=lambda w: w.roofline.floor_ms) if placed and len(placed) == len(ws) else None
    energy = [w.energy_j_per_call for w in ws if w.energy_j_per_call is not None]
    feedback = top_feedback(ws, MAX_FEEDBACK)
    return {
        "passed": passed,
        "status": _overall_status(report),
        "statuses": statuses,
        "workloads": len(ws),
        "speedup_vs_reference": geomean(sp_ref) if passed and len(sp_ref) == len(ws) else None,
        "speedup_vs_baseline": geomean(sp_base) if passed and len(sp_base) == len(ws) else None,
        "baseline_hash": report.baseline_hash,
        "solution_hash": report.solution_hash,
        "noise": max(noise) if noise else None,
        "roofline_fraction_min": min(fractions) if fractions and len(fractions) == len(ws) else None,
        "roofline_fraction_largest": largest.roofline.fraction if largest else None,
        "roofline_bound_largest": largest.roofline.bound if largest else None,
        "roofline_fraction_geomean": geomean([w.roofline.fraction for w in placed]) if largest else None,
        "energy_j_per_call": geomean(energy) if energy and len(energy) == len(ws) else None,
        "eval_seconds": float(sum(w.seconds for w in ws)),
        "error": None if passed else first_error(report),
        "feedback": [i.model_dump(mode="json") for i in feedback],
    }


def _overall_status(report: Report) -> str:
    if report.build is not None and not report.build.ok:
        return Status.COMPILE_ERROR.value
    if any(f.severity == "error" for f in report.findings):
        return Status.REJECTED.value
    if not report.workloads:
        return Status.RUNTIME_ERROR.value
    for w in report.workloads:
        if w.status is not Status.PASSED:
            return w.status.value
    return Status.PASSED.value


def first_error(report: Report) -> dict[str, Any]:
    """The most useful single error for a debug prompt: build error with file/line, guard finding, or
    the first failing workload."""
    if report.build is not None and not report.build.ok:
        if report.build.errors:
            e = report.build.errors[0]
            return {"status": "COMPILE_ERROR", "file": e.file, "line": e.line, "message": e.message}
        return {"status": "COMPILE_ERROR", "file": None, "line": None, "message": report.build.log[-2000:] or "build failed"}
    for f in report.findings:
        if f.severity == "error":
            return {"status": "REJECTED", "file": f.file, "line": f.line, "message": f"{f.rule}: {f.message}"}
    for w in report.workloads:
        if w.status is not Status.PASSED:
            msg = w.message or (w.log[-2000:] if w.log else w.status.value)
            return {"status": w.status.value, "file": None, "line": None, "message": f"workload {w.axes}: {msg}"}
    return {"status": "RUNTIME_ERROR", "file": None, "line": None, "message": "no workloads were evaluated"}


def feedback_items(summary: dict[str, Any] | None) -> list[FeedbackItem]:
    if not summary:
        return []
    return [FeedbackItem.model_validate(d) for d in summary.get("feedback") or []]
