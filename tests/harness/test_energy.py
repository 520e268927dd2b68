"""Energy per call on every evaluation: measured by the timer after the timed loop where an NVML
counter exists (GPU, test at the end, `-m gpu`), absent with the reason on the CPU, and checked in
the parent (a figure no board can draw is withheld)."""

from __future__ import annotations

import pytest
import torch

from harness.measure import Refresher, Timer
from harness.report import LatencyStats, Status, WorkloadResult
from harness.runner import check_energy
from harness.timing_config import TimingConfig


def _fns():
    x = torch.ones(16)
    return [lambda: {"y": x + 1}, lambda: {"y": x * 2}]


def test_on_the_cpu_energy_is_absent_and_says_why():
    t = Timer(torch.device("cpu"), TimingConfig(budget_s=0.01, min_iters=3, warmup=1, recheck=0), Refresher([]), 0)
    samples = t.run(_fns(), {}, [None, None], energy=True)
    assert all(s.energy_j_per_call is None and "no energy counter on the CPU" in s.energy_missing for s in samples)
    off = Timer(torch.device("cpu"), TimingConfig(budget_s=0.01, min_iters=3, warmup=1, recheck=0, energy_s=0), Refresher([]), 0)
    assert "energy_s=0" in off.run(_fns(), {}, [None, None], energy=True)[0].energy_missing
    # the reference and the declared baselines are timed without it
    assert t.run(_fns()[:1], {}, [None])[0].energy_missing == ""


def _result(e, b, wall_ms=0.01):
    lat = LatencyStats(median=0.01, mean=0.01, ci95=(0.01, 0.01), stdev=0.0, sem=0.0, n=1, min=0.01, max=0.01)
    return WorkloadResult(uuid="u", axes={}, status=Status.PASSED, latency_ms=lat, energy_j_per_call=e,
                          baseline_energy_j_per_call=b, profile={"wall_ms_per_call": wall_ms})


def test_the_parent_withholds_energy_no_board_can_draw():
    ok = _result(3e-3, 4e-3)  # 3 mJ in 10 µs = 300 W
    check_energy(ok)
    assert ok.energy_j_per_call == 3e-3 and ok.baseline_energy_j_per_call == 4e-3
    for e, b in ((1.0, 4e-3), (-1e-3, 4e-3), (3e-3, float("nan"))):  # 100 kW; negative; not a number
        r = _result(e, b)
        check_energy(r)
        assert r.energy_j_per_call is None and r.baseline_energy_j_per_call is None
        assert r.profile["energy_missing"].startswith("withheld")


@pytest.mark.gpu
def test_on_the_gpu_energy_is_measured_for_candidate_and_baseline():
    if not torch.cuda.is_available():
        pytest.skip("needs an NVIDIA GPU; run on the device with `pytest -m gpu`")
    x = torch.ones(1 << 24, device="cuda")
    fns = [lambda: {"y": x + 1}, lambda: {"y": x * 2 + 1}]
    t = Timer(torch.device("cuda"), TimingConfig(budget_s=0.1, recheck=0, kernel_time=False), Refresher([]), 0)
    samples = t.run(fns, {}, [None, None], energy=True)
    for s in samples:
        assert s.energy_j_per_call is not None and s.energy_j_per_call > 0, s.energy_missing
