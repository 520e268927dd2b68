"""The parent side of an evaluation: static guard, worker processes, timeouts, traces, archive.

One run = one solution (and optionally a baseline) over a list of workloads. The runner never imports
candidate code. It starts a worker (harness.worker), feeds it the job, reads results from a private
pipe, and owns every failure mode: a start-up timeout (the build), a per-workload timeout and a total
timeout end as TIMEOUT; a worker that dies (crash, ``os._exit``, CUDA illegal address, OOM kill) ends
its current workload as RUNTIME_ERROR; in both cases a fresh worker takes the remaining workloads.
Every workload gets exactly one trace line, flushed as soon as it is known, so ``--resume`` can skip
what an interrupted run already measured.
"""

from __future__ import annotations

import json
import math
import os
import select
import signal
import subprocess
import sys
import threading
import time
import uuid as uuidlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from . import runfolder, sandbox
from .baselines import TRUST_BASELINE, TRUST_CANDIDATE
from .gpu_pool import ENV_GPU, GPU
from .paths import CODE_ROOT, REPO_ENV, definitions_dirs, repository
from .report import BaselineRun, BuildResult, DeviceInfo, Finding, Report, WorkloadResult
from .roofline import physical_floor_ms
from .schema import Definition, Evaluation, Solution, Status, Trace, Workload
from .timed_counts import TimedCounts

REPO_ROOT = CODE_ROOT  # the folder harness/ is imported from (a checkout, or site-packages): the workers' cwd and PYTHONPATH
LOG_HEAD = 16 * 1024
LOG_TAIL = 16 * 1024


@dataclass
class RunConfig:
    device: str = "cpu"  # resolved: "cpu" or "cuda"
    trials: int | None = None
    seed: int = 0
    timeout_s: float = 300.0  # per workload (the official protocol's timeout)
    startup_timeout_s: float = 600.0  # build + import (a CUDA build can take minutes)
    total_timeout_s: float | None = None
    timing: dict[str, Any] = field(default_factory=dict)
    config_overrides: dict[str, Any] = field(default_factory=dict)
    dataset_root: str | None = None
    guard: bool = True
    # required | auto | off (harness/sandbox.py); KBOT_SANDBOX, else required on GitHub Actions, else auto
    sandbox: str = field(default_factory=sandbox.default_mode)
    # Where the definition and the workloads came from (harness.dataset.Resolved.provenance): recorded
    # in report.config["inputs"], so a report always says which set it measured.
    provenance: dict[str, Any] | None = None
    # The one GPU of a host this run is pinned to (harness/gpu_pool.py; ``--gpus``): its workers see
    # only it, and report.config["gpu"] says which it was. None: whatever the process sees.
    gpu: GPU | None = None


class Timeline:
    """Seconds since the run began at which the parent saw each step: the breakdown of harness overhead
    (worker start-up, build, observer, each workload) that lands in report.json under config.timeline_s."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.marks: list[tuple[str, float]] = []

    def mark(self, what: str, at: float | None = None) -> None:
        """``at``: seconds since the run began when it happened, if known better than "now"."""
        self.marks.append((what, round(time.monotonic() - self.t0 if at is None else at, 3)))
        self.marks.sort(key=lambda m: m[1])

    def sent_at(self, worker: "Worker", msg: dict[str, Any]) -> float | None:
        """When a worker sent ``msg`` on this timeline (its own clock from its start, a few ms late):
        a gated worker's messages wait in the pipe while the parent watches the observer."""
        t = msg.get("t")
        if not isinstance(t, (int, float)) or t != t or t < 0:
            return None
        return min(worker.started_at - self.t0 + float(t), time.monotonic() - self.t0)


class CappedLog:
    """Keeps the head and tail of a stream, drops the middle: a candidate printing gigabytes costs us
    two small buffers, never memory or disk."""

    def __init__(self, head: int = LOG_HEAD, tail: int = LOG_TAIL):
        self.head_max, self.tail_max = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self.lock = threading.Lock()

    def feed(self, data: bytes) -> None:
        with self.lock:
            room = self.head_max - len(self.head)
            if room > 0:
                self.head += data[:room]
                data = data[room:]
            if data:
                self.tail += data
                if len(self.tail) > self.tail_max:
                    cut = len(self.tail) - self.tail_max
                    self.dropped += cut
                    del self.tail[:cut]

    def take(self) -> str:
        with self.lock:
            mid = f"\n[... {self.dropped} bytes of output dropped ...]\n" if self.dropped else ""
            text = (bytes(self.head) + mid.encode() + bytes(self.tail)).decode("utf-8", "replace")
            self.head, self.tail, self.dropped = bytearray(), bytearray(), 0
            return text


@dataclass
class Spawned:
    """A worker process with its result channel and drained output, before (or after) it has a job."""

    proc: subprocess.Popen
    rfd: int
    log: "CappedLog"
    drain: threading.Thread
    scratch: str  # the worker's private folder: its build, caches and temporary files; removed with it

    @classmethod
    def start(cls, env: dict[str, str], *, spare: bool = False) -> "Spawned":
        import tempfile

        r, w = os.pipe()
        if spare:  # the worker starts its clock and its environment queries when its job arrives
            env = {**env, "KBOT_SPARE": "1"}
        # A fresh folder per worker, outside the run folder: the only place the worker may write, and
        # nothing in it is ever read back as a result (results come over the channel only). Random
        # names of one depth, so a candidate cannot tell the observer from the timing worker by path.
        scratch = tempfile.mkdtemp(prefix="kbot-w-")
        log = CappedLog()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-u", "-m", "harness.worker"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                pass_fds=(w,), env={**env, "KBOT_RESULT_FD": str(w), sandbox.ENV_SCRATCH: scratch}, cwd=str(REPO_ROOT),
                start_new_session=True,
            )
        except BaseException:
            os.close(r)
            _remove_scratch(scratch)
            raise
        finally:
            os.close(w)
        drain = threading.Thread(target=_pump, args=(proc, log), daemon=True)
        drain.start()
        return cls(proc, r, log, drain, scratch)

    def discard(self, *, kill_group: bool = True) -> None:
        """Kill the process group, reap it, and close the channel (call once: a second killpg could hit
        a process group that reused the id). ``kill_group=False`` for a spare found dead and already
        reaped: no candidate ever ran in it, so it left no group behind."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        if kill_group:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.drain.join(timeout=2)
        try:
            os.close(self.rfd)
        except OSError:
            pass
        _remove_scratch(self.scratch)


def _remove_scratch(path: str) -> None:
    """Remove a worker's scratch folder without following anything the candidate left in it (rmtree
    unlinks symlinks instead of descending into them)."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _pump(proc: subprocess.Popen, log: "CappedLog") -> None:
    """Drain a worker's stdout/stderr into its capped log, so a candidate printing megabytes never
    blocks on a full pipe."""
    assert proc.stdout is not None
    while True:
        chunk = proc.stdout.read1(65536) if hasattr(proc.stdout, "read1") else proc.stdout.read(65536)
        if not chunk:
            return
        log.feed(chunk)


