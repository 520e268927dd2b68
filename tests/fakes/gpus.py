"""Fake GPUs for the pool (harness/gpu_pool.py ``DeviceProvider``): the CPU evaluation runs for real,
pinned to a fake GPU the way a real run is pinned to a real one (its workers carry ``KBOT_GPU``).

What is fake is only what the hardware would say: the list of GPUs, whether one is lost, and which
processes are on one. Those processes are found the way they exist: by reading the environment of
every process of this user (/proc/<pid>/environ), so "nothing else on this GPU" is checked against the
real worker processes, not against the pool's own bookkeeping. A GPU dies the way a real one takes
its processes down: every process on it is killed (SIGKILL) and from then on the provider says it is
lost, so the runner records a crash and the pool must tell that apart from a verdict.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from harness.gpu_pool import ENV_GPU, GPU
from harness.sandbox import ENV_SCRATCH


def _environ(pid: int) -> dict[str, str] | None:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or not ours
        return None
    out = {}
    for item in raw.split(b"\0"):
        k, sep, v = item.partition(b"=")
        if sep:
            out[k.decode(errors="replace")] = v.decode(errors="replace")
    return out


def processes_on(index: int) -> dict[int, str]:
    """pid -> the worker scratch folder it belongs to, for every live process pinned to fake GPU ``index``
    (a worker and any child it started share the folder: one job's worker)."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        env = _environ(int(d.name))
        if env is not None and env.get(ENV_GPU) == str(index):
            try:
                if (d / "stat").read_text().split(") ", 1)[1].startswith("Z"):
                    continue  # a zombie holds no GPU
            except (OSError, IndexError):
                continue
            out[int(d.name)] = env.get(ENV_SCRATCH, "")
    return out


class FakeGPUs:
    """``n`` fake GPUs whose workers run on the CPU."""

    kind = "cpu"

    def __init__(self, n: int, name: str = "Fake GPU"):
        self.gpus = [GPU(index=i, name=name, uuid=f"GPU-fake-{i:04d}", memory_mib=1024) for i in range(n)]
        self._lost: dict[int, str] = {}
        self.occupied_at_lease: list[tuple[int, list[int]]] = []  # (GPU, foreign pids) whenever a lease found any
        self.kills: list[tuple[int, list[int]]] = []

    def list(self) -> list[GPU]:
        return list(self.gpus)

    def lost(self, gpu: GPU) -> str | None:
        return self._lost.get(gpu.index)

    def occupants(self, gpu: GPU) -> list[int]:
        pids = sorted(processes_on(gpu.index))
        if pids:
            self.occupied_at_lease.append((gpu.index, pids))
        return pids

    def die(self, index: int, why: str = "fake GPU fell off the bus") -> None:
        """The GPU is gone: so is every process that was using it."""
        self._lost[index] = why
        pids = sorted(processes_on(index))
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.kills.append((index, pids))

    def die_when_busy(self, index: int, after_s: float = 0.3, timeout_s: float = 120) -> threading.Thread:
        """Kill GPU ``index`` ``after_s`` seconds after a worker first appears on it (mid-evaluation)."""
        def watch() -> None:
            end = time.monotonic() + timeout_s
            while time.monotonic() < end:
                if processes_on(index):
                    time.sleep(after_s)
                    self.die(index)
                    return
                time.sleep(0.02)

        t = threading.Thread(target=watch, daemon=True)
        t.start()
        return t


class Sampler:
    """Watches the fake GPUs while a round runs: per GPU, the most distinct workers (scratch folders)
    seen on it at one moment, and the most GPUs busy at one moment."""

    def __init__(self, n: int, every_s: float = 0.01):
        self.n, self.every_s = n, every_s
        self.max_workers = {i: 0 for i in range(n)}
        self.max_busy = 0
        self.samples = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            busy = 0
            for i in range(self.n):
                workers = set(processes_on(i).values())
                self.max_workers[i] = max(self.max_workers[i], len(workers))
                busy += bool(workers)
            self.max_busy = max(self.max_busy, busy)
            self.samples += 1
            time.sleep(self.every_s)

    def __enter__(self) -> "Sampler":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join(timeout=10)
