"""What to profile for a workload, chosen from its roofline class before any profiler runs (proactive).

The roofline says where a workload should be bound (``memory``, ``compute`` or ``latency``); that class
picks the micro-profiling rules (the rules of ``skills/profiling/rules/`` whose ``applies_to`` names it)
and the ncu sections whose metrics those rules read (``harness.profile.ncu.SECTIONS``). A workload
without a roofline (no ceilings for the device) gets every section and every rule.

The per-candidate budget (:class:`ProfileBudget`) bounds what one evaluation spends on profiling: the
ahead-of-time compile statistics and each profiled workload (ncu, SASS, NVML) are timed, and a workload
is profiled only while the time spent plus the mean cost of one profiled workload so far fits the
budget. What was spent and what the budget left out are recorded in the report (``Report.profiling``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..feedback.engine import Rule, bottleneck_classes, load_rules
from ..report import Roofline
from .ncu import SECTIONS, section_metrics

__all__ = ["CLASS_SECTIONS", "ProfileBudget", "ProfilePlan", "plan_for"]

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


@dataclass
class ProfileBudget:
    """Wall-clock seconds one candidate may spend on profiling, and how they were spent."""

    seconds: float | None  # None: no limit
    started: float = field(default_factory=time.monotonic)
    static_s: float = 0.0
    workload_s: dict[str, float] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.seconds is not None and not self.seconds > 0:
            raise ValueError(f"a profiling budget must be positive seconds (or None for no limit), not {self.seconds!r}")

    @property
    def spent_s(self) -> float:
        return time.monotonic() - self.started

    def allows_another(self) -> bool:
        """True when one more profiled workload is expected to fit: the first always runs (its cost is
        the estimate), later ones when spent + the mean cost so far stays within the budget."""
        if self.seconds is None or not self.workload_s:
            return True
        mean = sum(self.workload_s.values()) / len(self.workload_s)
        return self.spent_s + mean <= self.seconds

    def record(self) -> dict[str, Any]:
        return {"budget_s": self.seconds, "spent_s": round(self.spent_s, 3), "static_s": round(self.static_s, 3),
                "profiled_s": {k: round(v, 3) for k, v in self.workload_s.items()},
                "skipped_for_budget": list(self.skipped)}
