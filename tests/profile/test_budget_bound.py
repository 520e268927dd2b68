"""The per-candidate profiling budget is a bound on wall time, against a fake `ncu` that never finishes:
the profiled run is stopped at what the budget has left (its whole process group: the target it started
too), the steps after it are not started, and each piece of evidence left out says why. On the H200
(docs/measurements/h200-2026-12-02/03-campaign.log) a 20 s budget took 25.5-28.0 s per candidate: the
first workload always ran, ncu and the energy run had fixed 600 s timeouts and the static compile was
outside the budget."""

from __future__ import annotations

import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import harness.profile.pipeline as pl
from harness.ceilings import documented_ceilings
from harness.profile import ncu as ncu_mod
from harness.profile.ncu import run_ncu
from harness.profile.pipeline import profile_report
from harness.profile.plan import OVERRUN_S, ProfileBudget
from harness.report import DeviceInfo, LatencyStats, Report, WorkloadResult
from harness.schema import Status, Workload, load_definition, parse_solution

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ncu" / "definitions"
H200 = documented_ceilings("NVIDIA H200")

# ncu's start-up, then a profiled target (its child, as ncu's is) that outlives any budget.
FAKE_NCU = r'''#!{python}
import os, subprocess, sys, time
if "--query-metrics" in sys.argv:
    sys.exit(0)
target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
with open({pids!r}, "a") as f:
    f.write(f"{{os.getpid()}} {{target.pid}}\n")
time.sleep(300)
'''

SOLUTION = {
    "name": "torch_add", "definition": "kbot_vector_add_f32", "author": "test",
    "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run",
             "destination_passing_style": True},
    "sources": [{"path": "main.py", "content": "def run(x, y, out):\n    out.copy_(x + y)\n"}],
}


def _fake_ncu(tmp_path: Path) -> tuple[str, Path]:
    pids = tmp_path / "pids.txt"
    p = tmp_path / "ncu"
    p.write_text(FAKE_NCU.format(python=sys.executable, pids=str(pids)))
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p), pids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has exited; init reaps it


def _all_gone(pids: Path) -> bool:
    ids = [int(x) for line in pids.read_text().splitlines() for x in line.split()]
    assert ids, "the fake ncu never started"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(i) for i in ids):
        time.sleep(0.05)
    return not any(_alive(i) for i in ids)


def _report(sizes, energy=None):
    lat = LatencyStats(median=1.0, mean=1.0, ci95=(1.0, 1.0), stdev=0.0, sem=0.0, n=3, min=1.0, max=1.0)
    return Report(run_id="r", definition="kbot_vector_add_f32", solution="s", solution_hash="h",
                  device=DeviceInfo(kind="cuda", name="NVIDIA H200", timer="cuda_events"), started="now",
                  workloads=[WorkloadResult(uuid=f"w{n}", axes={"N": n}, status=Status.PASSED, latency_ms=lat,
                                            energy_j_per_call=energy) for n in sizes])


def test_run_ncu_stops_at_its_timeout_with_the_target_it_started(tmp_path, monkeypatch):
    monkeypatch.setattr(ncu_mod, "_known_cache", {})
    fake, pids = _fake_ncu(tmp_path)
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_ncu([sys.executable, "-c", "pass"], ncu=fake, timeout=1.5)
    took = time.monotonic() - t0
    assert 1.5 <= took <= 1.5 + OVERRUN_S, took  # the query and the run share the 1.5 s
    assert _all_gone(pids)  # ncu and its target: the whole process group


