"""The sticky PR review, rendered with jinja2 from the evaluation Report (+ the champion's report).

Everything in a Report came from an untrusted runner job that executed candidate code, and names,
logs and messages may have been written by a model: every string is escaped before it reaches
Markdown. The jinja2 environment enforces that: its ``finalize`` hook escapes every value printed
with ``{{ }}`` unless a filter here produced it as ``Markup`` (numbers, our own formatting). A template
author cannot forget to escape.

Escaping (``escape_inline``): control characters dropped, length capped, ``& < >`` as entities (no
HTML, no fake ``<!-- kbot:... -->`` markers), Markdown punctuation backslash-escaped (no links,
images, emphasis, code spans, table breaks), ``@`` and ``#`` followed by a zero-width space (no
mentions, no cross-references), ``://`` broken (no autolinks).
"""

from __future__ import annotations

import base64
import json
import math
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from bot.forge.markers import REVIEW_MARKER, sticky_marker
from harness.report import FeedbackItem, Report, WorkloadResult
from harness.schema import Status

TEMPLATES = Path(__file__).resolve().parents[1] / "skills" / "reports"
ZWSP = "\u200b"
MAX_REVIEW_CHARS = 60_000  # GitHub rejects bodies over 65,536 characters
SEVERITY_ORDER = ("critical", "high", "medium", "low", "info")
REPORT_BLOCK_RE = re.compile(r"^<!-- kbot:evidence ([A-Za-z0-9+/=]{1,40000}) -->$", re.M)

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]()!~|])")


def _cap(text: str, cap: int) -> str:
    return text if len(text) <= cap else text[: max(0, cap - 1)] + "…"


def escape_inline(value: Any, cap: int = 200, *, code: bool = False) -> str:
    """Untrusted text → safe Markdown (a table cell, a line) or, with ``code``, safe ``<pre>`` content."""
    text = _CONTROL.sub("", str(value))
    text = _cap(text, cap)
    # Zero-width spaces first, so the entities written below are not split.
    text = text.replace("@", "@" + ZWSP).replace("#", "#" + ZWSP).replace("://", ":" + ZWSP + "//")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if code:
        return text.replace("`", "&#96;")
    text = text.replace("\r", " ").replace("\n", " ")
    return _MD_SPECIAL.sub(r"\\\1", text)


def _finalize(value: Any) -> Any:
    if isinstance(value, Markup):
        return value
    if value is None:
        return ""
    return Markup(escape_inline(value))


# --- filters: each returns Markup so the finalize hook lets it through ------------------------------


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def f_num(x: Any, digits: int = 3) -> Markup:
    if not _is_num(x):
        return Markup("—")
    if x != 0 and abs(x) < 10 ** -(digits):
        return Markup(f"{x:.{digits}g}")
    return Markup(f"{x:.{digits}f}")


def f_ci(pair: Any, digits: int = 3) -> Markup:
    if not isinstance(pair, (tuple, list)) or len(pair) != 2 or not all(_is_num(v) for v in pair):
        return Markup("")
    return Markup(f"[{f_num(pair[0], digits)}, {f_num(pair[1], digits)}]")


def f_x(x: Any, digits: int = 3) -> Markup:
    """A speedup: ``1.250x``, or a dash when there is no number."""
    return Markup(f"{f_num(x, digits)}x") if _is_num(x) else Markup("—")


def f_pct(x: Any) -> Markup:
    return Markup(f"{100 * x:.0f}%") if _is_num(x) else Markup("—")


def f_pre(value: Any, cap: int = 4000) -> Markup:
    """Untrusted multi-line text for a <pre> block; keeps the tail (the error is usually last)."""
    text = str(value or "")
    if len(text) > cap:
        text = "…" + text[-(cap - 1):]
    return Markup(escape_inline(text, cap + 1, code=True))


def f_cell(value: Any, cap: int = 80) -> Markup:
    return Markup(escape_inline(value, cap))


def f_sha(value: Any) -> Markup:
    s = str(value or "")
    return Markup(s[:12]) if re.fullmatch(r"[0-9a-f]{7,64}", s) else Markup(escape_inline(s, 16))


_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(TEMPLATES)),
    autoescape=False,  # Markdown, not HTML: escaping is done by finalize/filters above
    finalize=_finalize,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
_ENV.filters.update(x=f_x, num=f_num, ci=f_ci, pct=f_pct, pre=f_pre, cell=f_cell, sha=f_sha)


# --- view model ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    index: int
    w: WorkloadResult
    axes: str
    champion_median: float | None


def _axes_text(axes: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(axes.items()))