class Spares:
    """Worker processes started before they are needed. A worker imports torch (3-4 s on the H200) before
    it reads its job, so a spare started while one candidate is evaluated makes the next candidate's
    evaluation start at the job, not at the import. Each spare serves one job and is never reused: a
    candidate's process is never handed to another candidate. Only the environment must match."""

    def __init__(self) -> None:
        self._idle: list[tuple[dict[str, str], Spawned]] = []

    def start(self, env: dict[str, str], n: int) -> None:
        for _ in range(n):
            self._idle.append((dict(env), Spawned.start(env, spare=True)))

    @classmethod
    def started_for(cls, cfg: "RunConfig") -> "Spares":
        """Spares for one evaluation under ``cfg``: its timing worker, and its observer on the GPU."""
        spares = cls()
        if cfg.device == "cuda" and cfg.sandbox != "off":
            sandbox.ensure_gpu_nodes()  # before a sandboxed process initializes CUDA
        spares.start(worker_env(cfg.device, cfg.sandbox, sandbox_reads(cfg.dataset_root), gpu=cfg.gpu), 2 if needs_observer(cfg) else 1)
        return spares

    def take(self, env: dict[str, str]) -> Spawned | None:
        while self._idle:
            for i, (e, sp) in enumerate(self._idle):
                if e == env:
                    del self._idle[i]
                    if sp.proc.poll() is None:
                        return sp
                    sp.discard(kill_group=False)  # died idle, already reaped: its pid may be reused, no killpg
                    break
            else:
                return None
        return None

    def __len__(self) -> int:
        return len(self._idle)

    def close(self) -> None:
        while self._idle:
            self._idle.pop()[1].discard()


class Worker:
    """One worker process with its result channel and its drained output; a spare's process when
    ``spares`` has one for this environment, else a fresh one."""

    def __init__(self, job: dict[str, Any], env: dict[str, str], *, gated: bool = False, spares: Spares | None = None):
        import secrets

        # Every message must carry this run's nonce: bytes that reach the channel by other means (a
        # candidate that found the descriptor) are refused as garbage.
        self.nonce = secrets.token_hex(16)
        job = {**job, "nonce": self.nonce, "gated": gated}
        spare = spares.take(env) if spares is not None else None
        self.from_spare = spare is not None
        spawned = spare or Spawned.start(env)
        self.started_at = time.monotonic()  # start-up timeout counts from the job, spare or not
        self._spawned = spawned
        self.proc, self.rfd, self.log = spawned.proc, spawned.rfd, spawned.log
        self.buf = b""
        self._killed = False
        self.isolation: dict[str, Any] | None = None  # what the worker said before any candidate code ran
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
            if not gated:
                self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it died before reading its job: its channel reports that

    def open_gate(self) -> None:
        """Let a gated worker go on to its first timed call (see harness.worker.wait_gate)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it died meanwhile: its channel reports that

    def next_message(self, deadline: float) -> dict[str, Any] | None:
        """The next JSON message, or None on timeout or when the worker's channel closed."""
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.rfd], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(self.rfd, 1 << 20)
            if not chunk:
                return {"type": "eof"}
            self.buf += chunk
            if len(self.buf) > 64 << 20:
                return {"type": "garbage", "message": "result channel flooded"}
        line, _, self.buf = self.buf.partition(b"\n")
        try:
            msg = json.loads(line)
        except (json.JSONDecodeError, RecursionError, UnicodeDecodeError):
            return {"type": "garbage", "message": "unparseable message on the result channel"}
        if not isinstance(msg, dict):
            return {"type": "garbage", "message": "non-object message"}
        if msg.pop("nonce", None) != self.nonce:
            return {"type": "garbage", "message": "a message without this run's nonce on the result channel"}
        return msg

    def kill(self) -> None:
        """Kill the worker's process group and close its channel; once only (a second killpg could hit
        a process group that reused the id)."""
        if self._killed:
            return
        self._killed = True
        self._spawned.discard()

    def exit_description(self) -> str:
        rc = self.proc.poll()
        if rc is None:
            return "worker still running"
        if rc < 0:
            try:
                return f"worker killed by signal {signal.Signals(-rc).name}"
            except ValueError:
                return f"worker killed by signal {-rc}"
        return f"worker exited with code {rc}"


