"""The proactive profile plan (roofline class -> rules and ncu sections) and the per-candidate budget."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness.ceilings import documented_ceilings
from harness.feedback.engine import load_rules
from harness.profile import Collected
from harness.profile.ncu import METRICS, SECTIONS, section_metrics
from harness.profile.pipeline import profile_report
from harness.profile.plan import CLASS_SECTIONS, ProfileBudget, plan_for
from harness.profile.triton_module import pointer_dtype_fallback
from harness.report import DeviceInfo, LatencyStats, Report, Roofline, WorkloadResult
from harness.schema import Status, Workload, load_definition

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ncu" / "definitions"
H200 = documented_ceilings("NVIDIA H200")


def roof(bound: str, intrinsic: str | None = None) -> Roofline:
    extra = {"intrinsic_bound": intrinsic} if intrinsic else {}
    return Roofline.model_validate({"bytes": 1.0, "flops": 1.0, "intensity": 1.0, "floor_ms": 0.01, "bound": bound, **extra})


def test_sections_partition_the_curated_metrics():
    assert sorted(section_metrics(SECTIONS)) == sorted(METRICS) and len(set(METRICS)) == len(METRICS)
    with pytest.raises(ValueError, match="unknown ncu section"):
        section_metrics(["speed_of_light", "nope"])


def test_the_roofline_class_picks_sections_and_rules():
    rules = load_rules()
    mem = plan_for(roof("memory"), rules)
    assert mem.classes == ("memory",) and set(mem.sections) == set(CLASS_SECTIONS["memory"])
    assert "pipes" not in mem.sections and "global_access" in mem.sections
    assert set(mem.metrics) == set(section_metrics(mem.sections)) and len(mem.metrics) < len(METRICS)
    comp = plan_for(roof("compute"), rules)
    assert "pipes" in comp.sections and "global_access" not in comp.sections
    # the compute-only rules (tensor cores, math pipes) are in the compute plan, not in the memory plan
    only_compute = [r.name for r in rules if set(r.applies_to) == {"compute"}]
    assert only_compute and set(only_compute) <= set(comp.rules) and not set(only_compute) & set(mem.rules)
    memory_rules = [r.name for r in rules if "memory" in r.applies_to]
    assert memory_rules and set(memory_rules) <= set(mem.rules) and not set(memory_rules) & set(comp.rules)
    both = plan_for(roof("latency", "memory"), rules)  # a small workload of a bandwidth-bound op
    assert both.classes == ("latency", "memory") and set(both.sections) == set(CLASS_SECTIONS["latency"]) | set(CLASS_SECTIONS["memory"])
    everything = plan_for(None, rules)
    assert everything.classes == () and everything.sections == tuple(SECTIONS) and len(everything.rules) == len(rules)


def test_budget_lets_the_first_run_and_stops_when_the_mean_cost_does_not_fit():
    b = ProfileBudget(10.0, started=time.monotonic() - 4.0)
    assert b.allows_another()  # nothing measured yet: the first always runs
    b.workload_s["a"] = 4.0
    assert b.allows_another() is True  # 4 spent + 4 expected <= 10
    b.started -= 3.0  # 7 s spent
    assert b.allows_another() is False
    assert ProfileBudget(None).allows_another()
    rec = b.record()
    assert rec["budget_s"] == 10.0 and rec["profiled_s"] == {"a": 4.0} and rec["spent_s"] >= 7.0
    for bad in (0, -1.0):
        with pytest.raises(ValueError, match="positive seconds"):
            ProfileBudget(bad)


def _report(sizes):
    lat = LatencyStats(median=1.0, mean=1.0, ci95=(1.0, 1.0), stdev=0.0, sem=0.0, n=3, min=1.0, max=1.0)
    return Report(run_id="r", definition="kbot_vector_add_f32", solution="s", solution_hash="h",
                  device=DeviceInfo(kind="cuda", name="NVIDIA H200", timer="cuda_events"), started="now",
                  workloads=[WorkloadResult(uuid=f"w{n}", axes={"N": n}, status=Status.PASSED, latency_ms=lat) for n in sizes])


def test_profile_report_keeps_to_the_budget_and_records_the_cost(tmp_path, monkeypatch):
    import harness.profile.pipeline as pl

    calls = []

    def fake_profile(solution, definition, w, wdir, **kw):
        calls.append((w.axes["N"], kw["metrics"]))
        time.sleep(0.05)
        return [Collected(source="ncu", evidence={"grid_size": 4, "sm_count": 132})], {}

    monkeypatch.setattr(pl, "profile_workload", fake_profile)
    d = load_definition(FIX / "kbot_vector_add_f32.json")
    sizes = [1 << k for k in range(10, 20)]
    report = _report(sizes)
    wl = [Workload(uuid=f"w{n}", axes={"N": n}, inputs={}) for n in sizes]
    rec = profile_report(report, tmp_path, d, None, wl, ceilings=H200, max_profiled=3, budget_s=0.06)
    # the largest first (it dominates); its 0.05 s leave no room for a second one within 0.06 s
    assert [n for n, _ in calls] == [sizes[-1]]
    assert rec is report.profiling and rec["profiled"] == [f"w{sizes[-1]}"] and len(rec["skipped_for_budget"]) == 2
    assert rec["profiled_s"][f"w{sizes[-1]}"] >= 0.05 and rec["spent_s"] >= 0.05 and rec["budget_s"] == 0.06
    skipped = {w.uuid: w for w in report.workloads}[rec["skipped_for_budget"][0]]
    assert "budget of 0.06 s was spent" in skipped.profile["missing"]["ncu"]
    # ncu was asked for the sections of the workload's class, not the whole list
    big = {w.uuid: w for w in report.workloads}[f"w{sizes[-1]}"]
    assert set(calls[0][1]) == set(section_metrics(big.profile["plan"]["sections"]))
    assert rec["items"] == sum(len(w.feedback) for w in report.workloads) and rec["items"] > 0


def test_pointer_dtype_fallback_only_with_one_dtype():
    import triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, w_ptr, out, n, BLOCK: tl.constexpr):
        pass

    assert pointer_dtype_fallback(k, {"hidden_states": "bfloat16", "weight": "bfloat16"}) == {"x_ptr": "*bf16", "w_ptr": "*bf16"}
    assert pointer_dtype_fallback(k, {"x": "bfloat16", "scale": "float32"}) == {}
    assert pointer_dtype_fallback(k, {"x": "float32", "w": "float32"}) == {}  # both names match a tensor: nothing to guess


def test_static_evidence_of_the_kernel_that_dominates():
    from harness.profile.pipeline import dominant_static

    big = {"triton_kernel": "big", "triton_registers": 200, "sass_instructions": 900}
    small = {"triton_kernel": "hot", "triton_registers": 40, "sass_instructions": 100}
    static = [Collected(source="triton", evidence=big, raw={"kernels": {"big": {"evidence": big}, "hot": {"evidence": small}}})]
    [hot] = dominant_static(static, "hot")  # ncu found "hot" taking the time: its statistics, not the largest kernel's
    assert hot.evidence == small and hot.raw["chosen_for"] == "hot"
    assert dominant_static(static, "big") == static and dominant_static(static, None) == static
    assert dominant_static(static, "a_library_kernel") == static and dominant_static([], "hot") == []
