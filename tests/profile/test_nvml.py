"""NVML energy per call, against a stand-in pynvml module (the real one needs a GPU driver)."""

from __future__ import annotations

import sys
import types

from harness.profile.nvml import energy_per_call, nvml_available


def _fake_pynvml(monkeypatch, mj_per_read: list[int]):
    mod = types.ModuleType("pynvml")
    reads = iter(mj_per_read)
    mod.nvmlInit = lambda: None
    mod.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)
    mod.nvmlDeviceGetTotalEnergyConsumption = lambda h: next(reads)
    monkeypatch.setitem(sys.modules, "pynvml", mod)


def test_energy_per_call(monkeypatch):
    _fake_pynvml(monkeypatch, [1_000_000, 1_000_500])  # 0.5 J over the loop
    calls = []
    c = energy_per_call(lambda: calls.append(1), min_seconds=0.0, synchronize=lambda: None)
    assert c.ok, c.missing
    n = c.raw["calls"]
    assert n == len(calls) - 1  # one warm-up call is not counted
    assert abs(c.evidence["energy_j_per_call"] - 0.5 / n) < 1e-12


def test_counter_that_does_not_move_is_missing(monkeypatch):
    _fake_pynvml(monkeypatch, [42, 42])
    c = energy_per_call(lambda: None, min_seconds=0.0, synchronize=lambda: None)
    assert not c.ok and "did not advance" in c.missing


def test_without_pynvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    ok, why = nvml_available()
    assert not ok and "nvidia-ml-py" in why
    assert not energy_per_call(lambda: None).ok


def test_a_process_pinned_to_one_gpu_reads_that_gpus_counter(monkeypatch):
    """NVML ignores CUDA_VISIBLE_DEVICES: a worker pinned by --gpus (its GPU's UUID there) must read its
    own GPU's counter, not the host's first GPU's."""
    _fake_pynvml(monkeypatch, [1_000_000, 1_000_500])
    asked = []
    sys.modules["pynvml"].nvmlDeviceGetHandleByUUID = lambda u: asked.append(u) or ("uuid", u)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1234abcd")
    assert energy_per_call(lambda: None, min_seconds=0.0, synchronize=lambda: None).ok
    assert asked == ["GPU-1234abcd"]
    from harness.profile.nvml import _handle

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert _handle(sys.modules["pynvml"], 0) == ("handle", 3)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert _handle(sys.modules["pynvml"], 0) == ("handle", 0)