def worker_env(device: str, sandbox_mode: str = "auto", read: list[str] | tuple[str, ...] = (), gpu: GPU | None = None) -> dict[str, str]:
    """The environment of a worker process: no secrets; the sandbox mode and the folders it may read
    beyond the standard ones (harness/sandbox.py); with ``gpu``, pinned to that one GPU (its UUID in
    ``CUDA_VISIBLE_DEVICES``) and marked with it (``KBOT_GPU``: the pool finds a job's processes by it)."""
    env = {k: v for k, v in os.environ.items() if not _secret(k)}
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    repo = repository()
    if repo is not None:  # the worker's cwd is CODE_ROOT: it finds the same repository (its skills/guard) by name
        env[REPO_ENV] = str(repo)
    env[sandbox.ENV_MODE] = sandbox.check_mode(sandbox_mode)
    env.pop(sandbox.ENV_READ, None)
    if read:
        env[sandbox.ENV_READ] = os.pathsep.join(read)
    # torch.compile (a declared baseline's) compiles in the worker's own thread, not a pool of them:
    # helper threads would read as the candidate's to the runtime guard's thread count.
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    env.pop(ENV_GPU, None)
    if gpu is not None:
        env[ENV_GPU] = str(gpu.index)
        env["CUDA_VISIBLE_DEVICES"] = gpu.pin
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # an index pin means nvidia-smi's index
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"  # Triton kernels run through its interpreter on CPU tensors
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def sandbox_reads(dataset_root: str | None, definition: Definition | None = None, definition_path: Path | None = None) -> list[str]:
    """Folders a worker must read beyond the standard ones: the dataset root, and the folder of a
    definition's sidecar (trusted builders and references) when it is not one of ours."""
    from .defconfig import find_sidecar

    out = [str(Path(dataset_root).resolve())] if dataset_root else []
    if definition is not None:
        side = find_sidecar(definition.name, definition_path)
        ours = [d.resolve() for d in definitions_dirs()]  # readable by every worker (harness/sandbox.py)
        if side is not None and not any(d in side.resolve().parents for d in ours):
            out.append(str(side.resolve().parent))
    return out


_SECRET_MARKERS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "CREDENTIAL", "PRIVATE")


def _secret(name: str) -> bool:
    """Secrets never meet candidate code: the worker's environment drops anything that looks like one."""
    up = name.upper()
    return any(m in up for m in _SECRET_MARKERS) or up.startswith(("GITHUB_", "ACTIONS_", "ANTHROPIC", "OPENAI"))


def make_trace(definition: Definition, solution: Solution, workload: Workload, r: WorkloadResult, env: dict[str, Any]) -> Trace:
    """An official-shaped Trace for one workload result; our extras go under evaluation.kbot."""
    from .schema import Environment, Performance
    from .schema import TraceCorrectness as TC

    status = r.status
    correctness = None
    performance = None
    if status in (Status.PASSED, Status.INCORRECT_NUMERICAL) and r.correctness is not None:
        correctness = TC(max_relative_error=r.correctness.max_relative_error, max_absolute_error=r.correctness.max_absolute_error, extra={"matched_ratio": r.correctness.matched_ratio, "trials": r.correctness.trials})
    if status is Status.PASSED:
        if r.latency_ms is None:
            raise ValueError("a PASSED result must carry latency")
        ref = r.reference_latency_ms.mean if r.reference_latency_ms else 0.0
        performance = Performance(latency_ms=r.latency_ms.mean, reference_latency_ms=ref, speedup_factor=(ref / r.latency_ms.mean) if r.latency_ms.mean > 0 and ref else 0.0)
    log = (r.message + ("\n" + r.log if r.log else "")).strip()
    ev = Evaluation(
        status=status, environment=Environment(hardware=env.get("hardware", "unknown"), libs=env.get("libs", {})),
        timestamp=datetime.now(timezone.utc).isoformat(), log=log[:20000], correctness=correctness, performance=performance,
        kbot={**{k: v for k, v in r.model_dump(mode="json").items() if k not in ("uuid", "axes", "log")}, "solution_hash": solution.content_hash()},
    )
    return Trace(definition=definition.name, solution=solution.name, workload=workload, evaluation=ev)


Progress = Callable[[str, WorkloadResult | None], None]


