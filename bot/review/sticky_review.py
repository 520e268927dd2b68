"""The sticky PR review, rendered with jinja2 (skills/reports/review.md.j2) from the evaluation Report and
the champion's report, with the evidence block at its end; and the one-line commit status of the same
evaluation. Every value reaches Markdown through ``bot.review.markdown`` (escaped unless a filter made it).

Besides the figures a review says what to do with them: the command that reproduces its measurement
(``repro_command``), the next step when the attempt is not promoted (``next_steps``: ``/optimize``,
``/profile``, ``/evaluate``), the promotion threshold as a line in its chart, the failed workloads
unfolded, and the GPU (or CPU) the figures came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from bot.forge.markers import REVIEW_MARKER
from bot.promotion.candidate_gate import AWAITING_APPROVAL
from bot.review.evidence import EVIDENCE_LINE_START, evidence_block
from bot.review.markdown import escape_inline, is_number, render_template, strip_control
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


# A word of a command line that needs no quoting and cannot be read as Markdown inside a code block.
_SAFE_WORD = re.compile(r"[A-Za-z0-9_/][A-Za-z0-9_./:=+-]{0,199}")


def _word(value: Any, placeholder: str) -> str:
    s = str(value) if value is not None else ""
    return s if _SAFE_WORD.fullmatch(s) and ".." not in s else placeholder


def repro_command(report: Report, solution_path: str | None = None, head_sha: str | None = None,
                  champion_path: str | None = None) -> str:
    """The commands that repeat this measurement from a checkout: the measured head, then ``kbot eval``
    with the same definition, champion pairing, declared baselines, device and timing budget. Every
    word is checked against a plain-word pattern (a name that is not one becomes a placeholder), so the
    text is safe in a shell and in a Markdown code block."""
    d = _word(report.definition, "DEFINITION")
    sol = _word(solution_path or f"kernels/{report.definition}/{report.solution}/solution.json", "SOLUTION.json")
    lines = []
    if head_sha:
        lines.append(f"git checkout {_word(head_sha, 'HEAD_SHA')}")
    cmd = f"kbot eval {sol} --definition {d}"
    if report.baseline:
        if champion_path and _word(champion_path, "") == champion_path:
            cmd += f" --baseline {champion_path}"
        else:  # measured against a champion whose file this review does not know: say where it is
            lines.append(f"git show main:kernels/{d}/champion.json   # its solution_path is CHAMPION.json below")
            cmd += " --baseline CHAMPION.json"
    if report.baselines:
        cmd += " --baselines all"
    inputs = report.config.get("inputs") if isinstance(report.config, dict) else None
    if isinstance(inputs, dict) and inputs.get("workloads_origin") == "given" and isinstance(inputs.get("workloads_path"), str):
        cmd += f" --workloads {_word(inputs['workloads_path'], 'WORKLOADS.jsonl')}"
    cmd += f" --device {report.device.kind}"
    timing = report.config.get("timing") if isinstance(report.config, dict) else None
    budget = timing.get("budget_s") if isinstance(timing, dict) else None
    if is_number(budget) and budget != 0.5:
        cmd += f" --budget {budget:g}"
    lines.append(cmd)
    return "\n".join(lines)


def next_steps(report: Report, decision: Any) -> list[str]:
    """What to do after this evaluation, in Markdown (commands in code spans): nothing once promoted;
    after a reject, ``/optimize`` for the next attempt and ``/profile`` when it was correct but slow;
    ``/evaluate`` when the measurement is stale."""
    if decision is None or decision.action == "promote":
        return []
    d = _word(report.definition, "DEFINITION")
    failed = [r for r in decision.reasons if not r.ok]
    if decision.action == "rebenchmark":
        return ["The measurement is stale (" + "; ".join(escape_inline(r.detail, 200) for r in failed[:2])
                + "): comment `/evaluate` to benchmark the current head against today's champion."]
    if failed and all(AWAITING_APPROVAL in r.detail for r in failed):
        return ["A maintainer reviews the code and approves the measured head, then comments `/promote`."]
    wrong = [w for w in report.workloads if w.status is not Status.PASSED] or report.findings
    if wrong or any(r.rule in ("all passed", "kbot checks", "guard clean") for r in failed):
        return [f"Comment `/optimize {d}` for the next attempt: the agent reads this review's failures (below, unfolded).",
                f"Locally: `kbot optimize {d}` in the workspace, or fix the kernel and re-run the command above."]
    sol = _word(f"kernels/{report.definition}/{report.solution}/solution.json", "SOLUTION.json")
    return [f"Comment `/profile` to benchmark this head with the profiler and its feedback rules (locally, on a GPU: "
            f"`kbot profile {sol} -d {d}`), then `/optimize {d}` for the next attempt, which is steered by that feedback.",
            "The chart shows which workloads fall short of the promotion threshold."]


def chart_threshold(report: Report, policy: Any) -> float | None:
    """The promotion threshold the chart's line marks: the policy's minimum paired speedup over the
    champion when the chart shows that, its first-champion minimum over the reference otherwise."""
    if policy is None:
        return None
    paired = any(w.speedup_vs_baseline for w in report.workloads)
    return float(policy.min_speedup if paired else policy.first_champion_min_speedup_vs_reference)


def render_review(report: Report, champion: Report | None = None, decision: Any = None, *,
                  head_sha: str | None = None, run_url: str | None = None, policy: Any = None,
                  solution_path: str | None = None, champion_path: str | None = None) -> str:
    """Markdown body of the sticky review (starts with the review marker, ends with the evidence block).
    ``policy`` (the promotion policy the decision used) puts its threshold in the chart;
    ``solution_path`` (the solution's file in the PR) and ``champion_path`` (the champion's file on the
    default branch, when it is the one measured against) go into the reproduction command."""
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
    threshold = chart_threshold(report, policy)
    body = render_template(
        "review.md.j2",
        marker=Markup(REVIEW_MARKER),
        report=report,
        champion=champion,
        rows=rows,
        summary=summary,
        chart_labels=Markup(", ".join(labels)),
        chart_values=Markup(", ".join(f"{v:.4f}".rstrip("0").rstrip(".") for v in values)),
        chart_max=Markup(f"{max(values + [1.0, threshold or 0.0]) * 1.15:.2f}"),
        chart_threshold=Markup(", ".join(f"{threshold:g}" for _ in values)) if threshold is not None else None,
        threshold=Markup(f"{threshold:g}") if threshold is not None else None,
        repro=Markup(repro_command(report, solution_path, head_sha, champion_path)),
        next_steps=[Markup(s) for s in next_steps(report, decision)],
        gpu_kind=report.device.kind,
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
    """(commit status state, description ≤ 140 chars) for the ``kbot/harness`` status. Green only for
    an evaluation that passed and was not rejected: a failed workload, a guard finding or a reject is
    ``failure``; a reject that only waits for a maintainer's approval of a person's PR is ``pending``."""
    s = report.summary()
    failed = [r for r in decision.reasons if not r.ok] if decision is not None else []
    if not report.all_passed or report.findings:
        state = "failure"
    elif decision is not None and decision.action == "reject":
        state = "pending" if failed and all(AWAITING_APPROVAL in r.detail for r in failed) else "failure"
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

