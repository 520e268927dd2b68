"""The proactive profile plan (roofline class -> rules and ncu sections) and the per-candidate budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.ceilings import documented_ceilings
from harness.feedback.engine import load_rules
from harness.profile import Collected
from harness.profile.ncu import METRICS, SECTIONS, section_metrics
from harness.profile.pipeline import profile_report
from harness.profile.plan import CLASS_SECTIONS, OVERRUN_S, RESERVE_S, ProfileBudget, StepCosts, plan_for
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


class FakeClock:
    def __init__(self, t: float = 100.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_a_step_gets_what_the_budget_has_left_as_its_timeout():
    clock = FakeClock()
    b = ProfileBudget(20.0, clock=clock)
    g = b.grant("static", cap_s=300)
    assert g.ok and g.timeout_s == pytest.approx(20.0 - RESERVE_S) and g.by_budget  # nothing known yet: it may try
    clock.t += 3.0
    assert b.finish(g) == pytest.approx(3.0)
    g = b.grant("ncu", "w1", cap_s=5.0)  # its own cap is smaller than what is left
    assert g.ok and g.timeout_s == 5.0 and not g.by_budget
    clock.t += 5.0
    b.finish(g, stopped=True)
    assert "did not finish in 5.0 s" in b.stopped_reason(g)
    g = b.grant("sass", "w1", cap_s=120)
    assert g.timeout_s == pytest.approx(20.0 - 8.0 - RESERVE_S)
    clock.t += 11.0
    b.finish(g, stopped=True)
    assert "stopped after 11.8 s: all the profiling budget of 20 s had left" in b.stopped_reason(g)
    # 19 s spent: under MIN_STEP_S left, so nothing starts; the refusal names the evidence it costs
    g = b.grant("energy", "w1", cap_s=600)
    assert not g.ok and g.timeout_s is None and "budget of 20 s was spent" in g.refused
    assert b.left_out == [{"step": "energy", "workload": "w1", "evidence": "nvml", "why": g.refused}]
    with pytest.raises(ValueError, match="nothing ran"):
        b.finish(g)
    rec = b.record()
    assert rec["spent_s"] == pytest.approx(19.0) and rec["within_budget"] and rec["tolerance_s"] == OVERRUN_S
    assert rec["static_s"] == pytest.approx(3.0) and rec["profiled_s"] == {"w1": pytest.approx(16.0)}
    assert [s["outcome"] for s in rec["steps"]] == ["done", "stopped at the budget", "stopped at the budget"]
    clock.t += 1.0 + OVERRUN_S + 0.5  # 21.5 s: past the budget and its tolerance
    assert b.record()["within_budget"] is False  # the record says so when the bound did not hold
    with pytest.raises(ValueError, match="unknown profiling step"):
        b.grant("nsys")
    for bad in (0, -1.0):
        with pytest.raises(ValueError, match="positive seconds"):
            ProfileBudget(bad)


def test_a_step_is_not_started_when_what_it_cost_before_does_not_fit():
    clock = FakeClock()
    costs = StepCosts()
    first = ProfileBudget(30.0, costs=costs, clock=clock)
    g = first.grant("ncu", "big", cap_s=600)
    clock.t += 12.0
    first.finish(g)
    g = first.grant("ncu", "small", cap_s=600)
    assert g.ok  # 12 s expected, 17.75 s left
    clock.t += 14.0
    first.finish(g)
    assert costs.expected("ncu") == pytest.approx(13.0)
    # The next candidate of the same evaluator starts with that knowledge: 13 s expected, 12 s budget.
    second = ProfileBudget(12.0, costs=costs, clock=clock)
    g = second.grant("ncu", "big", cap_s=600)
    assert not g.ok and "ncu took 13.0 s on earlier runs" in g.refused and "11.8 s left" in g.refused
    assert second.record()["skipped_for_budget"] == ["big"] and second.record()["spent_s"] == 0.0
    # a run stopped at its timeout is a lower bound: it needed more than that
    costs.add("energy", 4.0, stopped=True)
    costs.add("energy", 2.0)
    assert costs.expected("energy") == 4.0 and costs.expected("sass") is None
    unlimited = ProfileBudget(None, costs=costs, clock=clock)
    g = unlimited.grant("ncu", "big", cap_s=600)
    assert g.ok and g.timeout_s == 600 and unlimited.record()["within_budget"]


def test_a_step_stopped_at_its_timeout_is_not_restarted_with_about_as_much():
    """ncu stopped after 2.7 s of a 3 s budget: the next candidate's 3 s budget leaves about as much
    (a little more when its preamble was quicker), so ncu would only be stopped again; with a second
    more than it had, it may try."""
    clock = FakeClock()
    costs = StepCosts()
    first = ProfileBudget(3.0, costs=costs, clock=clock)
    clock.t += 0.05
    g = first.grant("ncu", "w", cap_s=600)
    assert g.ok and g.timeout_s == pytest.approx(2.7)
    clock.t += 2.7
    first.finish(g, stopped=True)
    second = ProfileBudget(3.0, costs=costs, clock=clock)  # this preamble is quicker: 2.75 s left > 2.7
    g = second.grant("ncu", "w", cap_s=600)
    assert not g.ok and "took 2.7 s on earlier runs without finishing" in g.refused
    assert second.record()["skipped_for_budget"] == ["w"]
    roomier = ProfileBudget(4.5, costs=costs, clock=clock)  # 4.25 s left: more than 2.7 + MIN_STEP_S
    assert roomier.grant("ncu", "w", cap_s=600).ok
    # another workload's ncu is not judged by the stopped one (the largest workload's ncu costs the most),
    # even when this candidate's preamble was slower
    slower = ProfileBudget(3.0, costs=costs, clock=clock)
    clock.t += 0.2
    assert slower.grant("ncu", "small", cap_s=600).ok
    # a step stopped at its own cap (not the budget's end) is stopped there again: not restarted with that cap
    roomy = ProfileBudget(30.0, costs=costs, clock=clock)
    g = roomy.grant("sass", "w", cap_s=2.0)
    assert g.ok and g.timeout_s == 2.0
    clock.t += 2.0
    roomy.finish(g, stopped=True)
    again = ProfileBudget(30.0, costs=costs, clock=clock).grant("sass", "w", cap_s=2.0)
    assert not again.ok and "without finishing" in again.refused


def _report(sizes):
    lat = LatencyStats(median=1.0, mean=1.0, ci95=(1.0, 1.0), stdev=0.0, sem=0.0, n=3, min=1.0, max=1.0)
    return Report(run_id="r", definition="kbot_vector_add_f32", solution="s", solution_hash="h",
                  device=DeviceInfo(kind="cuda", name="NVIDIA H200", timer="cuda_events"), started="now",
                  workloads=[WorkloadResult(uuid=f"w{n}", axes={"N": n}, status=Status.PASSED, latency_ms=lat) for n in sizes])


def test_profile_report_keeps_to_the_budget_and_records_the_cost(tmp_path, monkeypatch):
    import harness.profile.pipeline as pl

    clock = FakeClock()
    calls = []

    def fake_profile(solution, definition, w, wdir, *, budget, **kw):  # ncu taking 5 s a run, as the steps ask
        g = budget.grant("ncu", w.uuid, cap_s=600)
        if not g.ok:
            return [Collected.unavailable("ncu", g.refused)], {}
        calls.append((w.axes["N"], kw["metrics"]))
        clock.t += 5.0
        budget.finish(g)
        return [Collected(source="ncu", evidence={"grid_size": 4, "sm_count": 132})], {}

    monkeypatch.setattr(pl, "profile_workload", fake_profile)
    d = load_definition(FIX / "kbot_vector_add_f32.json")
    sizes = [1 << k for k in range(10, 20)]
    report = _report(sizes)
    wl = [Workload(uuid=f"w{n}", axes={"N": n}, inputs={}) for n in sizes]
    rec = profile_report(report, tmp_path, d, None, wl, ceilings=H200, max_profiled=3, budget=ProfileBudget(12.0, clock=clock))
    # the largest first (it dominates); two 5 s runs fit in 12 s, the third would not
    assert [n for n, _ in calls] == [sizes[-1], sizes[4]]
    assert rec is report.profiling and rec["profiled"] == [f"w{sizes[-1]}", f"w{sizes[4]}"]
    assert rec["skipped_for_budget"] == [f"w{sizes[0]}"] and rec["within_budget"]
    assert rec["profiled_s"] == {f"w{sizes[-1]}": 5.0, f"w{sizes[4]}": 5.0} and rec["spent_s"] == 10.0 and rec["budget_s"] == 12.0
    assert rec["left_out"][0]["evidence"] == "ncu" and "ncu took 5.0 s on earlier runs" in rec["left_out"][0]["why"]
    skipped = {w.uuid: w for w in report.workloads}[f"w{sizes[0]}"]
    assert "ncu took 5.0 s on earlier runs" in skipped.profile["missing"]["ncu"]
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
