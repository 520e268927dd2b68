"""NVML energy per call: the board's total-energy counter read around a timed loop.

``nvmlDeviceGetTotalEnergyConsumption`` returns millijoules since the driver loaded (Volta and newer).
The counter updates every few milliseconds, so the loop must run long enough (we ask for >= 200 ms)
for the difference to mean something; energy per call = delta / calls. Idle power is included: this
is the energy the board used while the kernel ran back to back, which is what a tie-breaker between
two equally fast kernels needs. Needs ``pynvml`` (the ``nvidia-ml-py`` package, in the ``gpu`` extra).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from . import Collected

__all__ = ["energy_per_call", "nvml_available"]


def _nvml() -> Any:
    import pynvml  # provided by nvidia-ml-py

    pynvml.nvmlInit()
    return pynvml


def nvml_available() -> tuple[bool, str]:
    try:
        nv = _nvml()
        nv.nvmlDeviceGetHandleByIndex(0)
        return True, ""
    except ImportError:
        return False, "pynvml is not installed (pip install nvidia-ml-py, or the kbot[gpu] extra)"
    except Exception as e:  # no driver, no device, permission
        return False, f"NVML unavailable: {type(e).__name__}: {e}"


def _handle(nv: Any, device_index: int) -> Any:
    """The NVML handle of this process's GPU. NVML ignores CUDA_VISIBLE_DEVICES, so a process pinned to
    one GPU (``--gpus``: its UUID there) is measured on that GPU, not on the host's first."""
    import os

    pinned = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if device_index == 0 and len(pinned) == 1:
        if pinned[0].startswith("GPU-"):
            return nv.nvmlDeviceGetHandleByUUID(pinned[0])
        if pinned[0].isdigit():  # an index pin (harness/runner.py sets CUDA_DEVICE_ORDER=PCI_BUS_ID, NVML's order)
            return nv.nvmlDeviceGetHandleByIndex(int(pinned[0]))
    return nv.nvmlDeviceGetHandleByIndex(device_index)


def energy_per_call(fn: Callable[[], Any], *, device_index: int = 0, min_seconds: float = 0.2,
                    max_calls: int = 100_000, synchronize: Callable[[], Any] | None = None) -> Collected:
    """Run ``fn`` back to back for at least ``min_seconds`` and report joules per call."""
    ok, why = nvml_available()
    if not ok:
        return Collected.unavailable("nvml", why)
    nv = _nvml()
    if synchronize is None:
        try:
            import torch

            synchronize = torch.cuda.synchronize
        except Exception:
            synchronize = lambda: None  # noqa: E731
    try:
        h = _handle(nv, device_index)
        fn()
        synchronize()
        e0 = nv.nvmlDeviceGetTotalEnergyConsumption(h)
        t0 = time.perf_counter()
        calls = 0
        while calls < max_calls:
            fn()
            calls += 1
            if calls % 16 == 0:
                synchronize()
                if time.perf_counter() - t0 >= min_seconds:
                    break
        synchronize()
        elapsed = time.perf_counter() - t0
        e1 = nv.nvmlDeviceGetTotalEnergyConsumption(h)
    except Exception as e:
        return Collected.unavailable("nvml", f"energy counter failed: {type(e).__name__}: {e}")
    joules = (e1 - e0) / 1e3
    if joules <= 0:
        return Collected.unavailable("nvml", f"energy counter did not advance over {elapsed:.3f} s ({calls} calls)")
    return Collected(
        source="nvml",
        evidence={"energy_j_per_call": joules / calls, "avg_power_w": joules / elapsed},
        raw={"calls": calls, "seconds": elapsed, "joules": joules},
    )
