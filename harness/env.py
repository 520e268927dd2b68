"""A snapshot of where a run happened: GPU, driver, clocks, library versions, commit."""

from __future__ import annotations

import functools
import platform
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]


def _version(pkg: str) -> str | None:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return None


_SMI = ["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu,persistence_mode", "--format=csv,noheader"]


def _smi_query() -> list[str]:
    """The GPU query for this process's GPU: nvidia-smi ignores CUDA_VISIBLE_DEVICES, so a worker
    pinned to one GPU (``--gpus``) asks for that one by name (``-i``), not for the host's first."""
    import os

    pinned = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return [*_SMI, "-i", pinned[0]] if len(pinned) == 1 else list(_SMI)


_started: dict[tuple[str, ...], subprocess.Popen] = {}


def prefetch(*, gpu: bool = True, git: bool = True) -> None:
    """Start the slow queries (nvidia-smi, git) now, so they run while the worker imports torch; the
    environment snapshot collects them later. A worker starts git before its sandbox closes (git
    reads the repository, which the sandbox does not let the worker read) and nvidia-smi when it
    should describe the GPU (at once, or when a spare's job arrives)."""
    for cmd in [c for c, on in ((_smi_query(), gpu), (_git_head(), git)) if on]:
        if shutil.which(cmd[0]) is not None and tuple(cmd) not in _started:
            try:
                _started[tuple(cmd)] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            except OSError:
                pass


def cancel_prefetch() -> None:
    """Stop the queries ``prefetch`` started, for a worker that will never collect them (the observer):
    an nvidia-smi left running past its parent's exit ran on into the timing worker's timed calls."""
    while _started:
        _, proc = _started.popitem()
        try:
            proc.kill()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass


def _git_head() -> list[str]:
    return ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"]


def _run(cmd: list[str]) -> str | None:
    proc = _started.pop(tuple(cmd), None)
    if proc is None:
        if shutil.which(cmd[0]) is None:
            return None
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            return None
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None
    return out.strip() if proc.returncode == 0 else None


def cuda_visible() -> bool:
    """Whether an NVIDIA GPU is visible, decided without importing torch (which costs seconds): the
    driver's control device or nvidia-smi, and CUDA_VISIBLE_DEVICES not set to empty. The worker then
    confirms with torch and fails clearly if torch cannot use it."""
    import os

    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return False
    return Path("/dev/nvidiactl").exists() or Path("/proc/driver/nvidia/gpus").is_dir()


def resolve_device(device: str) -> str:
    """``auto`` becomes ``cuda`` when a CUDA device is visible, else ``cpu``."""
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, not '{device}'")
    if device == "auto":
        return "cuda" if cuda_visible() else "cpu"
    if device == "cuda" and not cuda_visible():
        raise RuntimeError("--device cuda asked for, but no NVIDIA GPU is visible here")
    return device


def hardware_name(device: str) -> str:
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name(0)
    return f"CPU {platform.processor() or platform.machine()}"


@functools.lru_cache(maxsize=2)
def environment(device: str) -> dict[str, Any]:
    import torch

    libs = {
        k: v
        for k, v in {
            "torch": torch.__version__,
            "triton": _version("triton"),
            "cupy": _version("cupy-cuda12x") or _version("cupy-cuda13x") or _version("cupy"),
            "numpy": _version("numpy"),
            "python": sys.version.split()[0],
        }.items()
        if v
    }
    env: dict[str, Any] = {"hardware": hardware_name(device).replace(" ", "_"), "libs": libs, "platform": platform.platform()}
    if device == "cuda":
        libs["cuda"] = str(torch.version.cuda)
        props = torch.cuda.get_device_properties(0)
        env["gpu"] = {
            "name": props.name,
            "sm_count": props.multi_processor_count,
            "memory_bytes": props.total_memory,
            "capability": f"{props.major}.{props.minor}",
        }
        smi = _run(_smi_query())
        if smi:
            keys = ["driver", "clock_sm_mhz", "clock_sm_max_mhz", "clock_mem_mhz", "power_w", "temperature_c", "persistence"]
            env["gpu"].update(dict(zip(keys, [x.strip() for x in smi.splitlines()[0].split(",")])))
    commit = _run(_git_head())
    if commit:
        env["commit"] = commit
    return env
