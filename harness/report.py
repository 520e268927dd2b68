"""The evaluation report: one JSON per (solution, run).

The PR review, the promotion rules, the leaderboard and the search tree are all rendered from this
object; nothing re-measures to render. Times are milliseconds. ``ci95`` is a two-sided 95% interval.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from .geomean import geomean
from .schema import Status

REPORT_VERSION = 1


class _M(BaseModel):
    model_config = ConfigDict(extra="allow")


class LatencyStats(_M):
    """Statistics of per-call latency samples (ms)."""

    median: float
    mean: float
    ci95: tuple[float, float]  # interval for the median
    stdev: float
    sem: float  # standard error of the mean
    n: int
    min: float
    max: float


class PairedRatio(_M):
    """baseline_time / candidate_time from interleaved measurements (>1 means the candidate is faster)."""

    median: float
    ci95: tuple[float, float]
    n: int


class KernelTime(_M):
    """The GPU's own time for the calls that were event-timed: from the start of a call's first kernel
    (copy, fill) to the end of its last, read from CUPTI activity records. It leaves out the launch
    floor that sits between two events (~3.4 µs on the H200, different per process), so few-µs kernels
    reproduce across processes and their ratios are not compressed by it. Withheld, with the reason,
    whenever a record could not be linked to its call."""

    source: Literal["cupti"] = "cupti"
    latency_ms: LatencyStats | None = None
    reference_latency_ms: LatencyStats | None = None
    speedup_vs_reference: float | None = None
    baseline_latency_ms: LatencyStats | None = None
    speedup_vs_baseline: PairedRatio | None = None
    withheld: str = ""  # why there is no figure (or none for the reference/baseline), empty when complete


class Roofline(_M):
    bytes: float
    flops: float
    intensity: float  # FLOP per byte
    floor_ms: float  # launch floor + max(bytes/bandwidth, flops/peak) on the measured ceilings (harness/roofline.py)
    fraction: float | None = None  # floor_ms / measured median (1.0 = at the floor)
    # the largest term of the floor (launch / memory / compute), or latency: measured 20x the floor or more
    bound: Literal["memory", "compute", "launch", "latency"] | None = None
    ceilings: dict[str, Any] = Field(default_factory=dict)


class Finding(_M):
    """A guard finding: which rule, where, and why it matters."""

    rule: str
    message: str
    why: str = ""
    file: str | None = None
    line: int | None = None
    severity: Literal["error", "warning"] = "error"


Severity = Literal["critical", "high", "medium", "low", "info"]
SEVERITIES: tuple[str, ...] = get_args(Severity)  # most severe first: the order every list of items is sorted in


def severity_rank(severity: str) -> int:
    """0 for the most severe; an unknown severity sorts after every known one."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


class FeedbackItem(_M):
    """A semantic-feedback item from the profiling rule engine."""

    rule: str
    severity: Severity
    title: str
    evidence: dict[str, Any] = Field(default_factory=dict)
    cause: str = ""
    recommendation: str = ""
    kernel: str | None = None


def top_feedback(workloads: "list[WorkloadResult]", limit: int | None = None) -> list[FeedbackItem]:
    """The feedback items of a report's workloads, one per (rule, title), most severe first (the
    engine's impact order kept within a severity); ``limit``: the first so many."""
    seen: dict[tuple[str, str], FeedbackItem] = {}
    for w in workloads:
        for item in w.feedback:
            seen.setdefault((item.rule, item.title), item)
    ranked = sorted(seen.values(), key=lambda f: severity_rank(f.severity))
    return ranked if limit is None else ranked[:limit]


class BuildError(_M):
    file: str | None = None
    line: int | None = None
    column: int | None = None
    message: str


class BuildResult(_M):
    ok: bool
    language: str
    seconds: float = 0.0
    errors: list[BuildError] = Field(default_factory=list)
    log: str = ""


class CheckResult(_M):
    """One extra kbot check (sidecar ``checks:``) over a workload's correctness trials.

    Beside the verdict, never part of it: a workload whose official verdict passed keeps PASSED when a
    check fails; the review shows the check on a line of its own."""

    ok: bool = True
    value: float | None = None  # the worst trial's measured value (larger is worse)
    limit: float | None = None
    trials: int = 0
    failed_trials: int = 0
    message: str = ""  # the worst trial's detail
    why: str = ""  # what the check is for (from the sidecar)


