"""What to profile for a workload, chosen from its roofline class before any profiler runs (proactive).

The roofline says where a workload should be bound (``memory``, ``compute`` or ``latency``); that class
picks the micro-profiling rules (the rules of ``skills/profiling/rules/`` whose ``applies_to`` names it)
and the ncu sections whose metrics those rules read (``harness.profile.ncu.SECTIONS``). A workload
without a roofline (no ceilings for the device) gets every section and every rule.

The per-candidate budget (:class:`ProfileBudget`) bounds the wall time one evaluation spends on
profiling, from the ahead-of-time compile to the last file written: every step (``STEPS``: the static
compile, then per profiled workload ncu, SASS and NVML energy) asks the budget for a grant before it
starts. A step is not started when less than ``MIN_STEP_S`` is left, when what it cost before
(:class:`StepCosts`: this candidate's earlier steps of its kind and, through an evaluator that keeps
one, earlier candidates') is more than is left, or when a run of its kind on the same workload was
stopped at its timeout and less than ``MIN_STEP_S`` more than that run had is left (it would be
stopped again); a step that starts gets what is left (less
``RESERVE_S``, kept for the analysis after the last step) as the timeout of its subprocesses, which
are stopped there, their whole process group killed. So the time spent stays within the budget plus
``OVERRUN_S`` (killing and reaping a stopped step, and the rule engine's pass). What was spent, each
step's cost and outcome, and every piece of evidence the budget left out, with why, are recorded in the
report (``Report.profiling``) and in the ``missing`` reasons of the workloads' profiles.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..feedback.engine import Rule, bottleneck_classes, load_rules
from ..report import Roofline
from .ncu import SECTIONS, section_metrics

__all__ = ["CLASS_SECTIONS", "MIN_STEP_S", "OVERRUN_S", "RESERVE_S", "STEPS", "Grant", "ProfileBudget", "ProfilePlan", "StepCosts", "plan_for"]

# The ncu sections each class of workload calls for. Speed of light and the launch shape always (every
# rule family starts from them); then what explains that class: memory-bound kernels need the global
# access pattern, the caches and spills (extra traffic); compute-bound ones the pipes, occupancy, stalls
# and shared memory; latency-bound (tiny) ones the grid/occupancy and stalls (too little parallelism).
CLASS_SECTIONS: dict[str, tuple[str, ...]] = {
    "memory": ("speed_of_light", "launch", "occupancy", "global_access", "caches", "local_memory", "warp_stalls"),
    "compute": ("speed_of_light", "launch", "occupancy", "warp_stalls", "pipes", "shared_memory", "local_memory"),
    "latency": ("speed_of_light", "launch", "occupancy", "warp_stalls"),
}
assert all(set(v) <= set(SECTIONS) for v in CLASS_SECTIONS.values())


@dataclass(frozen=True)
class ProfilePlan:
    classes: tuple[str, ...]  # empty: no roofline, so no class (everything is asked for)
    sections: tuple[str, ...]
    metrics: tuple[str, ...]
    rules: tuple[str, ...]  # the names of the rules that apply to the classes

    def to_dict(self) -> dict[str, Any]:
        return {"classes": list(self.classes), "sections": list(self.sections), "metrics": len(self.metrics),
                "rules": list(self.rules)}


def plan_for(roofline: Roofline | None, rules: list[Rule] | None = None) -> ProfilePlan:
    """The sections, metrics and rules for a workload of this roofline (see the module docstring)."""
    rules = load_rules() if rules is None else rules
    classes = bottleneck_classes(roofline)
    if not classes:
        return ProfilePlan((), tuple(SECTIONS), section_metrics(SECTIONS), tuple(r.name for r in rules))
    sections = [s for c in sorted(classes) for s in CLASS_SECTIONS.get(c, tuple(SECTIONS))]
    sections = list(dict.fromkeys(s for s in SECTIONS if s in sections))  # the curated order, once each
    return ProfilePlan(tuple(sorted(classes)), tuple(sections), section_metrics(sections),
                       tuple(r.name for r in rules if r.applies(classes)))


# The steps of profiling a candidate and the evidence (``Collected.source``) each one produces.
STEPS: dict[str, str] = {"static": "triton", "ncu": "ncu", "sass": "sass", "energy": "nvml"}
# What the budget may be exceeded by: a step stopped at its timeout has its process group killed and
# reaped (tens of ms; a CUDA context's teardown can take longer), then the rule engine runs over every
# workload and writes its files (well under a second for tens of workloads).
OVERRUN_S = 1.0
RESERVE_S = 0.25  # kept back from every step's timeout for the analysis after the last step
MIN_STEP_S = 1.0  # no step is started with less left: a Python child alone takes longer to start


@dataclass
class StepCosts:
    """Seconds the profiling steps took, by step. One per campaign evaluator, so the second candidate
    knows what ncu cost on the first; a fresh one per ``kbot eval``."""

    done: dict[str, list[float]] = field(default_factory=dict)  # steps that finished
    # the longest run stopped at its timeout (it needed more), per (step, workload)
    stopped: dict[tuple[str, str | None], float] = field(default_factory=dict)

    def add(self, step: str, seconds: float, *, stopped: bool = False, workload: str | None = None) -> None:
        if stopped:
            k = (step, workload)
            self.stopped[k] = max(self.stopped.get(k, 0.0), float(seconds))
        else:
            self.done.setdefault(step, []).append(float(seconds))

    def expected(self, step: str, workload: str | None = None) -> float | None:
        """The mean of the finished runs, raised to the longest stopped run on ``workload`` (a run stopped
        after t seconds needed more than t there; a stop on another workload, the largest is profiled
        first, says nothing of this one); None before any run of the step."""
        done = self.done.get(step) or []
        if not done and not any(s == step for s, _ in self.stopped):
            return None
        return max(sum(done) / len(done) if done else 0.0, self.needed_more_than(step, workload) or 0.0)

    def needed_more_than(self, step: str, workload: str | None = None) -> float | None:
        """The longest run of ``step`` on ``workload`` that was stopped at its timeout (it needed more), or
        None. Per workload: ncu stopped on the largest workload says nothing of a smaller one."""
        return self.stopped.get((step, workload))


@dataclass
class Grant:
    """The budget's answer to a step about to start: the timeout its subprocesses get (None: no limit),
    or why it must not start (``refused``)."""

    step: str
    workload: str | None
    timeout_s: float | None
    started: float
    refused: str | None = None
    by_budget: bool = False  # the timeout is what the budget had left (not the step's own cap)

    @property
    def ok(self) -> bool:
        return self.refused is None


@dataclass
class ProfileBudget:
    """Wall-clock seconds one candidate may spend on profiling, and how they were spent (module docstring)."""

    seconds: float | None  # None: no limit
    costs: StepCosts = field(default_factory=StepCosts)
    clock: Callable[[], float] = time.monotonic
    started: float | None = None  # the clock's reading when profiling began (default: now)
    steps: list[dict[str, Any]] = field(default_factory=list)  # every step that ran: cost and outcome
    left_out: list[dict[str, Any]] = field(default_factory=list)  # steps not run for the budget, and why

    def __post_init__(self) -> None:
        if self.seconds is not None and not self.seconds > 0:
            raise ValueError(f"a profiling budget must be positive seconds (or None for no limit), not {self.seconds!r}")
        if self.started is None:
            self.started = self.clock()

    @property
    def spent_s(self) -> float:
        assert self.started is not None
        return self.clock() - self.started

    def remaining_s(self) -> float | None:
        return None if self.seconds is None else self.seconds - self.spent_s

    def grant(self, step: str, workload: str | None = None, *, cap_s: float | None = None) -> Grant:
        """Whether ``step`` (of ``STEPS``) may start now, and with which timeout: what is left less
        ``RESERVE_S``, no more than ``cap_s``. A refusal is recorded in ``left_out``."""
        if step not in STEPS:
            raise ValueError(f"unknown profiling step {step!r}; known: {sorted(STEPS)}")
        now = self.clock()
        if self.seconds is None:
            return Grant(step, workload, cap_s, now)
        left = self.seconds - (now - self.started) - RESERVE_S  # type: ignore[operator]
        expected = self.costs.expected(step, workload)
        why = None
        if left < MIN_STEP_S:
            why = (f"not run: the profiling budget of {self.seconds:g} s was spent "
                   f"({now - self.started:.1f} s used, {max(left, 0.0):.1f} s left)")  # type: ignore[operator]
        elif (cut := self.costs.needed_more_than(step, workload)) is not None and cut + MIN_STEP_S > min(left, cap_s or left):
            # it was stopped after `cut` s without finishing: starting it with about as much again
            # (the same budget, a few ms of jitter more, or the same cap) would only be stopped again
            why = (f"not run: {step} took {cut:.1f} s on earlier runs without finishing (stopped at its "
                   f"timeout) and the profiling budget of {self.seconds:g} s has {left:.1f} s left")
        elif expected is not None and expected > left:
            why = (f"not run: {step} took {expected:.1f} s on earlier runs and the profiling budget of "
                   f"{self.seconds:g} s has {left:.1f} s left")
        if why is not None:
            self.left_out.append({"step": step, "workload": workload, "evidence": STEPS[step], "why": why})
            return Grant(step, workload, None, now, refused=why)
        if cap_s is not None and cap_s < left:
            return Grant(step, workload, cap_s, now)
        return Grant(step, workload, left, now, by_budget=True)

    def finish(self, grant: Grant, *, stopped: bool = False, outcome: str | None = None) -> float:
        """Record what a granted step cost; ``stopped``: it ran into its timeout. Returns the seconds."""
        if not grant.ok:
            raise ValueError(f"{grant.step} was refused ({grant.refused}): nothing ran to finish")
        seconds = self.clock() - grant.started
        self.costs.add(grant.step, seconds, stopped=stopped, workload=grant.workload)
        self.steps.append({"step": grant.step, "workload": grant.workload, "s": round(seconds, 3),
                           "outcome": "stopped at the budget" if stopped else (outcome or "done")})
        return seconds

    def stopped_reason(self, grant: Grant) -> str:
        """The ``missing`` reason of evidence whose step ran into its timeout."""
        limit = f"{grant.timeout_s:.1f} s" if grant.timeout_s is not None else "its limit"
        if grant.by_budget:
            return f"stopped after {limit}: all the profiling budget of {self.seconds:g} s had left"
        return f"did not finish in {limit}"

    def workload_s(self) -> dict[str, float]:
        """Seconds spent per profiled workload (its ncu, SASS and energy steps together)."""
        out: dict[str, float] = {}
        for s in self.steps:
            if s["workload"] is not None:
                out[s["workload"]] = round(out.get(s["workload"], 0.0) + s["s"], 3)
        return out

    def record(self) -> dict[str, Any]:
        spent = self.spent_s
        static = sum(s["s"] for s in self.steps if s["step"] == "static")
        return {"budget_s": self.seconds, "spent_s": round(spent, 3), "tolerance_s": OVERRUN_S,
                "within_budget": self.seconds is None or spent <= self.seconds + OVERRUN_S,
                "static_s": round(static, 3), "profiled_s": self.workload_s(), "steps": list(self.steps),
                "left_out": list(self.left_out),
                "skipped_for_budget": list(dict.fromkeys(x["workload"] for x in self.left_out
                                                         if x["step"] == "ncu" and x["workload"] is not None))}
