"""The sticky PR review, rendered with jinja2 (skills/reports/review.md.j2) from the evaluation Report and
the champion's report, with the evidence block at its end; and the one-line commit status of the same
evaluation. Every value reaches Markdown through ``bot.review.markdown`` (escaped unless a filter made it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from bot.forge.markers import REVIEW_MARKER
from bot.review.evidence import EVIDENCE_LINE_START, evidence_block
from bot.review.markdown import is_number, render_template, strip_control
from harness.report import FeedbackItem, Report, WorkloadResult, best_baseline
from harness.report import top_feedback as report_top_feedback
from harness.schema import Status

MAX_REVIEW_CHARS = 60_000  # GitHub rejects bodies over 65,536 characters


# --- view model ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    index: int
    w: WorkloadResult
    axes: str
    champion_median: float | None
    best: tuple[str, Any] | None = None  # (name, BaselineResult): the fastest declared baseline that passed here


def _axes_text(axes: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(axes.items()))


def top_feedback(report: Report, limit: int = 5) -> list[FeedbackItem]:
    """Most severe feedback items, one per (rule, title), across workloads (``harness.report.top_feedback``)."""
    return report_top_feedback(report.workloads, limit)


def chart_values(report: Report, limit: int = 60) -> tuple[list[str], list[float]]:
    """Bar chart data: label w<i> per workload, paired speedup vs champion (else vs reference), 0 if failed."""
    labels, values = [], []
    for i, w in enumerate(report.workloads[:limit], start=1):
        v = 0.0
        if w.status is Status.PASSED:
            if w.speedup_vs_baseline is not None and is_number(w.speedup_vs_baseline.median):
                v = w.speedup_vs_baseline.median
            elif is_number(w.speedup_vs_reference):
                v = float(w.speedup_vs_reference)  # type: ignore[arg-type]
        labels.append(f"w{i}")
        values.append(round(max(0.0, min(v, 1e6)), 4))
    return labels, values


def render_review(report: Report, champion: Report | None = None, decision: Any = None, *,
                  head_sha: str | None = None, run_url: str | None = None) -> str:
    """Markdown body of the sticky review (starts with the review marker, ends with the evidence block)."""
    champ_by_uuid = {w.uuid: w for w in (champion.workloads if champion else [])}
    rows = []
    for i, w in enumerate(report.workloads, start=1):
        cw = champ_by_uuid.get(w.uuid)
        best = best_baseline(w) if w.status is Status.PASSED else None
        rows.append(Row(i, w, _axes_text(w.axes), cw.latency_ms.median if cw and cw.latency_ms else None, best))
    labels, values = chart_values(report)
    failures = [w for w in report.workloads if w.status is not Status.PASSED]
    has_baseline = any(w.speedup_vs_baseline for w in report.workloads)
    findings = list(report.findings) + [f for w in report.workloads for f in w.findings]
    summary = report.summary()
    body = render_template(
        "review.md.j2",
        marker=Markup(REVIEW_MARKER),
        report=report,
        champion=champion,
        rows=rows,
        summary=summary,
        chart_labels=Markup(", ".join(labels)),
        chart_values=Markup(", ".join(f"{v:.4f}".rstrip("0").rstrip(".") for v in values)),
        chart_max=Markup(f"{max(values + [1.0]) * 1.15:.2f}"),
        chart_title=Markup("Paired speedup vs champion" if has_baseline else "Speedup vs reference"),
        chart_truncated=len(report.workloads) > len(labels),
        feedback=top_feedback(report),
        failures=failures[:20],
        findings=findings[:30],
        decision=decision,
        head_sha=head_sha,
        run_url=run_url if run_url and re.fullmatch(r"https://[A-Za-z0-9./_-]{1,300}", run_url) else None,
        passed=Status.PASSED,
        has_kernel_time=any(w.kernel_time is not None and w.kernel_time.latency_ms is not None for w in report.workloads),
        has_baselines=any(r.best for r in rows),
        baseline_failures=baseline_failures(report),
    )
    block = evidence_block(report, head_sha)
    room = MAX_REVIEW_CHARS - len(block) - 200
    if len(body) > room:
        body = body[:room] + "\n\n…(review truncated; the full report is in the run's artifact)\n"
    return f"{body.rstrip()}\n\n{block}\n"



def baseline_failures(report: Report) -> dict[str, list[str]]:
    """Per declared baseline that ran: one line per workload it did not pass (status and why)."""
    out: dict[str, list[str]] = {}
    for i, w in enumerate(report.workloads, start=1):
        for name, b in w.baselines.items():
            if b.status is not Status.PASSED:
                out.setdefault(name, []).append(f"w{i} {b.status.value}: {b.message}")
    return out


def status_line(report: Report, decision: Any = None) -> tuple[str, str]:
    """(commit status state, description ≤ 140 chars) for the ``kbot/harness`` status."""
    s = report.summary()
    if not report.all_passed or report.findings:
        state = "failure"
    else:
        state = "success"
    gm = s.get("geomean_speedup_vs_baseline")
    desc = f"{s['passed']}/{s['workloads']} passed"
    if is_number(gm):
        desc += f", {gm:.3f}x vs champion"
    gb = s.get("geomean_speedup_vs_best_baseline")
    if is_number(gb):
        desc += f", {gb:.3f}x vs best baseline"
    if decision is not None:
        desc += f"; {decision.action}"
    return state, strip_control(desc)[:140]



def with_note(body: str, note: str) -> str:
    """``body`` (a rendered review) with one more paragraph just above its evidence block."""
    marker = "\n" + EVIDENCE_LINE_START
    cut = body.rfind(marker)
    if cut < 0:
        return f"{body.rstrip()}\n\n{note}\n"
    return f"{body[:cut].rstrip()}\n\n{note}\n\n{body[cut + 1:]}"