class Correctness(_M):
    max_absolute_error: float = 0.0
    max_relative_error: float = 0.0
    matched_ratio: float | None = None
    trials: int = 0
    failed_trials: int = 0
    detail: str | None = None
    checks: dict[str, CheckResult] = Field(default_factory=dict)

    def add_checks(self, outcomes: dict[str, Any]) -> None:
        """Fold one trial's check outcomes (``harness.compare.CheckOutcome``) into the running results:
        passed only if every trial passed; value and message are the worst trial's (a check that could
        not measure, value None, counts as the worst)."""
        for name, o in outcomes.items():
            c = self.checks.setdefault(name, CheckResult(limit=o.limit, why=o.why))
            first = c.trials == 0
            c.trials += 1
            c.ok = c.ok and bool(o.ok)
            c.failed_trials += 0 if o.ok else 1
            worst_so_far = math.inf if c.value is None else c.value
            if first or o.value is None or (c.value is not None and o.value > worst_so_far):
                c.value, c.message = o.value, o.message


class BaselineResult(_M):
    """A declared baseline (harness/baselines.py) on one workload, measured beside the candidate in the
    candidate's worker: its outputs checked against the reference on the candidate's trial inputs, then
    timed interleaved with the candidate (ABBA), so ``speedup`` is a paired ratio like the champion's."""

    status: Status
    message: str = ""
    latency_ms: LatencyStats | None = None
    speedup: PairedRatio | None = None  # baseline time / candidate time (>1: the candidate is faster)
    kernel_time_ms: float | None = None  # the baseline's median GPU time (CUPTI), when its records were complete
    kernel_speedup: PairedRatio | None = None  # the same ratio on GPU time


class BaselineRun(_M):
    """What became of one declared baseline in a run: it ran, it could not run here (and why), or it
    failed to build."""

    name: str
    solution: str
    solution_hash: str
    dependencies: list[str] = Field(default_factory=list)
    state: Literal["ran", "could not run", "failed"]
    reason: str = ""


_Scalar = bool | int | float | str | None


class LaunchSignature(_M):
    """One launch signature of a Triton kernel of the solution's own, as the worker's correctness calls
    launched it (harness/profile/launches.py): what the ahead-of-time compile uses instead of guessing
    from the source. Written by the candidate's worker, so read as bounded data."""

    kernel: str = Field(max_length=200)
    source: str = Field(max_length=400)  # the kernel's file, relative to the solution's sources
    signature: dict[str, str] = Field(max_length=256)  # parameter -> Triton type ("*bf16", "i32", "constexpr")
    constexprs: dict[str, _Scalar] = Field(default_factory=dict, max_length=256)
    options: dict[str, int] = Field(default_factory=dict, max_length=8)  # num_warps, num_stages, ...
    divisible: list[str] = Field(default_factory=list, max_length=256)  # pointers 16-byte aligned, ints divisible by 16
    unsupported: list[str] = Field(default_factory=list, max_length=256)  # parameters it could not type
    count: int = 1  # launches with this signature


class WorkloadResult(_M):
    uuid: str
    axes: dict[str, int]
    status: Status
    message: str = ""  # one human line: why it failed, or empty
    log: str = ""
    correctness: Correctness | None = None
    latency_ms: LatencyStats | None = None
    reference_latency_ms: LatencyStats | None = None
    speedup_vs_reference: float | None = None
    baseline_latency_ms: LatencyStats | None = None
    speedup_vs_baseline: PairedRatio | None = None
    kernel_time: KernelTime | None = None  # GPU runs only
    roofline: Roofline | None = None
    # NVML energy per call of the candidate and of its paired baseline, measured in the same worker right
    # after the timing (TimingConfig.energy_s); None where no counter exists (profile.energy_missing says why).
    energy_j_per_call: float | None = None
    baseline_energy_j_per_call: float | None = None
    findings: list[Finding] = Field(default_factory=list)
    feedback: list[FeedbackItem] = Field(default_factory=list)
    profile: dict[str, Any] | None = None
    seconds: float = 0.0  # wall time spent on this workload, everything included
    # The OS isolation of the worker that produced this result, as that worker reported it before any
    # candidate code ran (harness/sandbox.py); set by the parent, None when no worker ran (a static
    # guard refusal).
    isolation: dict[str, Any] | None = None
    baselines: dict[str, BaselineResult] = Field(default_factory=dict)  # declared baselines by name
    launches: list[LaunchSignature] = Field(default_factory=list, max_length=64)  # Triton solutions only


def best_baseline(w: WorkloadResult) -> tuple[str, BaselineResult] | None:
    """The fastest declared baseline that passed on this workload and has a paired ratio (lowest median
    latency; ties by name), or None: "the best baseline that ran" of every review and summary."""
    ran = [(name, b) for name, b in w.baselines.items()
           if b.status is Status.PASSED and b.speedup is not None and b.latency_ms is not None]
    return min(ran, key=lambda nb: (nb[1].latency_ms.median, nb[0])) if ran else None