def test_profile_report_stays_within_the_budget_and_says_what_it_left_out(tmp_path, monkeypatch):
    monkeypatch.setattr(ncu_mod, "_known_cache", {})
    fake, pids = _fake_ncu(tmp_path)
    monkeypatch.setattr(pl, "find_ncu", lambda: fake)
    d = load_definition(FIX / "kbot_vector_add_f32.json")
    sizes = [1 << 12, 1 << 16, 1 << 20]
    report = _report(sizes)  # no energy from the timing worker: the energy run is wanted too
    wl = [Workload(uuid=f"w{n}", axes={"N": n}, inputs={}) for n in sizes]
    budget = 4.0
    t0 = time.monotonic()
    rec = profile_report(report, tmp_path / "run", d, parse_solution(SOLUTION), wl, ceilings=H200, max_profiled=3,
                         budget_s=budget, sandbox_mode="off")
    wall = time.monotonic() - t0
    assert wall <= budget + OVERRUN_S, wall
    assert rec["spent_s"] <= budget + OVERRUN_S and rec["within_budget"] and rec["budget_s"] == budget
    assert _all_gone(pids)
    by = {w.uuid: w for w in report.workloads}
    big, others = by[f"w{sizes[-1]}"], [by[f"w{n}"] for n in sizes[:-1]]
    # the largest workload's ncu ran until the budget had nothing left, and was stopped there
    assert [(s["step"], s["workload"], s["outcome"]) for s in rec["steps"]] == [("ncu", big.uuid, "stopped at the budget")]
    assert "stopped after" in big.profile["missing"]["ncu"] and "profiling budget of 4 s had left" in big.profile["missing"]["ncu"]
    # nothing else was started; each left-out piece of evidence is named with why
    assert "budget of 4 s was spent" in big.profile["missing"]["sass"] and "budget of 4 s was spent" in big.profile["missing"]["nvml"]
    for w in others:
        assert "not run" in w.profile["missing"]["ncu"] and "not run" in w.profile["missing"]["nvml"]
    left = {(x["step"], x["workload"]) for x in rec["left_out"]}
    assert left == {("sass", big.uuid), ("energy", big.uuid)} | {(s, w.uuid) for w in others for s in ("ncu", "energy")}
    assert all(x["evidence"] in ("ncu", "sass", "nvml") and x["why"].startswith("not run") for x in rec["left_out"])
    assert sorted(rec["skipped_for_budget"]) == sorted(w.uuid for w in others) and rec["profiled"] == [big.uuid]
    assert all(w.feedback for w in report.workloads)  # the roofline rules still ran on every workload


def test_a_campaign_does_not_start_what_cost_more_than_the_budget_on_its_last_candidate(tmp_path, monkeypatch):
    from bot.campaign.harness_evaluator import HarnessEvaluator

    monkeypatch.setattr(ncu_mod, "_known_cache", {})
    fake, pids = _fake_ncu(tmp_path)
    monkeypatch.setattr(pl, "find_ncu", lambda: fake)
    monkeypatch.setenv("KBOT_SANDBOX", "off")
    d = load_definition(FIX / "kbot_vector_add_f32.json")
    wl = [Workload(uuid="w4096", axes={"N": 4096}, inputs={})]
    ev = HarnessEvaluator(d, wl, tmp_path / "runs", device="cuda", profile_budget_s=3.0, max_profiled=1)
    sol = parse_solution(SOLUTION)
    first = _report([4096], energy=1e-3)  # energy measured while timing: no energy run
    ev.fold_profile(first, sol, tmp_path / "a")
    assert [s["outcome"] for s in first.profiling["steps"]] == ["stopped at the budget"]
    assert first.profiling["spent_s"] <= 3.0 + OVERRUN_S and _all_gone(pids)
    t0 = time.monotonic()
    second = _report([4096], energy=1e-3)
    ev.fold_profile(second, sol, tmp_path / "b")
    assert time.monotonic() - t0 < 2.0  # ncu needed more than the whole budget last time: not started
    assert second.profiling["steps"] == [] and second.profiling["skipped_for_budget"] == ["w4096"]
    why = second.workloads[0].profile["missing"]["ncu"]
    assert why.startswith("not run: ncu took 2.") and "on earlier runs" in why
    assert "nvml" not in second.workloads[0].profile["missing"]  # measured by the timing worker, nothing missing


def test_an_unlimited_budget_still_caps_each_step():
    b = ProfileBudget(None)
    g = b.grant("ncu", "w", cap_s=600)
    assert g.ok and g.timeout_s == 600