def evaluate(
    definition: Definition,
    solution: Solution,
    workloads: list[Workload],
    out_dir: Path,
    cfg: RunConfig,
    *,
    baseline: Solution | None = None,
    definition_path: Path | None = None,
    resume: bool = False,
    progress: Progress | None = None,
    spares: Spares | None = None,
    trust: str = "candidate",
    declared_baselines: Any = (),
) -> Report:
    """Evaluate ``solution`` on ``workloads``; writes traces.jsonl and report.json into ``out_dir``.
    ``spares``: worker processes already started (``kbot eval-many``); used when their environment fits.
    Raises SchemaError for a run folder that cannot be used and sandbox.SandboxError when the sandbox
    is required and this machine cannot give one.
    ``trust="baseline"``: ``solution`` is one of the definition's declared baselines, looked up here in
    this checkout's ``definitions/<name>/baselines/`` by content hash (refused otherwise), and run
    without the candidate policy (harness/baselines.py). ``declared_baselines``: declared baselines
    (``harness.baselines.DeclaredBaseline``) measured beside the candidate on every workload it passes,
    each paired with it; one that cannot run here is listed with the reason."""
    lib_jobs, lib_runs, unavailable = _baseline_plan(definition, solution, cfg, trust, list(declared_baselines))
    out_dir = runfolder.prepare(Path(out_dir))
    # Filled from the worker's first message: the parent never imports torch (seconds saved per run).
    env: dict[str, Any] = {"hardware": "unknown", "libs": {}}
    started = datetime.now(timezone.utc).isoformat()
    report = Report(
        run_id=out_dir.name if resume else uuidlib.uuid4().hex[:12],
        definition=definition.name, solution=solution.name, solution_hash=solution.content_hash(),
        baseline=baseline.name if baseline else None, baseline_hash=baseline.content_hash() if baseline else None,
        device=DeviceInfo(kind=cfg.device, name="unknown", timer="cuda_events" if cfg.device == "cuda" else "cpu_monotonic",
                          note="" if cfg.device == "cuda" else "CPU timing (monotonic clock); Triton runs through its interpreter. Not a GPU measurement."),
        config={"trials": cfg.trials, "seed": cfg.seed, "timeout_s": cfg.timeout_s, "timing": cfg.timing, "overrides": cfg.config_overrides,
                **({"inputs": cfg.provenance} if cfg.provenance else {}), **({"gpu": cfg.gpu.record()} if cfg.gpu else {})},
        started=started, isolation={"mode": sandbox.check_mode(cfg.sandbox), "enforced": None, "workers": []},
        trust=trust, baselines=lib_runs,
    )
    previous = runfolder.read_text(out_dir, "traces.jsonl") if resume else None  # before anything is written
    runfolder.write_text(out_dir, "solution.json", solution.to_json(indent=2))
    if baseline:
        runfolder.write_text(out_dir, "baseline.json", baseline.to_json(indent=2))

    done: dict[str, WorkloadResult] = {}
    if previous is not None:
        kept_lines = []
        for line in previous.splitlines():
            try:
                t = Trace.model_validate_json(line)
            except Exception:  # noqa: BLE001 — a torn last line from a crash
                continue
            kb = (t.evaluation.kbot or {}) if t.evaluation is not None else {}
            # Only results of this very solution count, and a workload the total timeout never started
            # is measured now.
            if t.solution != solution.name or kb.get("solution_hash") != solution.content_hash() or kb.get("never_started"):
                continue
            done[t.workload.uuid] = WorkloadResult.model_validate({**kb, "uuid": t.workload.uuid, "axes": t.workload.axes})
            kept_lines.append(line)
        # Rewritten with the valid lines only, so the next append does not glue onto a torn one.
        runfolder.write_text(out_dir, "traces.jsonl", "".join(x + "\n" for x in kept_lines))
    else:
        runfolder.write_text(out_dir, "traces.jsonl", "")  # a fresh regular file, whatever was there

    by_uuid = {w.uuid: w for w in workloads}
    results: dict[str, WorkloadResult] = dict(done)

    def record(r: WorkloadResult) -> None:
        apply_observer_verdict(r, report)  # every path a result takes (a crash recorded by the parent too)
        results[r.uuid] = r
        trace = make_trace(definition, solution, by_uuid[r.uuid], r, env)
        runfolder.append_line(out_dir, "traces.jsonl", trace.to_json())
        if progress:
            progress("result", r)

    if unavailable:  # a declared baseline whose library or hardware is not here: nothing to measure
        report.unavailable = unavailable
        return _finish(report, workloads, results, out_dir)

    # ---- static guard: a rejected solution never runs (the candidate policy; not for a declared baseline)
    if cfg.guard and trust == TRUST_CANDIDATE:
        findings = static_guard(solution, definition)
        report.findings = findings
        if any(f.severity == "error" for f in findings):
            for w in workloads:
                if w.uuid not in results:
                    record(WorkloadResult(uuid=w.uuid, axes=dict(w.axes), status=Status.REJECTED, findings=findings,
                                          message="; ".join(f"[{f.rule}] {f.file or ''}:{f.line or ''} {f.message}" for f in findings if f.severity == "error")[:2000]))
            return _finish(report, workloads, results, out_dir)

    pending = [w for w in workloads if w.uuid not in results]
    if pending:
        # Before any worker starts: required and impossible here ends the run (SandboxError); auto
        # says so loudly and goes on; every worker then reports what it really got.
        missing = sandbox.preflight(cfg.sandbox, cfg.device)
        if missing or cfg.sandbox == "off":
            _warn_unsandboxed(report, missing or "--sandbox off")
    timeline = Timeline()
    report.config["timeline_s"] = timeline.marks  # the same list, filled as the run goes
    job_base = {
        "definition": definition.to_dict(), "definition_path": str(definition_path) if definition_path else None,
        "solution": solution.to_dict(), "baseline": baseline.to_dict() if baseline else None,
        "device": cfg.device, "seed": cfg.seed, "trials": cfg.trials, "timing": cfg.timing,
        "config_overrides": cfg.config_overrides, "dataset_root": cfg.dataset_root,
        "trust": trust, "library_baselines": lib_jobs,
    }
    total_deadline = time.monotonic() + cfg.total_timeout_s if cfg.total_timeout_s else float("inf")
    # The floor of an operator whose minimum work depends on its inputs (MoE routing) is counted from the
    # timed inputs, rebuilt here on a thread while the worker starts (harness/input_counts.py).
    counts = TimedCounts(definition, pending, seed=cfg.seed, definition_path=definition_path, config_overrides=cfg.config_overrides,
                         dataset_root=cfg.dataset_root) if pending and TimedCounts.wanted(definition) else None
    environ = worker_env(cfg.device, cfg.sandbox, sandbox_reads(cfg.dataset_root, definition, definition_path), gpu=cfg.gpu)
    observing = bool(pending) and needs_observer(cfg) and trust == TRUST_CANDIDATE
    # The first worker starts at once; when an observer pass runs, it runs concurrently and this worker
    # waits at its gate before its first timed call (start-up, build and correctness overlap).
    first: Worker | None = Worker({**job_base, "workloads": [w.model_dump(mode="json") for w in pending]}, environ, gated=observing, spares=spares) if pending else None
    timeline.mark("worker_started")
    if first is not None and spares is not None:
        report.config["spare_worker"] = first.from_spare  # started before this run (kbot eval-many)
    try:
        if observing:
            assert first is not None
            # It builds in its own scratch folder (every worker has one): two processes building one
            # CUDA extension in one folder race (one loads a .so the other is still writing).
            observe_job = {**job_base, "workloads": [pending[0].model_dump(mode="json")], "mode": "observe"}
            report.config["observe_workload"] = pending[0].uuid
            findings = observe_kernels(observe_job, environ, cfg, report, timeline, total_deadline, spares)
            if findings is None and report.config.get("observe") == "no result":  # a crash, a timeout: once more, the timing worker idle at its gate
                timeline.mark("observer_retry")
                findings = observe_kernels(observe_job, environ, cfg, report, timeline, total_deadline, spares)
            if findings is None:
                # A call that cannot be observed must not pass because it was not observed: results that
                # pass anyway are rejected (apply_observer_verdict); failing ones keep their status.
                report.config["observe"] = f"failed ({report.config.get('observe')})"
                findings = []
            timeline.mark("observed")
            if findings:
                report.findings += findings
                for w in pending:
                    record(WorkloadResult(uuid=w.uuid, axes=dict(w.axes), status=Status.REJECTED, findings=findings, message="; ".join(f"[{f.rule}] {f.message}" for f in findings)[:2000]))
                return _finish(report, workloads, results, out_dir)
            first.open_gate()
            timeline.mark("gate_opened")
        return _run_workers(first, pending, job_base, environ, definition, cfg, record, report, total_deadline, progress, env, timeline, workloads, results, out_dir, counts)
    finally:
        if first is not None:
            first.kill()  # a no-op when _run_workers already killed it