class DeviceInfo(_M):
    kind: Literal["cuda", "cpu"]
    name: str
    timer: Literal["cuda_events", "cpu_monotonic"]
    note: str = ""


class Report(_M):
    kbot_report: int = REPORT_VERSION
    run_id: str
    definition: str
    solution: str
    solution_hash: str
    # The paired comparison solution of speedup_vs_baseline (a candidate's is today's champion).
    baseline: str | None = None
    baseline_hash: str | None = None
    trust: Literal["candidate", "baseline"] = "candidate"  # baseline: a declared baseline run as the solution
    unavailable: str | None = None  # the solution (a declared baseline) could not run here: why; nothing was measured
    baselines: list[BaselineRun] = Field(default_factory=list)  # the declared baselines measured beside it
    device: DeviceInfo
    environment: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    build: BuildResult | None = None
    findings: list[Finding] = Field(default_factory=list)  # solution-level guard findings
    # Which isolation candidate code had: the sandbox mode, whether every worker was sandboxed, a line
    # for people, and each worker's own record (harness/sandbox.py, harness/runner.py).
    isolation: dict[str, Any] = Field(default_factory=dict)
    workloads: list[WorkloadResult] = Field(default_factory=list)
    # What folding the profile cost and covered (harness/profile/pipeline.py ``profile_report``): the
    # per-candidate budget, seconds spent (static compile, each profiled workload), what was left out.
    profiling: dict[str, Any] | None = None
    started: str
    finished: str | None = None

    # -- derived views -----------------------------------------------------------------------------
    @property
    def all_passed(self) -> bool:
        return bool(self.workloads) and all(w.status is Status.PASSED for w in self.workloads)

    def summary(self) -> dict[str, Any]:
        passed = [w for w in self.workloads if w.status is Status.PASSED]
        sp = [w.speedup_vs_reference for w in passed if w.speedup_vs_reference]
        pr = [w.speedup_vs_baseline.median for w in passed if w.speedup_vs_baseline]
        counts: dict[str, int] = {}
        for w in self.workloads:
            counts[w.status.value] = counts.get(w.status.value, 0) + 1
        best = [(w, best_baseline(w)) for w in passed]
        best_ratios = [b.speedup.median for _, nb in best if nb is not None for b in [nb[1]]]
        best_by: dict[str, int] = {}
        for _, nb in best:
            if nb is not None:
                best_by[nb[0]] = best_by.get(nb[0], 0) + 1
        return {
            "all_passed": self.all_passed,
            "workloads": len(self.workloads),
            "passed": len(passed),
            "statuses": counts,
            # Contest score: mean per-workload speedup, zero if any workload fails.
            "mean_speedup_vs_reference": (sum(sp) / len(sp)) if sp and self.all_passed else 0.0,
            "geomean_speedup_vs_reference": geomean(sp) if sp and self.all_passed else None,
            "geomean_speedup_vs_baseline": geomean(pr) if pr and len(pr) == len(self.workloads) else None,
            "checks": self.check_summary(),
            # Against the fastest declared baseline on each workload (paired), over the workloads that have one.
            "geomean_speedup_vs_best_baseline": geomean(best_ratios) if best_ratios else None,
            "best_baseline_workloads": len(best_ratios),
            "best_baselines": best_by,
            "baselines_could_not_run": {b.name: b.reason for b in self.baselines if b.state != "ran"},
        }

    def check_summary(self) -> dict[str, dict[str, Any]]:
        """Per extra check: on how many workloads it ran and passed, which failed, the worst value."""
        out: dict[str, dict[str, Any]] = {}
        for i, w in enumerate(self.workloads, start=1):
            for name, c in (w.correctness.checks if w.correctness else {}).items():
                s = out.setdefault(name, {"workloads": 0, "passed": 0, "failed": [], "worst": None, "limit": c.limit, "worst_message": "", "why": c.why})
                s["workloads"] += 1
                s["passed"] += 1 if c.ok else 0
                if not c.ok:
                    s["failed"].append(f"w{i}")
                v = math.inf if c.value is None else c.value  # a check that could not measure is the worst
                if s["worst"] is None or v > s["worst"]:
                    s["worst"], s["worst_message"] = v, c.message
        return out

    def to_json(self) -> str:
        """The report as written to report.json (with its summary)."""
        data = self.model_dump(mode="json")
        data["summary"] = self.summary()
        return json.dumps(data, indent=2, allow_nan=True) + "\n"

    def dump(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json())


def load_report(path: str | Path) -> Report:
    data = json.loads(Path(path).read_text())
    data.pop("summary", None)
    return Report.model_validate(data)