def top_feedback(report: Report, limit: int = 5) -> list[FeedbackItem]:
    """Most severe feedback items, one per (rule, title), across workloads."""
    seen: dict[tuple[str, str], FeedbackItem] = {}
    for w in report.workloads:
        for item in w.feedback:
            seen.setdefault((item.rule, item.title), item)
    order = {s: i for i, s in enumerate(SEVERITY_ORDER)}
    return sorted(seen.values(), key=lambda f: order.get(f.severity, 99))[:limit]


def chart_values(report: Report, limit: int = 60) -> tuple[list[str], list[float]]:
    """Bar chart data: label w<i> per workload, paired speedup vs champion (else vs reference), 0 if failed."""
    labels, values = [], []
    for i, w in enumerate(report.workloads[:limit], start=1):
        v = 0.0
        if w.status is Status.PASSED:
            if w.speedup_vs_baseline is not None and _is_num(w.speedup_vs_baseline.median):
                v = w.speedup_vs_baseline.median
            elif _is_num(w.speedup_vs_reference):
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
        rows.append(Row(i, w, _axes_text(w.axes), cw.latency_ms.median if cw and cw.latency_ms else None))
    labels, values = chart_values(report)
    failures = [w for w in report.workloads if w.status is not Status.PASSED]
    has_baseline = any(w.speedup_vs_baseline for w in report.workloads)
    findings = list(report.findings) + [f for w in report.workloads for f in w.findings]
    summary = report.summary()
    body = _ENV.get_template("review.md.j2").render(
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
    )
    block = evidence_block(report, head_sha)
    room = MAX_REVIEW_CHARS - len(block) - 200
    if len(body) > room:
        body = body[:room] + "\n\n…(review truncated; the full report is in the run's artifact)\n"
    return f"{body.rstrip()}\n\n{block}\n"


# --- the compact evidence block (for /promote and /status, read back from our own review) ----------


def evidence(report: Report, head_sha: str | None) -> dict[str, Any]:
    def ratio(w: WorkloadResult):
        r = w.speedup_vs_baseline
        return [r.median, r.ci95[0], r.ci95[1]] if r else None

    return {
        "v": 1,
        "definition": report.definition,
        "solution": report.solution,
        "solution_hash": report.solution_hash,
        "baseline": report.baseline,
        "baseline_hash": report.baseline_hash,
        "head_sha": head_sha,
        "run_id": report.run_id,
        "findings": len(report.findings) + sum(len(w.findings) for w in report.workloads),
        "w": [
            [w.uuid, w.status.value, (w.correctness.failed_trials if w.correctness else 0), ratio(w),
             w.speedup_vs_reference]
            for w in report.workloads
        ],
    }


def evidence_block(report: Report, head_sha: str | None) -> str:
    raw = json.dumps(evidence(report, head_sha), separators=(",", ":"), allow_nan=False,
                     default=lambda o: None).encode()
    return f"<!-- kbot:evidence {base64.b64encode(zlib.compress(raw, 9)).decode()} -->"


def read_evidence(body: str | None) -> dict[str, Any] | None:
    """The evidence block of a review body we wrote; None if absent or malformed."""
    if not body:
        return None
    found = None
    for m in REPORT_BLOCK_RE.finditer(body):
        try:
            data = json.loads(zlib.decompress(base64.b64decode(m.group(1), validate=True), bufsize=1 << 16))
        except (ValueError, zlib.error):
            continue
        if isinstance(data, dict) and data.get("v") == 1:
            found = data
    return found


def status_line(report: Report, decision: Any = None) -> tuple[str, str]:
    """(commit status state, description ≤ 140 chars) for ``kbot/harness``."""
    s = report.summary()
    if not report.all_passed or report.findings:
        state = "failure"
    else:
        state = "success"
    gm = s.get("geomean_speedup_vs_baseline")
    desc = f"{s['passed']}/{s['workloads']} passed"
    if _is_num(gm):
        desc += f", {gm:.3f}x vs champion"
    if decision is not None:
        desc += f"; {decision.action}"
    return state, _CONTROL.sub("", desc)[:140]


def find_bot_review(forge: Any, number: int) -> Any:
    """Our sticky review on PR ``number`` (the last one by the bot carrying the marker), or None."""
    from bot.forge.markers import has_marker

    bot = forge.info.bot_login.lower()
    found = None
    for review in forge.list_reviews(number):
        if review.author.lower() == bot and has_marker(review.body, REVIEW_MARKER):
            found = review
    return found


def find_evidence(forge: Any, number: int) -> dict[str, Any] | None:
    review = find_bot_review(forge, number)
    return read_evidence(review.body) if review is not None else None


# --- results ingestion and publication (report workflow / workflow_run in App mode) ----------------