def _run_workers(first: Worker | None, pending: list[Workload], job_base: dict[str, Any], environ: dict[str, str], definition: Definition, cfg: RunConfig, record, report: Report, total_deadline: float, progress, env: dict[str, Any], timeline: Timeline, workloads: list[Workload], results: dict[str, WorkloadResult], out_dir: Path, counts: TimedCounts | None = None) -> Report:
    """Workers one after another until every pending workload has a result (a fresh one after a crash)."""
    while pending:
        if time.monotonic() > total_deadline:
            for w in pending:
                record(WorkloadResult(uuid=w.uuid, axes=dict(w.axes), status=Status.TIMEOUT, message="total timeout of the run reached before this workload started", never_started=True))
            break
        worker = first or Worker({**job_base, "workloads": [w.model_dump(mode="json") for w in pending]}, environ)
        first = None
        try:
            pending = _drive(worker, definition, pending, cfg, record, report, total_deadline, progress, env, timeline, counts)
        finally:
            worker.kill()
    return _finish(report, workloads, results, out_dir)


def _drive(worker: Worker, definition: Definition, pending: list[Workload], cfg: RunConfig, record, report: Report, total_deadline: float, progress, env: dict[str, Any], timeline: Timeline, counts: TimedCounts | None = None) -> list[Workload]:
    """Feed one worker until it finishes or fails; returns the workloads still to do."""
    remaining = list(pending)
    since = time.monotonic()  # when the phase the deadline bounds began (start-up, then each workload)
    deadline = min(since + cfg.startup_timeout_s, total_deadline)
    current: Workload | None = None
    record_result = record

    def record(r: WorkloadResult) -> None:  # noqa: F811 — every result of this worker says how it was isolated
        r.isolation = worker.isolation
        record_result(r)

    def fail_current(status: Status, message: str, seconds: float = 0.0) -> None:
        nonlocal remaining
        if current is None and not remaining:
            return
        target = current or remaining[0]
        record(WorkloadResult(uuid=target.uuid, axes=dict(target.axes), status=status, message=message, log=worker.log.take(), seconds=seconds))
        remaining = [w for w in remaining if w.uuid != target.uuid]

    def fail_all(status: Status, message: str, log: str | None = None) -> list[Workload]:
        """Every workload still to do shares one fate (a failed or hung build, a harness error)."""
        text = worker.log.take() if log is None else log
        for w in remaining:
            record(WorkloadResult(uuid=w.uuid, axes=dict(w.axes), status=status, message=message[:2000], log=text))
        return []

    while True:
        msg = worker.next_message(deadline)
        if msg is None:  # timed out
            worker.kill()
            ran = time.monotonic() - since
            # Which limit ended it: the run's total timeout cuts a workload short (say so, with how long it
            # ran) and is no finding about the workload; its own timeout is.
            total = f"the run's total timeout ({cfg.total_timeout_s:.0f} s) was reached {ran:.0f} s into " if deadline >= total_deadline else ""
            if current is None and report.build is None:
                return fail_all(Status.TIMEOUT, f"{total}build/import" if total else f"build/import did not finish within {cfg.startup_timeout_s:.0f} s")
            fail_current(Status.TIMEOUT, f"{total}this workload" if total else f"did not finish within {cfg.timeout_s:.0f} s", seconds=ran)
            return remaining
        try:
            kind = msg.get("type")
            if kind in ("env", "build", "ready", "result"):
                timeline.mark(kind if kind != "result" else f"result:{sum(m[0].startswith('result') for m in timeline.marks) + 1}", timeline.sent_at(worker, msg))
            if kind in ("eof", "garbage"):
                if kind == "eof":
                    try:
                        worker.proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:  # closed its channel but keeps running
                        worker.kill()
                else:
                    worker.kill()
                why = worker.exit_description() if kind == "eof" else msg.get("message", "bad message")
                if not remaining:
                    return []
                if current is None and report.build is None:
                    return fail_all(Status.RUNTIME_ERROR, f"the worker died while building/importing the solution ({why})")
                fail_current(Status.RUNTIME_ERROR, f"the worker died during this workload ({why})")
                return remaining
            if kind == "fatal":
                if msg.get("sandbox") is not None:
                    note_isolation(worker, msg.get("sandbox"), report, cfg, "timing")
                return fail_all(Status.RUNTIME_ERROR, f"harness error: {msg.get('message')}", str(msg.get("log", "")))
            if kind == "sandbox":
                note_isolation(worker, msg.get("isolation"), report, cfg, "timing")
            elif kind == "env":
                env.clear()
                env.update(msg.get("env") or {})
                report.environment = dict(env)
                report.config["ceilings"] = msg.get("ceilings")
                if isinstance(msg.get("startup_s"), dict):
                    report.config["worker_startup_s"] = msg["startup_s"]
                report.device.name = str(env.get("hardware", "unknown")).replace("_", " ")
            elif kind == "build" and msg.get("role") == "library":
                _library_built(report, msg)
            elif kind == "build" and msg.get("role") == "candidate" and isinstance(msg.get("unavailable"), str) and report.trust == TRUST_BASELINE:
                report.unavailable = msg["unavailable"][:500]  # the worker knows the GPU: e.g. another compute capability
                return []
            elif kind == "build":
                require_isolation(worker, report, cfg, "timing")
                res = BuildResult.model_validate(msg["result"])
                if msg.get("role") == "candidate":
                    report.build = res
                    if not res.ok:
                        first = res.errors[0] if res.errors else None
                        where = f"{first.file}:{first.line}: " if first and first.file else ""
                        return fail_all(Status.COMPILE_ERROR, f"{where}{first.message if first else 'build failed'}", res.log)
                elif not res.ok:
                    report.config["baseline_build_error"] = res.model_dump(mode="json")
                if progress:
                    progress("build", None)
            elif kind == "ready":
                pass
            elif kind == "start":
                current = next((w for w in remaining if w.uuid == msg.get("uuid")), None)
                since = time.monotonic()
                deadline = min(since + cfg.timeout_s, total_deadline)
                if progress and current is not None:
                    progress("start", None)
            elif kind == "result":
                r = WorkloadResult.model_validate(msg["result"])
                if current is None or r.uuid != current.uuid:
                    worker.kill()
                    fail_current(Status.REJECTED, "the worker reported a result for a workload it was not running")
                    return remaining
                apply_roofline(r, report, definition, current, counts)
                check_baselines(r, report)
                out = worker.log.take()
                if out:
                    r.log = (r.log + "\n" + out).strip()[-(LOG_HEAD + LOG_TAIL + 200):]
                record(r)
                remaining = [w for w in remaining if w.uuid != r.uuid]
                current = None
                since = time.monotonic()
                deadline = min(since + cfg.timeout_s, total_deadline)
            elif kind == "done":
                return fail_all(Status.RUNTIME_ERROR, "the worker finished without evaluating this workload")
        except sandbox.SandboxError:
            worker.kill()
            raise
        except Exception as e:  # noqa: BLE001 — a malformed message must not take the parent down
            worker.kill()
            fail_current(Status.RUNTIME_ERROR, f"malformed message from the worker ({type(e).__name__}: {str(e)[:300]})")
            return remaining


