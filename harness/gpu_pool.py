"""Several GPUs of one host: which ones (``--gpus``), and a pool that runs one job per GPU at a time.

A job is one evaluation: a candidate with its paired champion in the same worker, its observer, its
retries. The pool leases a whole GPU to a job and to nothing else until the job is over, so the
paired measurement never shares its GPU; the next job on that GPU starts only when the previous
one's workers are gone. Jobs are taken in order from one queue by one thread per GPU, so N jobs on N
GPUs take about the time of the slowest one; results come back in job order, whatever order they
finished in, each with the GPU it came from (and the GPUs it was lost on).

A GPU that dies mid-job (it fell off the bus, it needs a reset: the driver says so) makes that job's
workers die too, and the runner would record a crash as if the candidate had crashed. So after every
job the pool asks the device provider whether the GPU is still alive; when it is not, the job's
result is thrown away (``Job.lost``: the caller sets its run folder aside), the GPU leaves the pool,
and the job goes back to the front of the queue for another GPU. A job lost on ``max_attempts`` GPUs,
or left when no GPU remains, ends as a harness failure (``Placed.error``), never as a verdict on the
candidate; the other jobs of the round still finish.

The device provider is the seam between the pool and the hardware: ``NvidiaSmi`` lists and checks
NVIDIA GPUs with ``nvidia-smi`` (the parent never imports torch or initializes CUDA); tests use fake
GPUs that run the CPU evaluation (tests/fakes/gpus.py). A run pinned to a GPU (``RunConfig.gpu``)
gives its workers ``CUDA_VISIBLE_DEVICES=<the GPU's UUID>`` (the UUID, because CUDA's own device
order need not be nvidia-smi's) and ``KBOT_GPU=<index>``, so every process of a job can be found by
the GPU it was given.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Protocol, TypeVar

ENV_GPU = "KBOT_GPU"  # the worker's GPU, as the pool numbers it (harness/runner.py worker_env)

J = TypeVar("J")
R = TypeVar("R")


class GPUSelectionError(ValueError):
    """``--gpus`` names GPUs this host does not have (or is not a count, ``all`` or a list)."""


class HarnessFailure(RuntimeError):
    """An evaluation the pool could not carry out (every GPU it was given was lost): no verdict."""


@dataclass(frozen=True)
class GPU:
    index: int  # nvidia-smi's index (PCI bus order)
    name: str
    uuid: str | None = None
    memory_mib: int | None = None

    @property
    def pin(self) -> str:
        """What a worker's ``CUDA_VISIBLE_DEVICES`` is set to: the UUID when known (CUDA orders devices
        fastest first unless told otherwise, nvidia-smi by PCI bus), else the index."""
        return self.uuid or str(self.index)

    def record(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "uuid": self.uuid, "memory_mib": self.memory_mib}


class DeviceProvider(Protocol):
    """Where the pool's GPUs come from and how it learns one was lost."""

    kind: str  # the device the workers run on: "cuda" (or "cpu" for fake GPUs)

    def list(self) -> list[GPU]: ...

    def lost(self, gpu: GPU) -> str | None:
        """None while ``gpu`` works; else why it does not (it leaves the pool)."""
        ...

    def occupants(self, gpu: GPU) -> list[int]:
        """Processes using ``gpu`` now (checked before a job starts on it: nothing else may be there)."""
        ...


_QUERY = "index,name,uuid,memory.total"
_LOST_MARKERS = ("gpu is lost", "unknown error", "requires reset", "unable to determine the device handle", "no devices were found")