MAX_REPORT_BYTES = 8 << 20
MAX_RESULT_FILES = 64
MAX_RESULTS_BYTES = 64 << 20


class ResultsError(ValueError):
    """The results directory cannot be used (limits exceeded, nothing valid in it)."""


def load_results(directory: str | Path) -> tuple[list[Report], list[str]]:
    """Validated Reports from an artifact directory, read strictly as data, and the problems met.

    Only regular ``*.json`` files are read (symlinks are refused: an artifact could point anywhere on
    the trusted runner); sizes and counts are bounded; every file must validate as a ``Report``.
    """
    import os

    root = Path(directory)
    if not root.is_dir():
        raise ResultsError(f"results directory {root} does not exist")
    reports: list[Report] = []
    problems: list[str] = []
    total = 0
    files = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root)
            if path.is_symlink():
                problems.append(f"{rel}: symlink refused")
                continue
            if not name.endswith(".json") or not path.is_file():
                continue
            files += 1
            if files > MAX_RESULT_FILES:
                raise ResultsError(f"more than {MAX_RESULT_FILES} JSON files in the results")
            size = path.stat().st_size
            total += size
            if size > MAX_REPORT_BYTES:
                problems.append(f"{rel}: {size} bytes, over the {MAX_REPORT_BYTES} limit")
                continue
            if total > MAX_RESULTS_BYTES:
                raise ResultsError(f"results larger than {MAX_RESULTS_BYTES} bytes")
            try:
                data = json.loads(path.read_bytes())
            except (ValueError, RecursionError) as e:
                problems.append(f"{rel}: not JSON ({type(e).__name__})")
                continue
            if not isinstance(data, dict) or "kbot_report" not in data:
                continue  # other JSON (traces, solutions) is not a report
            data.pop("summary", None)
            try:
                reports.append(Report.model_validate(data))
            except Exception as e:  # pydantic ValidationError; message lists the fields
                problems.append(f"{rel}: not a valid report: {str(e).splitlines()[0]}")
    return reports, problems


BENCH_SIDECAR = "kbot-bench.json"
_SOLUTION_PATH = re.compile(r"^kernels/[A-Za-z0-9_.-]+/(?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_.-]+\.json$")


def bench_solution_path(directory: str | Path, solution: str) -> str | None:
    """The repository path of ``solution`` as the bench job recorded it (``kbot-bench.json``), validated.

    Informational only (the artifact is written by a job that ran candidate code): promotion records
    the ``solution_path`` of the bot-written meta block instead.
    """
    for path in sorted(Path(directory).rglob(BENCH_SIDECAR)):
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 4096:
            continue
        try:
            data = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError, RecursionError):
            continue
        if not isinstance(data, dict):
            continue
        p = data.get("solution_path")
        if data.get("solution") == solution and isinstance(p, str) and _SOLUTION_PATH.match(p) and ".." not in p:
            return p
    return None


def pick_reports(reports: list[Report], meta: dict[str, Any] | None) -> tuple[Report | None, Report | None]:
    """(candidate report, champion report) among the results of one bench run."""
    candidate = None
    want_hash = meta.get("solution_hash") if meta else None
    want_name = meta.get("solution") if meta else None
    for r in reports:
        if (want_hash and r.solution_hash == want_hash) or (want_name and r.solution == want_name):
            candidate = r
    if candidate is None:
        with_baseline = [r for r in reports if r.baseline_hash]
        pool = with_baseline or reports
        candidate = pool[0] if len(pool) == 1 else None
    champion = None
    if candidate is not None and candidate.baseline_hash:
        champion = next((r for r in reports if r is not candidate and r.solution_hash == candidate.baseline_hash), None)
    return candidate, champion


@dataclass
class Published:
    pr: int
    state: str
    decision: Any = None
    review_id: int | None = None
    merged_sha: str | None = None
    closed: list[int] | None = None
    problems: list[str] | None = None


def _with_note(body: str, note: str) -> str:
    """``body`` (a rendered review) with one more paragraph just above its evidence block."""
    marker = "\n<!-- kbot:evidence "
    cut = body.rfind(marker)
    if cut < 0:
        return f"{body.rstrip()}\n\n{note}\n"
    return f"{body[:cut].rstrip()}\n\n{note}\n\n{body[cut + 1:]}"