def note_isolation(worker: Worker, data: Any, report: Report, cfg: RunConfig, role: str) -> None:
    """A worker's sandbox record, sent before any candidate code ran in it: kept for its results and
    the report. Only the first counts (a later one would come from candidate code); in ``required``
    mode anything short of full isolation ends the run (SandboxError)."""
    if worker.isolation is not None:
        raise ValueError("a second sandbox message (the first was sent before the candidate was imported)")
    rec = _isolation_record(data)
    worker.isolation = rec
    report.isolation.setdefault("workers", []).append({"role": role, **rec})
    if rec["enforced"]:
        return
    if cfg.sandbox == "required":
        raise sandbox.SandboxError(f"the {role} worker could not be sandboxed: {sandbox.describe(rec)}")
    if cfg.sandbox != "off":  # off was said once, before the first worker started
        _warn_unsandboxed(report, sandbox.describe(rec))


def require_isolation(worker: Worker, report: Report, cfg: RunConfig, role: str) -> None:
    """Candidate code is about to run (a build message): the worker must have said how it is isolated."""
    if worker.isolation is None:
        note_isolation(worker, {"mode": cfg.sandbox, "enforced": False, "mechanism": "none",
                                "errors": ["the worker reported no sandbox before building"]}, report, cfg, role)


def _isolation_record(data: Any) -> dict[str, Any]:
    """A worker's isolation record cut to known, bounded fields."""
    d = data if isinstance(data, dict) else {}

    def strs(v: Any, n: int, width: int) -> list[str]:
        return [str(x)[:width] for x in v[:n]] if isinstance(v, list) else []

    abi = d.get("landlock_abi")
    rec: dict[str, Any] = {"mode": str(d.get("mode", ""))[:10], "enforced": d.get("enforced") is True,
                           "mechanism": str(d.get("mechanism", "none"))[:40],
                           "landlock_abi": abi if isinstance(abi, int) and not isinstance(abi, bool) else None,
                           "restricted": strs(d.get("restricted"), 20, 40)}
    for k, n, width in (("errors", 5, 300), ("rules_skipped", 10, 200)):
        if strs(d.get(k), n, width):
            rec[k] = strs(d.get(k), n, width)
    return rec


def _warn_unsandboxed(report: Report, why: str) -> None:
    """Loudly, once per reason and run: candidate code runs without (full) OS isolation."""
    warnings = report.isolation.setdefault("warnings", [])
    if why in warnings:
        return
    warnings.append(why)
    print(f"kbot: WARNING: candidate code runs without the OS sandbox: {why}. "
          "Use --sandbox required (or KBOT_SANDBOX=required) to refuse that.", file=sys.stderr, flush=True)


def needs_observer(cfg: RunConfig) -> bool:
    """The CUPTI observer pass exists on the GPU only (on the CPU there are no kernels or streams)."""
    return cfg.guard and cfg.device == "cuda"


def observe_kernels(job: dict[str, Any], environ: dict[str, str], cfg: RunConfig, report: Report, timeline: Timeline | None = None, total_deadline: float = float("inf"), spares: Spares | None = None) -> list[Finding] | None:
    """A separate worker makes one call under the CUPTI observer: GPU work on a side stream, or a cuda
    solution that never launches a kernel of its own, is REJECTED. None when the pass gave no verdict
    (a crash, a timeout, a failed build): the caller decides what that means."""
    worker = Worker(job, environ, spares=spares)
    deadline = min(time.monotonic() + cfg.startup_timeout_s + cfg.timeout_s, total_deadline)
    try:
        while True:
            msg = worker.next_message(deadline)
            if msg is None:  # not retried: a call that hangs under the observer would hang again
                report.config["observe"] = "no result: timed out"
                return None
            if msg.get("type") == "sandbox":
                try:
                    note_isolation(worker, msg.get("isolation"), report, cfg, "observer")
                except ValueError:
                    report.config["observe"] = "no result: a second sandbox message"
                    return None
                continue
            if msg.get("type") == "fatal" and msg.get("sandbox") is not None:
                note_isolation(worker, msg.get("sandbox"), report, cfg, "observer")
            if msg.get("type") == "build":
                require_isolation(worker, report, cfg, "observer")
            if msg.get("type") == "build" and msg.get("role") == "candidate" and not (msg.get("result") or {}).get("ok"):
                report.config["observe"] = "no result: the build failed"
                return None
            if msg.get("type") in ("eof", "garbage", "fatal", "done"):
                report.config["observe"] = "no result"
                return None
            if timeline is not None and msg.get("type") in ("build", "ready"):
                timeline.mark(f"observer:{msg['type']}", timeline.sent_at(worker, msg))
            if msg.get("type") == "observed":
                report.config["observe"] = "done"
                seen = _observer_seen(msg.get("seen"))
                if seen:
                    report.config["observe_seen"] = seen
                findings = [Finding.model_validate(f) for f in msg.get("findings", [])]
                # Let it exit on its own and wait for that: a profiler process killed mid-teardown kept
                # the GPU busy for seconds, and the first timed workloads of the timing worker read
                # 10-15x slow (H200, docs/measurements.md).
                try:
                    worker.proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    pass
                return findings
    finally:
        worker.kill()


