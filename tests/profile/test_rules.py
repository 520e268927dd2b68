"""Every rule, triggered and not triggered, on constructed evidence; and the engine's contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.feedback.engine import RuleError, load_rules, run_rules
from harness.report import FeedbackItem, Roofline


def roof(bound="memory", intrinsic=None, fraction=None, floor_us=100.0, unit="simt", nbytes=1e8, sm_count=132,
         l2_bytes=None, bw_gbs=None):
    intrinsic = intrinsic or (bound if bound != "latency" else "memory")
    ceilings = {"sm_count": sm_count, "l2_bytes": l2_bytes, "copy_bandwidth_gbs": bw_gbs}
    return Roofline(bytes=nbytes, flops=1e9, intensity=1e9 / nbytes, floor_ms=floor_us / 1e3, fraction=fraction,
                    bound=bound, ceilings=ceilings, intrinsic_bound=intrinsic, compute_unit=unit,
                    memory_floor_ms=floor_us / 1e3, compute_floor_ms=0.0)


RULES = {r.name: r for r in load_rules()}
MEM = roof()
COMPUTE_TENSOR = roof("compute", unit="tensor")
LAT = roof("latency", "memory", fraction=0.1, floor_us=2.0)

# name: (roofline, evidence that triggers it, evidence that does not, expected severity when triggered)
CASES = {
    "sol_latency_bound": (MEM, {"sm_throughput_pct": 30, "mem_throughput_pct": 40}, {"sm_throughput_pct": 30, "mem_throughput_pct": 70}, "medium"),
    "sol_memory_limit": (MEM, {"mem_throughput_pct": 85}, {"mem_throughput_pct": 70}, "low"),
    "sol_compute_limit": (MEM, {"sm_throughput_pct": 85}, {"sm_throughput_pct": 50}, "low"),
    "low_issue_rate": (COMPUTE_TENSOR, {"issue_active_pct": 40}, {"issue_active_pct": 70}, "low"),
    "grid_too_small": (MEM, {"grid_size": 4, "sm_count": 132}, {"grid_size": 264, "sm_count": 132}, "critical"),
    "less_than_one_wave": (MEM, {"waves_per_sm": 0.5, "grid_size": 200, "sm_count": 132}, {"waves_per_sm": 2.0, "grid_size": 2000, "sm_count": 132}, "medium"),
    "tail_effect": (MEM, {"waves_per_sm": 1.2}, {"waves_per_sm": 1.8}, "medium"),
    "occupancy_limited_by_registers": (
        MEM,
        {"theoretical_occupancy_pct": 18.75, "occupancy_limiter": "registers", "registers_per_thread": 168, "sm_throughput_pct": 20, "mem_throughput_pct": 30},
        {"theoretical_occupancy_pct": 75, "occupancy_limiter": "registers", "registers_per_thread": 40},
        "high",
    ),
    "occupancy_limited_by_shared_mem": (
        MEM,
        {"theoretical_occupancy_pct": 25, "occupancy_limiter": "shared_mem", "shared_mem_per_block": 180000},
        {"theoretical_occupancy_pct": 25, "occupancy_limiter": "registers", "shared_mem_per_block": 180000},
        "medium",
    ),
    "occupancy_limited_by_block_count": (
        MEM,
        {"theoretical_occupancy_pct": 25, "occupancy_limiter": "blocks", "block_size": 32},
        {"theoretical_occupancy_pct": 100, "occupancy_limiter": "blocks", "block_size": 256},
        "medium",
    ),
    "achieved_occupancy_gap": (
        MEM,
        {"achieved_occupancy_pct": 40, "theoretical_occupancy_pct": 75, "occupancy_gap_pct": 35, "waves_per_sm": 4},
        {"achieved_occupancy_pct": 12, "theoretical_occupancy_pct": 75, "occupancy_gap_pct": 63, "waves_per_sm": 0.01},
        "medium",
    ),
    "stall_long_scoreboard": (
        MEM,
        {"stall_long_scoreboard_pct": 70, "sm_throughput_pct": 10, "mem_throughput_pct": 20},
        {"stall_long_scoreboard_pct": 20},
        "high",
    ),
    "stall_short_scoreboard": (MEM, {"stall_short_scoreboard_pct": 45}, {"stall_short_scoreboard_pct": 20}, "medium"),
    "stall_barrier": (MEM, {"stall_barrier_pct": 45}, {"stall_barrier_pct": 20}, "medium"),
    "stall_lg_throttle": (MEM, {"stall_lg_throttle_pct": 45}, {"stall_lg_throttle_pct": 20}, "medium"),
    "stall_mio_throttle": (MEM, {"stall_mio_throttle_pct": 45}, {"stall_mio_throttle_pct": 20}, "medium"),
    "stall_math_pipe_throttle": (MEM, {"stall_math_pipe_throttle_pct": 45}, {"stall_math_pipe_throttle_pct": 20}, "low"),
    "stall_no_instruction": (MEM, {"stall_no_instruction_pct": 45}, {"stall_no_instruction_pct": 20}, "medium"),
    "stall_wait": (MEM, {"stall_wait_pct": 45}, {"stall_wait_pct": 20}, "low"),
    "uncoalesced_global_loads": (
        MEM,
        {"global_load_efficiency_pct": 12.5, "global_load_sectors_per_request": 32},
        {"global_load_efficiency_pct": 100, "global_load_sectors_per_request": 4},
        "critical",
    ),
    "uncoalesced_global_stores": (
        MEM,
        {"global_store_efficiency_pct": 45, "global_store_sectors_per_request": 9},
        {"global_store_efficiency_pct": 100, "global_store_sectors_per_request": 4},
        "high",
    ),
    "narrow_global_loads": (MEM, {"sass_ldg_narrow_pct": 100, "sass_ldg": 8}, {"sass_ldg_narrow_pct": 0, "sass_ldg": 8}, "medium"),
    "shared_bank_conflicts": (
        MEM,
        {"shared_bank_conflict_pct": 25, "shared_bank_conflicts": 1000},
        {"shared_bank_conflict_pct": 2, "shared_bank_conflicts": 10},
        "medium",
    ),
    "dram_traffic_excess": (MEM, {"dram_bytes": 3.5e8}, {"dram_bytes": 1.1e8}, "high"),
    "l2_hit_rate_low": (MEM, {"l2_hit_rate_pct": 20, "dram_bytes": 2e8}, {"l2_hit_rate_pct": 80, "dram_bytes": 2e8}, "medium"),
    "register_spills": (
        MEM,
        {"local_memory_bytes": 1e6, "global_load_bytes": 1e6, "global_store_bytes": 1e6},
        {"local_memory_bytes": 0, "global_load_bytes": 1e6, "global_store_bytes": 1e6},
        "critical",
    ),
    "register_spills_sass": (MEM, {"sass_stl": 10, "sass_ldl": 12}, {"sass_stl": 0, "sass_ldl": 0}, "critical"),
    "register_spill_instructions": (MEM, {"spill_instructions": 4096.0}, {"spill_instructions": 0.0}, "critical"),
    "register_spills_triton": (MEM, {"triton_spill_bytes": 3432}, {"triton_spill_bytes": 0}, "critical"),
    "tensor_cores_unused": (COMPUTE_TENSOR, {"tensor_pipe_pct": 0.0}, {"tensor_pipe_pct": 60.0}, "critical"),
    "tensor_cores_unused_sass": (
        COMPUTE_TENSOR,
        {"sass_tensor_instructions": 0, "sass_ffma": 64},
        {"sass_tensor_instructions": 16, "sass_ffma": 0},
        "critical",
    ),
    "tensor_cores_underused": (COMPUTE_TENSOR, {"tensor_pipe_pct": 20.0}, {"tensor_pipe_pct": 70.0}, "medium"),
    "faster_than_floor": (roof(fraction=1.3), {}, None, "critical"),
    "near_roofline_floor": (roof(fraction=0.97), {}, None, "info"),
    "roofline_distance": (roof(fraction=0.05), {}, None, "high"),
    "launch_overhead_dominates": (LAT, {}, None, "medium"),
    "many_kernel_launches": (MEM, {"kernels_per_call": 5, "kernel_time_us": 20.0}, {"kernels_per_call": 1, "kernel_time_us": 20.0}, "medium"),
}
# Rules whose "not triggered" case is a different roofline rather than different evidence.
NOT_TRIGGERED_ROOF = {
    "faster_than_floor": roof(fraction=0.5),
    "near_roofline_floor": roof(fraction=0.8),
    "roofline_distance": roof(fraction=0.7),
    "launch_overhead_dominates": roof("latency", "memory", fraction=0.004, floor_us=2.0),  # 500 us: a slow kernel
}


def test_every_rule_has_a_case():
    assert set(RULES) == set(CASES), f"rules without a test case: {set(RULES) - set(CASES)}; stale cases: {set(CASES) - set(RULES)}"
    assert len(RULES) >= 15


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_triggers(name):
    r, ev, _, severity = CASES[name]
    res = run_rules(ev, r, rules=[RULES[name]])
    assert [i.rule for i in res] == [name], res.not_evaluated or res.not_applicable
    item = res[0]
    assert isinstance(item, FeedbackItem)
    assert item.severity == severity
    # Templates were filled with numbers, not left as placeholders or n/a.
    for text in (item.title, item.cause, item.recommendation):
        assert "{" not in text and "n/a" not in text, text
    assert item.evidence, "the item must carry the numbers it is based on"


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_does_not_trigger(name):
    r, _, ev_no, _ = CASES[name]
    if ev_no is None:
        r, ev_no = NOT_TRIGGERED_ROOF[name], {}
    res = run_rules(ev_no, r, rules=[RULES[name]])
    assert list(res) == []
    assert res.evaluated == [name], "the rule must have been evaluated (not skipped) and come out negative"


def test_missing_evidence_is_reported_not_skipped():
    res = run_rules({}, MEM, missing={"ncu": "ncu not found"})
    names = {n.rule: n.reason for n in res.not_evaluated}
    assert "uncoalesced_global_loads" in names
    assert "missing global_load_efficiency_pct" in names["uncoalesced_global_loads"]
    assert "ncu: ncu not found" in names["uncoalesced_global_loads"]
    # Rules that only need the roofline still ran.
    assert "roofline_distance" in names  # no fraction: no measured time
    assert not list(res)


def test_class_filter_lists_not_applicable_rules():
    res = run_rules({"tensor_pipe_pct": 0.0}, MEM)
    assert "tensor_cores_unused" in {n.rule for n in res.not_applicable}
    # The intrinsic class counts too: a latency-bound (by measurement) matmul still gets tensor-core rules.
    lat_matmul = roof("latency", "compute", fraction=0.01, unit="tensor")
    res = run_rules({"tensor_pipe_pct": 0.0}, lat_matmul)
    assert "tensor_cores_unused" in [i.rule for i in res]


def test_no_roofline_runs_every_rule():
    res = run_rules({"grid_size": 4, "sm_count": 132, "tensor_pipe_pct": 0.0}, None)
    assert not res.not_applicable
    assert [i.rule for i in res] == ["grid_too_small"]  # tensor rule needs compute_unit from a roofline
    assert any(n.rule == "tensor_cores_unused" and "compute_unit" in n.reason for n in res.not_evaluated)


def test_sorted_by_severity_then_impact_and_grouped():
    ev = {
        "grid_size": 4,
        "sm_count": 132,
        "sm_throughput_pct": 5,
        "mem_throughput_pct": 8,
        "stall_long_scoreboard_pct": 40,
        "stall_no_instruction_pct": 45,
        "sass_stl": 3,
        "sass_ldl": 3,
        "triton_spill_bytes": 512,
    }
    res = run_rules(ev, roof(fraction=0.3))
    sev = [i.severity for i in res]
    order = ["critical", "high", "medium", "low", "info"]
    assert sev == sorted(sev, key=order.index)
    rules = [i.rule for i in res]
    assert rules[0] in ("grid_too_small", "register_spills_triton")
    # Only one item per group: the spill group keeps the strongest, the others are named on it.
    spills = [i for i in res if i.rule.startswith("register_spills")]
    assert len(spills) == 1 and spills[0].also
    stalls = [i for i in res if i.rule.startswith("stall_")]
    assert len(stalls) == 1


def test_stop_signal():
    res = run_rules({}, roof(fraction=0.97))
    assert res.stop
    assert res[0].rule == "near_roofline_floor" and res[0].stop
    assert not run_rules({}, roof(fraction=0.9)).stop


def _write(tmp_path: Path, text: str) -> Path:
    d = tmp_path / "rules"
    d.mkdir()
    (d / "r.yaml").write_text(text)
    return d


def test_rule_file_errors_are_clear(tmp_path):
    base = "name: r\nrequires: [x]\ntrigger: 'x > 1'\nanalysis: a\nrecommendation: b\nseverity: high\n"
    ok = _write(tmp_path, base)
    assert [r.name for r in load_rules(ok)] == ["r"]
    cases = {
        "unknown keys": base + "colour: red\n",
        "neither in requires, optional nor thresholds": base.replace("x > 1", "x > y"),
        "is not allowed": base.replace("x > 1", 'x.__class__ or __import__("os")'),
        "severity": base.replace("severity: high", "severity: urgent"),
        "missing 'trigger'": base.replace("trigger: 'x > 1'\n", ""),
        "placeholder": base.replace("analysis: a", "analysis: '{x.__class__}'"),
    }
    for i, (msg, text) in enumerate(cases.items()):
        d = tmp_path / f"c{i}"
        d.mkdir()
        (d / "r.yaml").write_text(text)
        with pytest.raises(RuleError, match=msg.replace("(", r"\(").replace(")", r"\)")):
            load_rules(d)


def test_duplicate_rule_names_rejected(tmp_path):
    text = "rules:\n" + "".join("  - {name: r, requires: [x], trigger: 'x > 1', analysis: a, recommendation: b, severity: high}\n" for _ in range(2))
    with pytest.raises(RuleError, match="used in"):
        load_rules(_write(tmp_path, text))


def test_conditional_severity_falls_through_on_missing_evidence():
    # stall_long_scoreboard's first condition needs SOL metrics; without them the rule still fires.
    res = run_rules({"stall_long_scoreboard_pct": 45}, MEM, rules=[RULES["stall_long_scoreboard"]])
    assert res[0].severity == "medium"
    res = run_rules({"stall_long_scoreboard_pct": 45, "sm_throughput_pct": 10, "mem_throughput_pct": 90}, MEM, rules=[RULES["stall_long_scoreboard"]])
    assert res[0].severity == "low"  # at the memory limit, waiting on memory is expected


def test_low_occupancy_of_a_busy_kernel_is_not_high():
    ev = {"theoretical_occupancy_pct": 18.75, "occupancy_limiter": "registers", "registers_per_thread": 168, "sm_throughput_pct": 85, "mem_throughput_pct": 40}
    res = run_rules(ev, COMPUTE_TENSOR, rules=[RULES["occupancy_limited_by_registers"]])
    assert res[0].severity == "medium"


def test_tiny_workloads_are_not_alarmed_about_grid_or_distance():
    tiny = roof("latency", "memory", fraction=0.01, floor_us=0.5)
    res = run_rules({"grid_size": 1, "sm_count": 132}, tiny, rules=[RULES["grid_too_small"], RULES["roofline_distance"]])
    assert {i.rule: i.severity for i in res} == {"grid_too_small": "medium", "roofline_distance": "low"}
    big = roof("latency", "memory", fraction=0.01, floor_us=50)
    res = run_rules({"grid_size": 1, "sm_count": 132}, big, rules=[RULES["grid_too_small"], RULES["roofline_distance"]])
    assert {i.rule: i.severity for i in res} == {"grid_too_small": "critical", "roofline_distance": "high"}


def test_faster_than_floor_tells_l2_reuse_from_the_impossible():
    # 200 MB at 4 TB/s = 50 us floor; a free 60 MB L2 lowers it to 35 us.
    kw = dict(nbytes=2e8, floor_us=50.0, l2_bytes=60e6, bw_gbs=4000.0)
    plausible = run_rules({}, roof(fraction=50 / 45, **kw), rules=[RULES["faster_than_floor"], RULES["near_roofline_floor"]])
    assert {i.rule: i.severity for i in plausible} == {"faster_than_floor": "low", "near_roofline_floor": "info"}
    assert plausible.stop
    impossible = run_rules({}, roof(fraction=50 / 20, **kw), rules=[RULES["faster_than_floor"], RULES["near_roofline_floor"]])
    assert {i.rule: i.severity for i in impossible} == {"faster_than_floor": "critical"}
    assert not impossible.stop
    # Without an L2 size nothing excuses it.
    unknown = run_rules({}, roof(fraction=1.2), rules=[RULES["faster_than_floor"]])
    assert unknown[0].severity == "critical"