def publish_results(forge: Any, pr_number: int, head_sha: str, *, reports: list[Report] | None = None,
                    results_dir: str | Path | None = None, run_url: str | None = None,
                    promote: bool = True) -> Published:
    """Sticky review + ``kbot/harness`` status (+ check run as an App) + promotion for one bench run.

    ``head_sha`` is the sha GitHub says was benchmarked (the workflow_run's head_sha), never a value
    read from the artifact. Promotion happens only when the kill switch is off and the PR passes
    ``bot.candidate_gate`` (checked in ``current_decision``).
    """
    from bot.auth import paused as bot_paused
    from bot.candidate_gate import solution_folder
    from bot.forge.base import UnsupportedError
    from bot.meta_key import read_meta
    from bot.promotion import Evidence, current_decision, execute, find_losers

    problems: list[str] = []
    if reports is None:
        if results_dir is None:
            raise ValueError("give reports or results_dir")
        reports, problems = load_results(results_dir)
    pr = forge.get_pr(pr_number)
    if not pr.head_branch.startswith("kbot/") or pr.from_fork:
        raise ResultsError(f"PR #{pr_number} is not a kbot candidate branch of this repository")
    if not pr.is_open:
        # A late or re-run bench of a PR that was merged or closed: its review stays as it was. A merged
        # PR whose champion pointer was never written (interrupted promotion) gets it now.
        if pr.merged and promote and not bot_paused(forge, pr.labels):
            from bot.promotion import resume_pointer

            resumed = resume_pointer(forge, pr)
            if resumed is not None and resumed.pointer_sha:
                return Published(pr_number, "resumed", resumed.decision, merged_sha=resumed.merged_sha,
                                 closed=resumed.closed, problems=problems)
        return Published(pr_number, "skipped", problems=problems)
    meta = read_meta(pr, forge.info.bot_login)
    report, champion = pick_reports(reports, meta)
    if report is None:
        desc = "no usable report in the results" + (f" ({len(problems)} problem(s))" if problems else "")
        forge.set_status(head_sha, "error", context="kbot/harness", description=desc[:140], target_url=run_url)
        text = "The bench run produced no usable report.\n\n" + "\n".join(
            f"- {escape_inline(p, 300)}" for p in problems[:20])
        if read_evidence(getattr(find_bot_review(forge, pr_number), "body", None)) is not None:
            # Keep the last real evaluation (``/promote``, ``/status`` and the campaign read it back);
            # say what happened in a note of its own instead.
            note = sticky_marker("bench-error")
            forge.upsert_comment(pr_number, note, f"{note}\n## kbot: bench run without results\n\n"
                                           f"For `{head_sha[:12]}`. {text}\n\nThe review above still shows the last evaluation.")
            return Published(pr_number, "error", None, None, problems=problems)
        body = f"{REVIEW_MARKER}\n## kbot evaluation\n\n{text}"
        review = forge.upsert_review(pr_number, REVIEW_MARKER, body, commit_sha=head_sha)
        return Published(pr_number, "error", None, review.id, problems=problems)

    ev = Evidence.from_report(report, head_sha)
    current, decision, policy = current_decision(forge, pr, ev)
    paused = bot_paused(forge, current.labels) if promote and decision.action == "promote" else None
    body = render_review(report, champion, decision, head_sha=head_sha, run_url=run_url)
    if paused:
        body = _with_note(body, f"**Promotion paused:** {escape_inline(paused, 300)}. Nothing was merged; "
                                "run `/promote` once the bot is resumed.")
    review = forge.upsert_review(pr_number, REVIEW_MARKER, body, commit_sha=head_sha)
    state, desc = status_line(report, decision)
    if paused:
        desc = (desc + " (promotion paused)")[:140]
    forge.set_status(head_sha, state, context="kbot/harness", description=desc, target_url=run_url)
    if getattr(forge.info, "supports_check_runs", False):
        try:
            forge.create_check_run(head_sha, "kbot/harness", status="completed",
                                   conclusion="success" if state == "success" else "failure",
                                   title=desc, summary=body[:60000])
        except UnsupportedError:
            pass
    out = Published(pr_number, state, decision, review.id, problems=problems)
    if promote and decision.action == "promote" and not paused:
        losers = find_losers(forge, pr_number, ev.definition) if policy.close_losers else []
        # The bot-written meta block names the solution's file (validated by the candidate gate);
        # never a path from the artifact, which a job running candidate code wrote.
        path = meta.get("solution_path") if solution_folder(meta) else None
        result = execute(forge, current, ev, decision, policy, summary=report.summary(), losers=losers,
                         solution_path=path)
        out.merged_sha, out.closed = result.merged_sha, result.closed
        if result.decision is not decision:  # e.g. the head moved during the merge
            out.decision = result.decision
            forge.upsert_review(pr_number, REVIEW_MARKER,
                                render_review(report, champion, result.decision, head_sha=head_sha, run_url=run_url),
                                commit_sha=head_sha)
    return out