def _observer_seen(seen: Any) -> dict[str, Any]:
    """What the observer says it saw (backend, counts, calls it could not read), cut to plain, bounded
    values: it comes from the candidate's process, so it is shown in the report and never trusted."""
    if not isinstance(seen, dict):
        return {}
    out: dict[str, Any] = {}
    if isinstance(seen.get("backend"), str):
        out["backend"] = seen["backend"][:40]
    for k in ("kernels", "streams"):
        if isinstance(seen.get(k), int) and not isinstance(seen.get(k), bool):
            out[k] = seen[k]
    for k in ("unparsed", "errors"):
        if isinstance(seen.get(k), list):
            out[k] = [str(x)[:80] for x in seen[k][:20]]
    return out


def apply_observer_verdict(r: WorkloadResult, report: Report) -> None:
    """A result that passes although the observer could not observe a call is REJECTED: otherwise a
    candidate could dodge the kernel and stream checks by failing only under the observer. When the
    observed workload fails in the normal run too (a plain bug, not a dodge), the others stand."""
    if not str(report.config.get("observe", "")).startswith("failed"):
        return
    if r.uuid == report.config.get("observe_workload"):
        report.config["observe_workload_status"] = r.status.value
    if report.config.get("observe_workload_status") not in (None, Status.PASSED.value) and r.uuid != report.config.get("observe_workload"):
        return
    if r.status is Status.PASSED:
        f = Finding(rule="observer-failed", message="the call passes when run normally but gave no result twice under the CUPTI observer",
                    why="the kernel and stream checks run in the observer; a solution that fails only there has not been checked")
        r.findings.append(f)
        r.status, r.message, r.correctness = Status.REJECTED, f"[{f.rule}] {f.message}", None


def apply_roofline(r: WorkloadResult, report: Report, definition: Definition, workload: Workload, counts: TimedCounts | None = None) -> None:
    """Place a passing result on the roofline, here in the parent where the candidate cannot reach it;
    a median below the physical floor is impossible and is REJECTED, never reported as a win. ``counts``:
    what the timed inputs make a call move, for a definition whose floor depends on them (without
    them its formulas' lower bounds stand in, and the roofline says why)."""
    from .ceilings import Ceilings
    from .guard.floor import roofline_floor_check
    from .roofline import roofline

    if r.status is not Status.PASSED:
        r.kernel_time = None
        return
    if r.latency_ms is None:
        return
    if not (r.latency_ms.median > 0):  # zero, negative or NaN: not a time any kernel can take
        r.findings.append(Finding(rule="below-roofline", message=f"median {r.latency_ms.median} ms is not a possible time", why="a time at or below zero is a measurement that was tampered with"))
        r.status, r.message, r.correctness, r.kernel_time = Status.REJECTED, "[below-roofline] impossible median", None, None
        return
    c = report.config.get("ceilings")
    if not c or "error" in c:
        from .ceilings import documented_ceilings  # no measurement: the documented ceilings still give a floor

        doc = documented_ceilings(report.device.name) if report.device.kind == "cuda" else None
        if doc is None:
            check_kernel_time(r)
            check_energy(r)
            return
        c = doc.model_dump(mode="json")
    given, why = counts.get(workload.uuid) if counts is not None else (None, "")
    r.roofline = roofline(definition, definition.resolve_axes(workload.axes), Ceilings.model_validate(c), r.latency_ms.median,
                          absent=workload.absent_inputs(), given=given)
    if given is None and why and getattr(r.roofline, "input_counts_from", None):
        r.roofline.input_counts_from = f"lower bounds ({why})"
    # The work's floor alone: the launch term is a device figure, not a physical law a time must obey.
    finding = roofline_floor_check(r.latency_ms.median, physical_floor_ms(r.roofline)) if report.device.kind == "cuda" else None
    if finding is not None:
        r.findings.append(finding)
        r.status = Status.REJECTED
        r.message = f"[{finding.rule}] {finding.message}"
        r.correctness = None
        r.kernel_time = None
        return
    check_kernel_time(r)
    check_energy(r)


# A board's power while a kernel runs back to back: more than this (or a non-positive figure) is not a
# measurement (an H200 is rated 700 W; the margin leaves room for boards to come).
_MAX_BOARD_W = 3000.0


def check_energy(r: WorkloadResult) -> None:
    """The energy figures come from the worker the candidate ran in: here in the parent each must be a
    positive, finite number whose implied power (energy per call over the synchronized wall time per
    call) a board can draw, or both are withheld with the reason (never a rejection: energy only
    breaks speed ties)."""
    prof = dict(r.profile or {})
    wall = prof.get("wall_ms_per_call")
    for name in ("energy_j_per_call", "baseline_energy_j_per_call"):
        e = getattr(r, name)
        if e is None:
            continue
        ok = isinstance(e, (int, float)) and math.isfinite(e) and e > 0
        if ok and isinstance(wall, (int, float)) and wall > 0:
            ok = e / (wall / 1e3) <= _MAX_BOARD_W
        if not ok:
            r.energy_j_per_call = r.baseline_energy_j_per_call = None
            prof["energy_missing"] = f"withheld: {name} {e!r} J is not possible beside {wall!r} ms per call"
            r.profile = prof
            return


