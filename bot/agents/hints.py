"""Turn profiler feedback items into directions for tunables.

The rule engine's items are prose plus evidence; the offline agent needs "move knobs of role R up or
down". Each rule below matches an item by the engine's rule name (skills/profiling/rules/*.yaml) or,
for items from elsewhere, by words (rule id, title, cause, recommendation, evidence keys); an engine
rule no hint names votes for nothing (its words would match loosely: a roofline distance titled
"latency-bound" is no memory-latency stall, "narrower dtypes" no narrow load), and votes
for a direction per role, weighted by the item's severity. The controller then tries the
moves with the most votes first. Matching words rather than exact rule ids keeps this independent of the
rule engine's naming, at the price of a few loose matches (votes, never vetoes: every move stays
reachable).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from harness.report import FeedbackItem

SEVERITY_WEIGHT = {"critical": 4.0, "high": 3.0, "medium": 2.0, "low": 1.0, "info": 0.5}


@dataclass(frozen=True)
class HintRule:
    name: str
    rules: tuple[str, ...]  # rule names of skills/profiling/rules that mean this (exact match)
    pattern: re.Pattern[str]  # words that mean this in items from any other source
    votes: tuple[tuple[str, int], ...]  # (role, +1 = larger / -1 = smaller)
    why: str


def _r(p: str) -> re.Pattern[str]:
    return re.compile(p, re.IGNORECASE)


RULES: tuple[HintRule, ...] = (
    HintRule(
        "register_pressure",
        ("occupancy_limited_by_registers", "register_spills", "register_spills_sass", "register_spills_triton",
         "register_spill_instructions"),
        _r(r"spill|local[ _-]?memory|register[s_ -]*(limit|pressure|per[ _]thread|bound)|occupancy_limit_registers"),
        # More warps share a program's tile, so each thread holds fewer values (what the rules recommend).
        (("warps", +1), ("block", -1), ("stages", -1)),
        "registers limit occupancy or spill: less work per thread (smaller tiles, more warps)",
    ),
    HintRule(
        "shared_memory_limit",
        ("occupancy_limited_by_shared_mem",),
        _r(r"shared[ _-]?mem\w*[ _-]*(limit|bound)|occupancy_limit_shared"),
        (("stages", -1), ("block", -1)),
        "shared memory limits occupancy: fewer pipeline stages or smaller tiles",
    ),
    HintRule(
        "grid_too_small",
        ("grid_too_small", "less_than_one_wave", "tail_effect", "stall_no_instruction"),
        _r(r"grid (is )?too small|waves?[ _]per|few(er)? (programs|blocks|ctas)|no_instruction|under-?fill|tail effect|idle sms?"),
        (("block", -1), ("split", +1)),
        "too few programs for 132 SMs: smaller tiles or more splits give more programs",
    ),
    HintRule(
        "narrow_access",
        ("narrow_global_loads", "uncoalesced_global_loads", "uncoalesced_global_stores", "stall_lg_throttle", "stall_mio_throttle"),
        _r(r"narrow|uncoalesc|coalesc|vector(ized)? (load|store|access)|LDG\.E\b|sector[s]? per request|128-?bit"),
        (("vector", +1), ("block", +1)),
        "narrow or uncoalesced memory access: wider/vector loads",
    ),
    HintRule(
        "memory_latency",
        ("stall_long_scoreboard", "sol_latency_bound"),
        _r(r"long[_ ]scoreboard|memory latency|latency[- ]bound"),
        (("stages", +1), ("warps", +1)),
        "waiting on memory: more in-flight loads (stages) or more warps to hide latency",
    ),
    HintRule(
        "low_occupancy",
        ("achieved_occupancy_gap", "occupancy_limited_by_block_count"),
        _r(r"(low|achieved) occupancy|warps? active|occupancy gap"),
        (("warps", +1),),
        "few active warps: more warps per program",
    ),
    HintRule(
        "tensor_cores_idle",
        ("tensor_cores_unused", "tensor_cores_unused_sass", "tensor_cores_underused"),
        _r(r"tensor (pipe|core)s? .*(idle|0%|unused|not used)|not on tensor cores"),
        (("block", +1), ("stages", +1)),
        "matmul not feeding tensor cores: larger tiles, deeper pipeline",
    ),
    HintRule(
        "barrier_stall",
        ("stall_barrier",),
        _r(r"barrier"),
        (("warps", -1),),
        "barrier stalls: fewer warps per program to synchronise",
    ),
)


def votes(items: list[FeedbackItem]) -> dict[str, float]:
    """Signed score per role: > 0 means try larger values first, < 0 smaller ones."""
    score: dict[str, float] = {}
    for it in items:
        text = " ".join(
            [it.rule, it.title, it.cause, it.recommendation, " ".join(map(str, it.evidence.keys())),
             " ".join(str(v) for v in it.evidence.values() if isinstance(v, str))]
        )
        w = SEVERITY_WEIGHT.get(it.severity, 1.0)
        for rule in matching(it, text):
            for role, d in rule.votes:
                score[role] = score.get(role, 0.0) + w * d
    return score


def explain(items: list[FeedbackItem]) -> list[str]:
    """The hint rules that fired, for the proposal's rationale."""
    out = []
    for it in items:
        text = " ".join([it.rule, it.title, it.cause, it.recommendation])
        for rule in matching(it, text):
            if rule.why not in out:
                out.append(rule.why)
    return out


@functools.lru_cache(maxsize=1)
def engine_rule_names() -> frozenset[str]:
    """The names of the rule engine's rules (skills/profiling/rules)."""
    from harness.feedback.engine import load_rules

    return frozenset(r.name for r in load_rules())


def matching(item: FeedbackItem, text: str) -> list[HintRule]:
    """Hint rules for an item: by the engine's rule name when it is one we know; none for another rule of
    the engine (its meaning is known and says nothing about a knob: "At 3% of the roofline
    (latency-bound)" is not a memory-latency stall); by its words for items from elsewhere."""
    exact = [r for r in RULES if item.rule in r.rules]
    if exact or item.rule in engine_rule_names():
        return exact
    return [r for r in RULES if r.pattern.search(text)]