def _smi(args: list[str], timeout: float = 30) -> tuple[int, str]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 127, "nvidia-smi is not on PATH"
    try:
        p = subprocess.run([exe, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, f"nvidia-smi {' '.join(args)} did not answer within {timeout:.0f} s"
    except OSError as e:
        return 126, f"nvidia-smi could not run: {e}"
    return p.returncode, (p.stdout + p.stderr).strip()


def parse_gpu_list(text: str) -> list[GPU]:
    """GPUs from ``nvidia-smi --query-gpu=index,name,uuid,memory.total --format=csv,noheader,nounits``."""
    out = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        mem = parts[3] if len(parts) > 3 else ""
        out.append(GPU(index=int(parts[0]), name=parts[1], uuid=parts[2] or None, memory_mib=int(mem) if mem.isdigit() else None))
    return out


class NvidiaSmi:
    """The host's NVIDIA GPUs, asked of nvidia-smi. It lists every GPU whatever this process's
    ``CUDA_VISIBLE_DEVICES`` says, so a parent restricted to some GPUs (a runner pinned by its
    supervisor) keeps to them: those named there (by index or UUID) are the ones present."""

    kind = "cuda"

    def list(self) -> list[GPU]:
        rc, out = _smi([f"--query-gpu={_QUERY}", "--format=csv,noheader,nounits"])
        if rc != 0:
            raise GPUSelectionError(f"--gpus needs NVIDIA GPUs, and nvidia-smi lists none here ({out[:300] or f'exit {rc}'})")
        gpus = parse_gpu_list(out)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:
            allowed = [v.strip() for v in visible.split(",") if v.strip()]
            gpus = [g for g in gpus if str(g.index) in allowed or (g.uuid and g.uuid in allowed)]
        return gpus

    def lost(self, gpu: GPU) -> str | None:
        rc, out = _smi(["-i", gpu.pin, "--query-gpu=index,pci.bus_id,temperature.gpu", "--format=csv,noheader"])
        low = out.lower()
        if rc != 0 or any(m in low for m in _LOST_MARKERS) or "[" in out:
            return f"nvidia-smi on GPU {gpu.index} ({gpu.pin}): {out[:300] or f'exit {rc}'}"
        return None

    def occupants(self, gpu: GPU) -> list[int]:
        rc, out = _smi(["-i", gpu.pin, "--query-compute-apps=pid", "--format=csv,noheader"])
        if rc != 0:
            return []  # the check after the job says whether the GPU is gone
        return [int(x) for x in out.split() if x.strip().isdigit()]


def select(spec: str | int, present: list[GPU]) -> list[GPU]:
    """The GPUs ``--gpus spec`` means on a host with ``present``: ``all``; a count N (the first N); or
    a comma-separated list of indices (``0,2``; one GPU alone as ``3,``). Refuses anything else, a
    count or index this host does not have, and repeats."""
    s = str(spec).strip().lower()
    have = ", ".join(f"{g.index}: {g.name}" for g in present) or "none"
    if not present:
        raise GPUSelectionError(f"--gpus {spec}: no GPU here")
    if s == "all":
        return list(present)
    if "," not in s:
        if not s.isdigit() or int(s) < 1:
            raise GPUSelectionError(f"--gpus {spec}: give a count (1 or more), 'all', or a list of indices such as 0,2")
        n = int(s)
        if n > len(present):
            raise GPUSelectionError(f"--gpus {n}: only {len(present)} GPU{'s' if len(present) != 1 else ''} here ({have})")
        return list(present[:n])
    items = [x.strip() for x in s.split(",") if x.strip()]
    if not items or not all(x.isdigit() for x in items):
        raise GPUSelectionError(f"--gpus {spec}: a list holds GPU indices only, such as 0,2")
    by_index = {g.index: g for g in present}
    wanted = [int(x) for x in items]
    if len(set(wanted)) != len(wanted):
        raise GPUSelectionError(f"--gpus {spec}: a GPU named twice")
    missing = [i for i in wanted if i not in by_index]
    if missing:
        raise GPUSelectionError(f"--gpus {spec}: no GPU {', '.join(map(str, missing))} here ({have})")
    return [by_index[i] for i in wanted]


def gpus_for(spec: str | int, provider: DeviceProvider | None = None) -> list[GPU]:
    """``select`` against what ``provider`` (default: nvidia-smi) lists."""
    return select(spec, (provider or NvidiaSmi()).list())


# ------------------------------------------------------------------------------------------ the pool


@dataclass
class Attempt:
    gpu: int
    seconds: float
    lost: str | None = None  # why the GPU was found lost after (or before) this attempt
    occupants: list[int] = field(default_factory=list)  # processes found on the GPU at the lease
    waited_s: float = 0.0  # how long the lease waited for them to leave
    shared: bool = False  # they had not left when the job started: its timing shared the GPU


@dataclass
class Placed(Generic[J, R]):
    """A job's outcome: its result and the GPU it came from, or the harness failure that ended it."""

    index: int
    job: J
    result: R | None = None
    gpu: GPU | None = None
    error: str | None = None
    attempts: list[Attempt] = field(default_factory=list)
    exc: BaseException | None = None  # the exception behind ``error``, when one was raised on a live GPU

    def record(self) -> dict[str, Any]:
        return {"gpu": self.gpu.index if self.gpu else None, "error": self.error,
                "attempts": [a.__dict__ for a in self.attempts]}


class Pool:
    """One job per GPU at a time over ``gpus`` (see the module docstring). Not reentrant: one ``map``
    at a time. The GPUs found lost stay out of the pool for its lifetime (``lost``)."""

    def __init__(self, gpus: list[GPU], provider: DeviceProvider, *, max_attempts: int = 2, busy_wait_s: float = 60.0):
        if not gpus:
            raise GPUSelectionError("a pool needs at least one GPU")
        if len({g.index for g in gpus}) != len(gpus):
            raise GPUSelectionError("a GPU given to the pool twice")
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.gpus = list(gpus)
        self.provider = provider
        self.max_attempts = max_attempts
        self.busy_wait_s = busy_wait_s  # how long a lease waits for processes found on its GPU to leave
        self.lost: dict[int, str] = {}  # GPU index -> why it left the pool
        self._lock = threading.Lock()

    @property
    def kind(self) -> str:
        return self.provider.kind

    def alive(self) -> list[GPU]:
        with self._lock:
            return [g for g in self.gpus if g.index not in self.lost]

    def _retire(self, gpu: GPU, why: str) -> None:
        with self._lock:
            self.lost.setdefault(gpu.index, why)

    def map(self, jobs: list[J], run: Callable[[J, GPU], R], *, lost: Callable[[J, GPU, R | None], None] | None = None,
            progress: Callable[[str, Placed], None] | None = None) -> list[Placed[J, R]]:
        """Run every job, one per GPU at a time; returns one ``Placed`` per job, in job order.

        ``run(job, gpu)``: the evaluation on that GPU (it must pin its workers to ``gpu``). An
        exception it raises is the harness's failure on that GPU: the job is tried on another GPU
        when this one turns out lost, and otherwise ends as ``Placed.error``. ``lost(job, gpu,
        result)``: called when the GPU was lost under the job, before it is retried (set the run
        folder aside). ``progress(kind, placed)``: ``"start"`` / ``"done"`` / ``"lost"`` as they happen
        (from the pool's threads)."""
        placed: list[Placed[J, R]] = [Placed(i, j) for i, j in enumerate(jobs)]
        todo: queue.Queue[int] = queue.Queue()
        retry: list[int] = []  # lost jobs, taken before new ones so a round finishes in order
        for i in range(len(jobs)):
            todo.put(i)
        left = [len(jobs)]
        cv = threading.Condition()

        def take() -> int | None:
            with cv:
                while True:
                    if retry:
                        return retry.pop(0)
                    try:
                        return todo.get_nowait()
                    except queue.Empty:
                        pass
                    if left[0] == 0:
                        return None
                    cv.wait(0.2)  # a running job may yet come back for another GPU

        def finish(i: int) -> None:
            with cv:
                left[0] -= 1
                cv.notify_all()

        def tell(kind: str, p: Placed) -> None:
            if progress is not None:
                try:
                    progress(kind, p)
                except Exception:  # noqa: BLE001 — a progress line must not stop a lane (its jobs would never finish)
                    pass

        def asked_lost(gpu: GPU) -> str | None:
            try:
                return self.provider.lost(gpu)
            except Exception as e:  # noqa: BLE001 — a GPU that cannot be asked about is not trusted with a job
                return f"could not ask whether GPU {gpu.index} works ({type(e).__name__}: {e})"

        def asked_occupants(gpu: GPU) -> list[int]:
            try:
                return self.provider.occupants(gpu)
            except Exception:  # noqa: BLE001 — unknown occupants: the check after the job still decides
                return []

        def lane(gpu: GPU) -> None:
            while True:
                why = self.lost.get(gpu.index) or asked_lost(gpu)
                if why:
                    self._retire(gpu, why)
                    return
                i = take()
                if i is None:
                    return
                p = placed[i]
                attempt = Attempt(gpu=gpu.index, seconds=0.0, occupants=asked_occupants(gpu))
                p.attempts.append(attempt)
                if attempt.occupants:  # something else is on the GPU (a straggler, another user): let it leave
                    w0 = time.monotonic()
                    while (still := asked_occupants(gpu)) and time.monotonic() - w0 < self.busy_wait_s:
                        time.sleep(0.5)
                    attempt.waited_s, attempt.shared = round(time.monotonic() - w0, 3), bool(still)
                tell("start", p)
                t0 = time.monotonic()
                result: R | None = None
                error: str | None = None
                exc: BaseException | None = None
                try:
                    result = run(p.job, gpu)
                except Exception as e:  # noqa: BLE001 — the harness failed on this GPU: judged below
                    error, exc = f"{type(e).__name__}: {e}", e
                attempt.seconds = round(time.monotonic() - t0, 3)
                why = asked_lost(gpu)
                if why is None:
                    p.result, p.gpu, p.exc = result, gpu, exc
                    p.error = f"harness failure on GPU {gpu.index}: {error}" if error else None
                    tell("done", p)
                    finish(i)
                    continue
                # The GPU went under this job: whatever it produced is no verdict on the candidate.
                attempt.lost = why
                self._retire(gpu, why)
                unclean = None
                if lost is not None:
                    try:
                        lost(p.job, gpu, result)
                    except Exception as e:  # noqa: BLE001 — what it left could be read back as a result: no retry
                        unclean = f"its results on the lost GPU could not be set aside ({type(e).__name__}: {e})"
                tell("lost", p)
                with cv:
                    if unclean is not None:
                        p.error = f"harness failure: GPU {gpu.index} was lost under it ({why}) and {unclean}"
                        left[0] -= 1
                        cv.notify_all()
                    elif len(p.attempts) < self.max_attempts and any(g.index not in self.lost for g in self.gpus):
                        retry.append(i)
                        cv.notify_all()
                    else:
                        p.error = (f"harness failure: lost {len(p.attempts)} GPU{'s' if len(p.attempts) > 1 else ''} while evaluating it "
                                   f"({'; '.join(f'GPU {a.gpu}: {a.lost}' for a in p.attempts)})")
                        left[0] -= 1
                        cv.notify_all()
                return  # this GPU is gone: its lane ends

        threads = [threading.Thread(target=lane, args=(g,), name=f"kbot-gpu{g.index}", daemon=True) for g in self.alive()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for p in placed:  # every GPU gone with jobs still waiting: those never ran anywhere
            if p.result is None and p.error is None:
                tried = "; ".join(f"GPU {a.gpu}: {a.lost}" for a in p.attempts)
                p.error = "harness failure: no GPU of the pool is left" + (f" (lost: {tried})" if tried else
                                                                           f" ({'; '.join(f'GPU {k}: {v}' for k, v in sorted(self.lost.items()))})")
        return placed