def check_kernel_time(r: WorkloadResult) -> None:
    """The CUPTI kernel time comes from the worker the candidate ran in: here in the parent each figure
    must sit inside its event time (kernels run between their events), the candidate's must sit above
    the physical floor and short of its event time by no more than launch overhead (every timed call was
    enqueued before its hold ended, so only the launch floor lies between the start event and the first
    kernel), or it is withheld with the reason. Never a rejection: the event time, already checked, is
    what decisions use."""
    from .guard.floor import roofline_floor_check

    kt = r.kernel_time
    if kt is None or kt.latency_ms is None or r.latency_ms is None:
        return
    k, e = kt.latency_ms.median, r.latency_ms.median
    host_bound = bool((r.profile or {}).get("late_kept"))
    why = ""
    if not (0 < k <= 1.05 * e + 0.001):
        why = f"kernel time {k:.6g} ms is not possible beside the event time {e:.6g} ms"
    elif not host_bound and e - k > max(_LAUNCH_GAP_MS, 0.2 * e):
        why = f"kernel time {k:.6g} ms is {e - k:.6g} ms short of the event time {e:.6g} ms: more than launch overhead"
    elif r.roofline is not None and physical_floor_ms(r.roofline) and roofline_floor_check(k, physical_floor_ms(r.roofline)) is not None:
        why = f"kernel time {k:.6g} ms is below the physical floor {physical_floor_ms(r.roofline):.6g} ms"
    if why:
        r.kernel_time = type(kt)(withheld=why)
        return
    notes = [kt.withheld] if kt.withheld else []
    for part, event in (("baseline", r.baseline_latency_ms), ("reference", r.reference_latency_ms)):
        own = getattr(kt, f"{part}_latency_ms")
        if own is not None and (event is None or not (0 < own.median <= 1.05 * event.median + 0.001)):
            setattr(kt, f"{part}_latency_ms", None)
            setattr(kt, f"speedup_vs_{part}", None)
            notes.append(f"{part}: kernel time {own.median:.6g} ms is not possible beside its event time")
    kt.withheld = "; ".join(notes)


# Event time minus kernel time for a call enqueued before its hold ended: the launch floor, 3.3-3.6 µs on
# the H200 (docs/measurements.md); 15 µs leaves room for slower launch paths without hiding real work.
_LAUNCH_GAP_MS = 0.015


def _baseline_plan(definition: Definition, solution: Solution, cfg: RunConfig, trust: str, declared: list[Any]) -> tuple[list[dict[str, Any]], list[BaselineRun], str | None]:
    """The worker's list of declared baselines to measure beside the candidate, the report's record of
    each (those that cannot run here already marked, with the reason), and why the solution itself
    cannot run here (a declared baseline run on its own). The baseline trust level is granted only to a
    solution found in this checkout's baselines folder of the definition (harness/baselines.py)."""
    from .baselines import TRUST_LEVELS, declared_match, unavailable_reason
    from .schema import SchemaError

    if trust not in TRUST_LEVELS:
        raise ValueError(f"trust must be one of {TRUST_LEVELS}, not {trust!r}")
    unavailable = None
    if trust == TRUST_BASELINE:
        if declared_match(definition.name, solution) is None:
            raise SchemaError(f"'{solution.name}' is not a baseline declared in definitions/{definition.name}/baselines/ of this checkout: "
                              "the baseline trust level comes from where the solution was found, never from the solution")
        unavailable = unavailable_reason(solution, cfg.device)
    jobs, runs = [], []
    for b in declared:
        if declared_match(definition.name, b.solution) is None:
            raise SchemaError(f"'{b.solution.name}' is not a baseline declared for {definition.name} in this checkout")
        why = unavailable_reason(b.solution, cfg.device)
        runs.append(BaselineRun(name=b.name, solution=b.solution.name, solution_hash=b.solution.content_hash(), dependencies=b.dependencies,
                                state="could not run" if why else "ran", reason=why or ""))
        if not why:
            jobs.append({"name": b.name, "solution": b.solution.to_dict()})
    return jobs, runs, unavailable


def _library_built(report: Report, msg: dict[str, Any]) -> None:
    """A declared baseline's build in the worker: could not run here (an import failure counts), or failed."""
    run = next((b for b in report.baselines if b.name == msg.get("name")), None)
    if run is None:
        return
    if isinstance(msg.get("unavailable"), str):
        run.state, run.reason = "could not run", msg["unavailable"][:500]
        return
    try:
        res = BuildResult.model_validate(msg.get("result"))
    except ValueError:
        run.state, run.reason = "failed", "malformed build message"
        return
    if not res.ok:
        first = res.errors[0] if res.errors else None
        run.state, run.reason = "failed", (first.message if first else "build failed")[:500]


def check_baselines(r: WorkloadResult, report: Report) -> None:
    """The declared baselines' figures come from the candidate's process, so they are checked here in the
    parent: only for a passing candidate, only baselines that built, a median above the physical floor
    (below it is a broken measurement, never a win for anyone), a GPU time inside the event time."""

    from .guard.floor import roofline_floor_check

    known = {b.name for b in report.baselines if b.state == "ran"}
    if r.status is not Status.PASSED:
        r.baselines = {}
        return
    for name in list(r.baselines):
        b = r.baselines[name]
        if name not in known:
            del r.baselines[name]
            continue
        if b.status is not Status.PASSED:
            b.latency_ms = b.speedup = b.kernel_speedup = b.kernel_time_ms = None
            continue
        med = b.latency_ms.median if b.latency_ms else None
        floor = physical_floor_ms(r.roofline) if r.roofline is not None and report.device.kind == "cuda" else None
        if med is None or not med > 0 or b.speedup is None or not (math.isfinite(b.speedup.median) and b.speedup.median > 0) or (floor and roofline_floor_check(med, floor) is not None):
            b.status, b.message = Status.REJECTED, f"impossible measurement (median {med} ms{f', floor {floor:.4g} ms' if floor else ''})"
            b.latency_ms = b.speedup = b.kernel_speedup = b.kernel_time_ms = None
            continue
        if b.kernel_time_ms is not None and not (0 < b.kernel_time_ms <= 1.05 * med + 0.001):
            b.kernel_time_ms, b.kernel_speedup = None, None


def static_guard(solution: Solution, definition: Definition) -> list[Finding]:
    from .guard.static import check_solution

    return check_solution(solution, definition)


def _finish(report: Report, workloads: list[Workload], results: dict[str, WorkloadResult], out_dir: Path) -> Report:
    report.workloads = [results[w.uuid] for w in workloads if w.uuid in results]
    report.finished = datetime.now(timezone.utc).isoformat()
    iso = report.isolation
    workers = iso.get("workers") or []
    iso["enforced"] = all(w.get("enforced") for w in workers) if workers else None
    weakest = next((w for w in workers if not w.get("enforced")), workers[0] if workers else None)
    iso["summary"] = sandbox.describe(weakest) if workers else "no candidate code ran (nothing to isolate)"
    runfolder.write_text(out_dir, "report.json", report.to_json())
    return report
