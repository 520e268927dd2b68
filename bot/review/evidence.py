"""The evidence block: what one evaluation proved, in a hidden line at the end of our sticky review.

``/promote``, ``/status``, the GitHub campaign and the promotion of a later candidate read it back from
the review instead of re-measuring: ``evidence_block`` writes it (zlib + base64 JSON, version 1),
``read_evidence`` / ``find_evidence`` read it from a review the bot wrote, and ``Evidence`` is the typed
view the promotion rules judge (built from a Report or from a block; a malformed block is a ValueError).
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from dataclasses import dataclass
from typing import Any, Mapping

from pydantic import ValidationError

from bot.forge.markers import REVIEW_MARKER, has_marker
from harness.report import FeedbackItem, Report, WorkloadResult, top_feedback

EVIDENCE_BLOCK_RE = re.compile(r"^<!-- kbot:evidence ([A-Za-z0-9+/=]{1,40000}) -->$", re.M)
EVIDENCE_LINE_START = "<!-- kbot:evidence "


MAX_FEEDBACK = 8  # items carried by a block: the most severe, one per (rule, title), as the prompt shows them
_FB_TEXT = 400  # characters kept of an item's cause / recommendation
_FB_EVIDENCE = 6  # evidence values kept per item (numbers and short strings)


def feedback_rows(report: Report) -> list[list[Any]]:
    """The report's top feedback items as block rows: [rule, severity, title, cause, recommendation,
    kernel, evidence] (texts cut, a few evidence values), what a later ``/optimize`` puts in its prompt."""
    rows = []
    for f in top_feedback(report.workloads, MAX_FEEDBACK):
        ev = {k: v for k, v in f.evidence.items() if isinstance(v, (int, float, bool)) or (isinstance(v, str) and len(v) <= 80)}
        rows.append([f.rule[:80], f.severity, f.title[:200], f.cause[:_FB_TEXT], f.recommendation[:_FB_TEXT],
                     f.kernel[:120] if f.kernel else None, dict(list(ev.items())[:_FB_EVIDENCE])])
    return rows


def feedback_from_rows(rows: Any) -> tuple[FeedbackItem, ...]:
    """Block rows back into FeedbackItems; ValueError when a row is not one ``feedback_rows`` writes."""
    if not isinstance(rows, list) or len(rows) > MAX_FEEDBACK:
        raise ValueError("feedback: not a list of at most %d rows" % MAX_FEEDBACK)
    out = []
    for row in rows:
        if not (isinstance(row, list) and len(row) == 7 and isinstance(row[6], dict)):
            raise ValueError("feedback: a row is not [rule, severity, title, cause, recommendation, kernel, evidence]")
        rule, severity, title, cause, rec, kernel, ev = row
        try:
            out.append(FeedbackItem(rule=str(rule)[:80], severity=severity, title=str(title)[:200], cause=str(cause)[:_FB_TEXT],
                                    recommendation=str(rec)[:_FB_TEXT], kernel=str(kernel)[:120] if kernel else None,
                                    evidence={str(k)[:80]: v for k, v in list(ev.items())[:_FB_EVIDENCE]
                                              if isinstance(v, (int, float, bool)) or (isinstance(v, str) and len(v) <= 80)}))
        except ValidationError as e:
            raise ValueError(f"feedback: {e.errors()[0].get('msg')}") from None
    return tuple(out)


def evidence(report: Report, head_sha: str | None) -> dict[str, Any]:
    """The block's content: per workload (uuid, status, failed trials, paired ratio, speedup vs reference,
    the names of kbot's extra checks it failed), and the report's top feedback items (``fb``)."""
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
             w.speedup_vs_reference, list(failed_checks(w))]
            for w in report.workloads
        ],
        # Per workload, aligned with "w": [candidate, paired baseline] NVML energy per call in joules
        # (null where either is missing); the promotion's energy tie-break reads it. Absent: none at all.
        **({"energy": [energy_pair(w) for w in report.workloads]} if any(energy_pair(w) for w in report.workloads) else {}),
        # Per workload, aligned with "w": [fraction of the roofline floor, floor ms, bound class] (null
        # where there is none): the speed-of-light stop rule and the summaries read it back on GitHub.
        **({"roofline": [roofline_row(w) for w in report.workloads]} if any(roofline_row(w) for w in report.workloads) else {}),
        # Per workload, aligned with "w": the paired baseline's median latency in ms (null where none): with
        # the paired ratios it gives the mean-latency ratio the promotion's speed rule also accepts.
        **({"bms": [baseline_ms(w) for w in report.workloads]} if any(baseline_ms(w) for w in report.workloads) else {}),
        "fb": feedback_rows(report),
    }


def roofline_row(w: WorkloadResult) -> list[Any] | None:
    r = w.roofline
    return [r.fraction, r.floor_ms, r.bound] if r is not None and r.fraction is not None else None


def baseline_ms(w: WorkloadResult) -> float | None:
    b = w.baseline_latency_ms
    return b.median if b is not None and w.speedup_vs_baseline is not None else None


def energy_pair(w: WorkloadResult) -> list[float] | None:
    c, b = w.energy_j_per_call, getattr(w, "baseline_energy_j_per_call", None)
    return [c, b] if c is not None and b is not None else None


def evidence_block(report: Report, head_sha: str | None) -> str:
    raw = json.dumps(evidence(report, head_sha), separators=(",", ":"), allow_nan=False,
                     default=lambda o: None).encode()
    return f"{EVIDENCE_LINE_START}{base64.b64encode(zlib.compress(raw, 9)).decode()} -->"


def read_evidence(body: str | None) -> dict[str, Any] | None:
    """The evidence block of a review body we wrote; None if absent or malformed."""
    if not body:
        return None
    found = None
    for m in EVIDENCE_BLOCK_RE.finditer(body):
        try:
            data = json.loads(zlib.decompress(base64.b64decode(m.group(1), validate=True), bufsize=1 << 16))
        except (ValueError, zlib.error):
            continue
        if isinstance(data, dict) and data.get("v") == 1:
            found = data
    return found


def find_bot_review(forge: Any, number: int) -> Any:
    """Our sticky review on PR ``number`` (the last one by the bot carrying the marker), or None."""
    bot = forge.info.bot_login.lower()
    found = None
    for review in forge.list_reviews(number):
        if review.author.lower() == bot and has_marker(review.body, REVIEW_MARKER):
            found = review
    return found


def find_evidence(forge: Any, number: int) -> dict[str, Any] | None:
    review = find_bot_review(forge, number)
    return read_evidence(review.body) if review is not None else None


def failed_checks(w: WorkloadResult) -> tuple[str, ...]:
    """The kbot extra checks (sidecar ``checks:``) this workload failed, by name."""
    checks = w.correctness.checks if w.correctness else {}
    return tuple(sorted(name for name, c in checks.items() if not c.ok))


@dataclass(frozen=True)
class WorkloadEvidence:
    uuid: str
    status: str
    failed_trials: int
    ratio: tuple[float, float, float] | None  # paired champion/candidate: median, ci low, ci high
    vs_reference: float | None
    failed_checks: tuple[str, ...] = ()  # kbot's extra checks failed (the status stays the official verdict)
    energy: tuple[float, float] | None = None  # NVML J per call: (candidate, paired champion), same job
    roofline: tuple[float, float, str | None] | None = None  # (fraction of the floor, floor ms, bound class)
    baseline_ms: float | None = None  # the paired champion's median latency (ms), measured in the same job


@dataclass(frozen=True)
class Evidence:
    definition: str
    solution: str
    solution_hash: str
    baseline_hash: str | None
    head_sha: str | None
    findings: int
    workloads: tuple[WorkloadEvidence, ...]
    feedback: tuple[FeedbackItem, ...] = ()  # the most severe items (``feedback_rows``); older blocks have none

    @classmethod
    def from_report(cls, report: Report, head_sha: str | None) -> "Evidence":
        ws = []
        for w in report.workloads:
            r = w.speedup_vs_baseline
            e, roof = energy_pair(w), roofline_row(w)
            ws.append(WorkloadEvidence(
                w.uuid, w.status.value, w.correctness.failed_trials if w.correctness else 0,
                (r.median, r.ci95[0], r.ci95[1]) if r else None, w.speedup_vs_reference, failed_checks(w),
                (e[0], e[1]) if e else None, (roof[0], roof[1], roof[2]) if roof else None, baseline_ms(w)))
        return cls(report.definition, report.solution, report.solution_hash, report.baseline_hash, head_sha,
                   len(report.findings) + sum(len(w.findings) for w in report.workloads), tuple(ws),
                   feedback_from_rows(feedback_rows(report)))

    @classmethod
    def from_block(cls, data: Mapping[str, Any]) -> "Evidence":
        """From ``evidence`` data (a block read back with ``read_evidence``); ValueError if malformed."""
        try:
            ws = []
            energy, roofs, bms = data.get("energy"), data.get("roofline"), data.get("bms")
            for name, extra in (("energy", energy), ("roofline", roofs), ("bms", bms)):
                if extra is not None and (not isinstance(extra, list) or len(extra) != len(data["w"])):
                    raise ValueError(f"the {name} list does not match the workloads")
            for i, row in enumerate(data["w"]):
                # 5 fields; a 6th (failed kbot checks) since blocks carry them: older blocks have none
                uuid, status, failed, ratio, vs_ref = row[:5]
                checks = row[5] if len(row) == 6 else [] if len(row) == 5 else None
                if not isinstance(checks, list):
                    raise ValueError(f"a workload row has {len(row)} fields")
                rt = None
                if ratio is not None:
                    m, lo, hi = (float(x) for x in ratio)
                    rt = (m, lo, hi)
                en = energy[i] if energy is not None else None
                if en is not None:
                    c_j, b_j = (float(x) for x in en)
                    en = (c_j, b_j)
                rf = roofs[i] if roofs is not None else None
                if rf is not None:
                    frac, floor, bound = rf
                    rf = (float(frac), float(floor), str(bound)[:16] if bound is not None else None)
                bm = bms[i] if bms is not None else None
                ws.append(WorkloadEvidence(str(uuid), str(status), int(failed), rt,
                                           float(vs_ref) if vs_ref is not None else None, tuple(str(c)[:80] for c in checks), en, rf,
                                           float(bm) if bm is not None else None))
            return cls(str(data["definition"]), str(data["solution"]), str(data["solution_hash"]),
                       data.get("baseline_hash"), data.get("head_sha"), int(data["findings"]), tuple(ws),
                       feedback_from_rows(data.get("fb", [])))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"malformed evidence block: {e}") from None

