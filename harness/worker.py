"""The isolated worker: one process that builds a solution and evaluates workloads, nothing else.

The parent (harness.runner) starts ``python -m harness.worker`` with the job as JSON on stdin, the
candidate's stdout/stderr going to a pipe it drains and truncates, and results written as JSON lines to
a separate file descriptor (``KBOT_RESULT_FD``). The parent owns every timeout: a worker that hangs,
crashes, exits or poisons its CUDA context is killed and replaced, and the workload it was on gets a
TIMEOUT or RUNTIME_ERROR trace.

Everything the harness relies on inside this process (timers, synchronize, comparisons) is captured
before the candidate is imported (see harness.measure); the static guard keeps candidates from reaching
this module, its file descriptors or the interpreter's internals.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

def _open_channel() -> Any:
    """The result channel, opened before any candidate code runs: moved to a random high descriptor and
    its number removed from the environment, so candidate code cannot simply look it up."""
    import fcntl
    import secrets

    fd = int(os.environ.pop("KBOT_RESULT_FD", "-1"))
    if fd < 0:
        return sys.__stdout__
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 256 + secrets.randbelow(4096))
    os.close(fd)
    return os.fdopen(high, "w", buffering=1)


_out = _open_channel()
_NONCE: list[str] = []  # the run's nonce, read from stdin; every message carries it
_GATE: list[int] = []  # a private copy of stdin where the parent says "go" before the first timed call


def _detach_stdin(keep_gate: bool) -> None:
    """Give the candidate /dev/null as stdin in every worker (observer, gated or not: the same fd 0, so
    it cannot tell which it is in), keeping the rest of stdin (the gate) on a private descriptor when
    gated, so candidate code can neither read the gate nor wait on it."""
    import fcntl
    import secrets

    if keep_gate:
        _GATE.append(fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 256 + secrets.randbelow(4096)))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


_AHEAD = bytearray()  # bytes read past the job line (the gate's "go" when it was already in the pipe)


def read_line_keeping_rest(fd: int) -> bytes:
    """One line from ``fd``, keeping whatever was read past it for the gate: a buffered reader would
    swallow the gate's "go" that follows the job on the same pipe, and the gate would wait for ever."""
    data = bytearray(_AHEAD)
    _AHEAD.clear()
    while b"\n" not in data:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        data += chunk
    line, nl, rest = bytes(data).partition(b"\n")
    _AHEAD.extend(rest)
    return line + nl


def wait_gate() -> bool:
    """Block until the parent opens the gate. The parent starts this worker while a separate observer
    worker makes its one CUPTI-observed call, so start-up, build and the first correctness trials overlap
    with it; timing must not (two processes on one GPU). True on "go", False when the parent closed it."""
    if not _GATE:
        return True
    fd = _GATE.pop()
    line = read_line_keeping_rest(fd)
    os.close(fd)
    return line.strip() == b"go"


_T_PROCESS = time.monotonic()  # as early as the worker can take it: its messages say when they were sent
# A spare (harness.runner.Spares) is started long before its job: its clock starts at the job, and its
# environment queries run then, so they describe the GPU while its own candidate runs.
_SPARE = os.environ.get("KBOT_SPARE") == "1"
_GPU_RUN = os.environ.get("CUDA_VISIBLE_DEVICES") != ""


def send(msg: dict[str, Any]) -> None:
    _out.write(json.dumps({**msg, "t": round(time.monotonic() - _T_PROCESS, 3), "nonce": _NONCE[0] if _NONCE else ""}, allow_nan=True) + "\n")
    _out.flush()


from .env import prefetch  # noqa: E402

# git reads the repository, so it starts before the sandbox closes; nvidia-smi (a GPU run) queries the
# driver while torch imports, except in a spare, whose job may come much later.
prefetch(gpu=_GPU_RUN and not _SPARE, git=True)

from .ceilings import cache_dir  # noqa: E402
from .sandbox import Sandbox, SandboxError  # noqa: E402

# The sandbox closes here, while the process has one thread: Landlock binds the calling thread and the
# threads it starts, and torch starts threads on import (harness/sandbox.py). The ceilings cache is
# named first, because HOME moves into the scratch folder.
os.environ.setdefault("KBOT_CACHE", str(cache_dir().parent))
_SANDBOX = Sandbox.from_env()
_SANDBOX.extra_read.append(str(cache_dir()))
_SANDBOX_ERROR: list[str] = []
_T_SANDBOX = time.monotonic()
try:
    _SANDBOX.enter()
except SandboxError as _e:
    _SANDBOX_ERROR.append(str(_e))
_SANDBOX.use_scratch()
_T_MODULE = time.monotonic()
import torch  # noqa: E402

_T_TORCH = time.monotonic()

from . import compare as cmp  # noqa: E402
from . import guard_hooks  # noqa: E402
from .baselines import unavailable_reason  # noqa: E402
from .build import build, python_error  # noqa: E402
from .defconfig import DefinitionConfig, load_config  # noqa: E402
from .inputs import TIMED_TRIAL, allocate_outputs, clone_inputs, make_inputs, seed_for  # noqa: E402
from .measure import Refresher, Samples, Timer, TimingConfig, call_solution, refreshable_inputs, wait_until_quiet  # noqa: E402
from .report import BaselineResult, BuildError, BuildResult, Correctness, Finding, KernelTime, LaunchSignature, WorkloadResult  # noqa: E402
from .schema import Definition, Solution, Status, Workload  # noqa: E402
from .stats import paired_ratio, summarize  # noqa: E402

_tensor_equal = torch.equal
_isnan = torch.isnan


def load_reference(definition: Definition, config: DefinitionConfig):
    if config.reference_fn:
        from .trusted_fn import load_trusted_fn

        return load_trusted_fn(config.reference_fn, config.root)
    ns: dict[str, Any] = {"__name__": f"kbot_reference_{definition.name}"}
    exec(compile(definition.reference, f"<reference {definition.name}>", "exec"), ns)  # noqa: S102 — trusted definition
    return ns["run"]


def run_reference(ref, definition: Definition, inputs: dict[str, Any], *, copy: bool = True) -> dict[str, Any]:
    """The reference's outputs. ``copy`` gives it its own copy of the inputs (it may write them); the
    timing loop passes copy=False so the clone is not timed as part of the reference."""
    # Full precision for the reference whatever the candidate set: TF32 would make it the wrong yardstick.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    with torch.no_grad():
        return cmp.normalize_outputs(ref(**(clone_inputs(inputs) if copy else inputs)), definition)


def inputs_unchanged(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    for name, b in before.items():
        a = after[name]
        if isinstance(b, torch.Tensor):
            if not isinstance(a, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
                return name
            if b.dtype.is_floating_point and b.dtype not in (torch.float8_e4m3fn, torch.float8_e5m2):
                same = _tensor_equal(_isnan(a), _isnan(b)) and _tensor_equal(torch.nan_to_num(a), torch.nan_to_num(b))
            else:
                same = _tensor_equal(a.view(torch.uint8) if a.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) else a, b.view(torch.uint8) if b.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) else b)
            if not same:
                return name
        elif a != b:
            return name
    return None


class Evaluator:
    def __init__(self, job: dict[str, Any]):
        self.job = job
        self.definition = Definition.model_validate(job["definition"])
        dpath = job.get("definition_path")
        self.config = load_config(self.definition.name, Path(dpath) if dpath else None, job.get("config_overrides") or {})
        if job.get("trials"):
            self.config.trials = int(job["trials"])
        self.device = torch.device(job["device"])
        self.seed = int(job.get("seed", 0))
        self.timing = TimingConfig(**(job.get("timing") or {}))
        self.dataset_root = Path(job["dataset_root"]) if job.get("dataset_root") else None
        # The worker's private scratch folder (made by the parent, outside the run folder; the only
        # place this process may write), else what the job names (a worker started by hand).
        self.workdir = _SANDBOX.scratch or Path(job["workdir"])
        self.reference = load_reference(self.definition, self.config)
        self.quiet: dict[str, Any] | None = None
        self.trust = job.get("trust") or "candidate"
        self.libs: list[tuple[str, Solution, Any]] = []  # declared baselines measured beside the candidate

    # -------------------------------------------------------------------------------------------
    def build_all(self) -> bool:
        self.solution = Solution.model_validate(self.job["solution"])
        self.guard = guard_hooks.Runtime(self.solution, (self.workdir / "candidate" / "src").resolve(), trust=self.trust)
        self.guard.warm_runtime(self.device)
        if self.trust == "baseline":
            why = unavailable_reason(self.solution, self.device.type, _capability(self.device))
            if why:
                send({"type": "build", "role": "candidate", "unavailable": why,
                      "result": BuildResult(ok=False, language=self.solution.spec.language.value, errors=[BuildError(message=why)]).model_dump(mode="json")})
                return False
        self.tracer = None
        if self.device.type == "cuda" and self.timing.kernel_time and self.job.get("mode") != "observe":
            # Before any solution is imported: the CUPTI library must be the one torch loaded.
            from . import cupti_activity

            self.tracer = cupti_activity.tracer()
        # The last step before any code that is not the harness's own (baselines are trusted authors'
        # code, candidates untrusted; both run sandboxed): the seccomp filter on every thread (no sockets),
        # and the parent learns what isolation this process has (SandboxError in required mode if incomplete).
        _SANDBOX.seal()
        send({"type": "sandbox", "isolation": _SANDBOX.record()})
        if self.job.get("mode") != "observe":
            self.build_libraries()  # trusted: before the integrity snapshot and the thread baseline
        if self.trust == "baseline":
            # Trusted code is imported before the snapshot, like the libraries above: what it sets up on
            # import is the library's own (torch.compile wraps torch.manual_seed when Dynamo loads); what
            # it changes while it is called is still caught.
            self.fn, res = build(self.solution, self.workdir / "candidate", device=self.device.type)
            self.guard.before_import()
        else:
            self.guard.before_import()
            self.fn, res = build(self.solution, self.workdir / "candidate", device=self.device.type)
        send({"type": "build", "role": "candidate", "result": res.model_dump(mode="json")})
        if not res.ok:
            return False
        self.baseline_fn = None
        self.baseline = None
        if self.job.get("baseline") and self.job.get("mode") != "observe":  # the observer calls the candidate only
            self.baseline = Solution.model_validate(self.job["baseline"])
            self.baseline_fn, bres = build(self.baseline, self.workdir / "baseline", device=self.device.type)
            send({"type": "build", "role": "baseline", "result": bres.model_dump(mode="json")})
            if not bres.ok:
                self.baseline_fn = None
        return True

    def build_libraries(self) -> None:
        """The declared baselines to measure beside the candidate (trusted: the parent found them in the
        definition's baselines folder). One that cannot run here, or whose library fails to import, is
        reported as such and left out; it is never the candidate's failure."""
        capability = _capability(self.device)
        for i, lib in enumerate(self.job.get("library_baselines") or []):
            sol = Solution.model_validate(lib["solution"])
            why = unavailable_reason(sol, self.device.type, capability)
            fn, res = (None, None) if why else build(sol, self.workdir / f"library-{i}", device=self.device.type)
            if res is not None and not res.ok and res.errors and res.errors[0].message.startswith(("ModuleNotFoundError", "ImportError")):
                why = f"its library does not import here ({res.errors[0].message[:300]})"
            send({"type": "build", "role": "library", "name": lib["name"], "unavailable": why,
                  "result": res.model_dump(mode="json") if res is not None else None})
            if fn is not None and why is None:
                self.libs.append((str(lib["name"]), sol, fn))

    def _call(self, fn, sol: Solution, inputs: dict[str, Any], axes: dict[str, int]):
        outputs = allocate_outputs(self.definition, axes, self.device) if sol.spec.destination_passing_style else None
        return outputs, (lambda: call_solution(fn, self.definition, inputs, outputs))

    def evaluate(self, w: Workload) -> WorkloadResult:
        t0 = time.monotonic()
        axes = self.definition.resolve_axes(w.axes)
        res = WorkloadResult(uuid=w.uuid, axes=dict(w.axes), status=Status.PASSED)
        corr = Correctness(trials=0)
        dps = self.solution.spec.destination_passing_style
        mk = lambda trial: make_inputs(self.definition, w, seed=seed_for(self.seed, w.uuid, trial), device=self.device, config=self.config, dataset_root=self.dataset_root)  # noqa: E731

        # ---- correctness: several trials, fresh inputs each, candidate runs before the reference
        self.guard.record_launches(True)  # their launch signatures, for the profiler (never the timed calls)
        earlier: list[Any] = []  # outputs returned by earlier trials: a fresh call must not hand them back
        trial_refs: list[dict[str, Any]] = []  # the reference's outputs per trial, for the declared baselines
        for trial in range(self.config.trials):
            pristine = mk(trial)
            cand_inputs = clone_inputs(pristine)
            outputs, call = self._call(self.fn, self.solution, cand_inputs, axes)
            try:
                got = call()
                self._sync()
            except Exception as e:  # noqa: BLE001
                errs = python_error(e, (self.workdir / "candidate" / "src").resolve())
                status = Status.COMPILE_ERROR if _is_compile_error(e) else Status.RUNTIME_ERROR
                return self._fail(res, status, f"{errs[0].file or ''}:{errs[0].line or ''} {errs[0].message}".strip(), t0, log=traceback.format_exc()[-6000:], extra={"errors": [x.model_dump() for x in errs]})
            findings = self.guard.after_call(got, cand_inputs, self.definition, axes, previous=earlier if not dps else ())
            if findings:
                return self._reject(res, findings, t0)
            earlier += [v for v in got.values() if isinstance(v, torch.Tensor)]
            changed = inputs_unchanged(pristine, cand_inputs)
            if changed:
                return self._reject(res, [Finding(rule="input-mutation", message=f"the solution modified its input '{changed}'", why="a kernel that writes its inputs can make the reference agree with a wrong answer")], t0)
            ref_out = run_reference(self.reference, self.definition, pristine)
            if self.libs:
                trial_refs.append(ref_out)
            r = cmp.compare(got, ref_out, definition=self.definition, axes=axes, config=self.config, inputs=pristine)
            corr.trials += 1
            corr.add_checks(r.checks)  # kbot's stricter checks beside the verdict (their own lines, never the status)
            corr.max_absolute_error = max(corr.max_absolute_error, r.max_absolute_error)
            corr.max_relative_error = max(corr.max_relative_error, r.max_relative_error)
            corr.matched_ratio = r.matched_ratio if corr.matched_ratio is None or r.matched_ratio is None else min(corr.matched_ratio, r.matched_ratio)
            if not r.ok:
                corr.failed_trials += 1
                corr.detail = r.message
                res.correctness = corr if r.status is Status.INCORRECT_NUMERICAL else None
                return self._fail(res, r.status, f"trial {trial}: {r.message}", t0)
        res.correctness = corr
        self.guard.record_launches(False)
        t_corr = time.monotonic()
        if not wait_gate():
            raise SystemExit(0)  # the parent decided (an observer finding): nothing more to do here
        t_gate = time.monotonic()
        # Before every workload's timing (a few ms): another context on the GPU (a process that exited
        # but whose context is still being torn down, a neighbour's job) makes a few-µs kernel read slow.
        self.quiet = wait_until_quiet(self.device)
        t_quiet = time.monotonic()

        # ---- timing: fresh values per call, L2 flushed, timed outputs re-checked
        inputs = mk(TIMED_TRIAL)
        built = set()
        if self.config.builder:
            built = set(self.definition.inputs)  # builder-made inputs stay as generated
        refresher = Refresher(refreshable_inputs(self.definition, w.inputs, self.config.inputs, built), torch.Generator(device=self.device).manual_seed(seed_for(self.seed, w.uuid, 0, "refresh") % (1 << 62)))
        timer = Timer(self.device, self.timing, refresher, seed_for(self.seed, w.uuid, 0, "timer"), tracer=self.tracer)
        outs = []
        fns = []
        o, f = self._call(self.fn, self.solution, inputs, axes)
        outs.append(o)
        fns.append(f)
        if self.baseline_fn is not None:
            o, f = self._call(self.baseline_fn, self.baseline, inputs, axes)
            outs.append(o)
            fns.append(f)
        # Inputs that keep their values across timed calls (structured ones, scalars) must still hold
        # them afterwards: a kernel may not preprocess or cache into its inputs while being timed.
        frozen = {n: v.clone() for n, v in inputs.items() if isinstance(v, torch.Tensor) and n not in refresher.names}
        try:
            samples = timer.run(fns, inputs, outs, energy=True)
        except Exception as e:  # noqa: BLE001
            return self._fail(res, Status.RUNTIME_ERROR, f"during timing: {type(e).__name__}: {e}", t0, log=traceback.format_exc()[-6000:])
        changed = next((c for c in (inputs_unchanged(frozen, {n: s[n] for n in frozen}) for s in samples[0].input_sets or [inputs]) if c), None)
        samples[0].input_sets = []  # the extra address sets are not needed past this check: free them
        if changed:
            return self._reject(res, [Finding(rule="input-mutation", message=f"the solution modified its input '{changed}' while being timed", why="a kernel that writes its inputs can precompute or cache into them between timed calls")], t0)
        for rin, rout in samples[0].rechecks:
            ref_out = run_reference(self.reference, self.definition, rin)
            r = cmp.compare(rout, ref_out, definition=self.definition, axes=axes, config=self.config, inputs=rin)
            if not r.ok:
                return self._reject(res, [Finding(rule="timed-output-mismatch", message=f"an output produced during timing was wrong: {r.message}", why="a kernel that is right while checked and wrong (or cached) while timed has not earned its time")], t0)
        findings = self.guard.after_timing()
        if findings:
            return self._reject(res, findings, t0)
        if not samples[0].times_ms:  # every call arrived after its hold ended and the budget ran out first
            return self._fail(res, Status.RUNTIME_ERROR, f"no timed call could be measured: all {samples[0].late_dropped} were still being enqueued when the GPU hold in front of them ended", t0)
        res.latency_ms = summarize(samples[0].times_ms)
        t_timed = time.monotonic()
        if len(samples) > 1:
            res.baseline_latency_ms = summarize(samples[1].times_ms)
            res.speedup_vs_baseline = paired_ratio(samples[1].times_ms, samples[0].times_ms)
        res.energy_j_per_call = samples[0].energy_j_per_call
        if len(samples) > 1:
            res.baseline_energy_j_per_call = samples[1].energy_j_per_call

        # ---- the reference, timed the same way (fewer iterations: references can take seconds)
        ref_inputs = mk(TIMED_TRIAL)
        ref_fn = lambda: run_reference(self.reference, self.definition, ref_inputs, copy=False)  # noqa: E731
        # 0.1 s of sampling: the reference only gives speedup_vs_reference (the paired --baseline ratio is
        # the precise comparison), and at 0.25 s it was ~1.2 s of every rmsnorm candidate's overhead.
        rs = None
        try:
            rs = timer.run([ref_fn], ref_inputs, [None], budget_s=min(self.timing.budget_s, 0.1), min_iters=10, recheck=0, warmup=2)
            res.reference_latency_ms = summarize(rs[0].times_ms)
            res.speedup_vs_reference = res.reference_latency_ms.median / res.latency_ms.median if res.latency_ms.median > 0 else None
        except Exception as e:  # noqa: BLE001 — a reference failure is ours, not the candidate's
            res.message = f"reference timing failed: {type(e).__name__}: {e}"
        if self.device.type == "cuda" and self.timing.kernel_time:
            res.kernel_time = kernel_time(samples, rs[0] if rs else None, self.tracer is not None)
        t_ref = time.monotonic()
        for name, sol, fn in self.libs:
            res.baselines[name] = self.measure_library(sol, fn, axes, mk, trial_refs, timer, inputs, frozen)
        t_libs = time.monotonic() - t_ref
        res.seconds = time.monotonic() - t0
        # Where the workload's seconds went: what the harness-overhead figure in docs/measurements.md is made of.
        phases = {"correctness": t_corr - t0, "gate_wait": t_gate - t_corr, "quiet_wait": t_quiet - t_gate, "timing": t_timed - t_quiet, "reference_timing": t_ref - t_timed}
        if self.libs:
            phases["baselines"] = t_libs
        if self.quiet is not None and not self.quiet["quiet"]:
            _add_note(res, f"the GPU was busy with other work when timing began (tiny-kernel probe medians {self.quiet['medians_ms'][-3:]} ms after {self.quiet['waited_s']} s): times may read high")
        if samples[0].late_kept:
            _add_note(res, f"host-bound: {samples[0].late_kept} timed calls were still being enqueued when the longest GPU hold "
                           f"({samples[0].hold_cycles} cycles) ended, so their times include host time (does the call synchronize?)")
        res.profile = {"wall_ms_per_call": samples[0].wall_ms_per_call, "rechecked_outputs": len(samples[0].rechecks), "address_sets": samples[0].sets, "quiet_check": self.quiet,
                       "sm_clock_mhz": samples[0].sm_clock_mhz(), "hold_cycles": samples[0].hold_cycles,
                       "late_dropped": samples[0].late_dropped, "late_kept": samples[0].late_kept,
                       "cupti_s": round(samples[0].cupti_s + (rs[0].cupti_s if rs else 0.0), 4),
                       "energy_missing": samples[0].energy_missing or None,
                       "phase_s": {k: round(v, 4) for k, v in phases.items()}}
        return res

    def measure_library(self, sol: Solution, fn, axes: dict[str, int], mk, trial_refs: list[dict[str, Any]], timer: Timer,
                        inputs: dict[str, Any], frozen: dict[str, Any]) -> BaselineResult:
        """One declared baseline on this workload, after the candidate passed it: its outputs on the
        candidate's trial inputs against the reference's, its inputs unchanged, then timed interleaved
        with the candidate (a pass of its own, so the candidate's and the champion's figures above are
        untouched by it). Trusted code, so none of the candidate policy; a failure is the baseline's."""
        try:
            for trial, ref_out in enumerate(trial_refs):
                pristine = mk(trial)
                own = clone_inputs(pristine)
                _, call = self._call(fn, sol, own, axes)
                got = call()
                self._sync()
                changed = inputs_unchanged(pristine, own)
                if changed:
                    return BaselineResult(status=Status.REJECTED, message=f"trial {trial}: it modified its input '{changed}'")
                r = cmp.compare(got, ref_out, definition=self.definition, axes=axes, config=self.config, inputs=pristine)
                if not r.ok:
                    return BaselineResult(status=r.status, message=f"trial {trial}: {r.message}"[:2000])
            o_c, f_c = self._call(self.fn, self.solution, inputs, axes)
            o_b, f_b = self._call(fn, sol, inputs, axes)
            samples = timer.run([f_c, f_b], inputs, [o_c, o_b], recheck=0)
            changed = next((c for c in (inputs_unchanged(frozen, {n: st[n] for n in frozen}) for st in samples[0].input_sets or [inputs]) if c), None)
            samples[0].input_sets = []
            if changed:
                return BaselineResult(status=Status.REJECTED, message=f"the input '{changed}' changed while it was timed")
            if not samples[1].times_ms or not samples[0].times_ms:
                return BaselineResult(status=Status.RUNTIME_ERROR, message="no timed call could be measured")
            out = BaselineResult(status=Status.PASSED, latency_ms=summarize(samples[1].times_ms), speedup=paired_ratio(samples[1].times_ms, samples[0].times_ms))
            if self.tracer is not None:
                cand, _ = samples[0].kernel_time()
                base, _ = samples[1].kernel_time()
                if cand and base:
                    out.kernel_time_ms = summarize(base).median
                    out.kernel_speedup = paired_ratio(base, cand)
            return out
        except Exception as e:  # noqa: BLE001 — the baseline's failure, never the candidate's
            return BaselineResult(status=Status.RUNTIME_ERROR, message=f"{type(e).__name__}: {e}"[:2000])

    def observe(self, w: Workload) -> tuple[list[Finding], dict[str, Any]]:
        """One candidate call under the CUPTI observer (kernels and streams). It runs in a worker of its
        own: a CUPTI client in the timing process is one more thing that can disturb small kernels."""
        axes = self.definition.resolve_axes(w.axes)
        inputs = make_inputs(self.definition, w, seed=seed_for(self.seed, w.uuid, 0), device=self.device, config=self.config, dataset_root=self.dataset_root)
        _, call = self._call(self.fn, self.solution, inputs, axes)
        _, findings, seen = self.guard.call_observed(call, self.device)
        return findings, seen

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def _fail(self, res: WorkloadResult, status: Status, message: str, t0: float, log: str = "", extra: dict | None = None) -> WorkloadResult:
        res.status = status
        res.message = message[:2000]
        res.log = log
        if status is not Status.INCORRECT_NUMERICAL:
            res.correctness = None
        if extra:
            res.profile = extra
        res.seconds = time.monotonic() - t0
        return res

    def _reject(self, res: WorkloadResult, findings: list[Finding], t0: float) -> WorkloadResult:
        res.findings = findings
        return self._fail(res, Status.REJECTED, "; ".join(f"[{f.rule}] {f.message}" for f in findings), t0)


def kernel_time(samples: list[Samples], reference: Samples | None, traced: bool) -> KernelTime:
    """The CUPTI figures of a workload: the candidate's, and the baseline's and reference's where they
    are complete too; what is missing says why."""
    if not traced:
        from .cupti_activity import unavailable

        return KernelTime(withheld=f"CUPTI unavailable: {unavailable() or 'not loaded'}")
    own, why = samples[0].kernel_time()
    if own is None:
        return KernelTime(withheld=why)
    kt = KernelTime(latency_ms=summarize(own))
    notes = []
    if len(samples) > 1:
        base, why_b = samples[1].kernel_time()
        if base is None:
            notes.append(f"baseline: {why_b}")
        else:
            kt.baseline_latency_ms = summarize(base)
            kt.speedup_vs_baseline = paired_ratio(base, own)
    ref, why_r = reference.kernel_time() if reference is not None else (None, "the reference was not timed")
    if ref is None:
        notes.append(f"reference: {why_r}")
    else:
        kt.reference_latency_ms = summarize(ref)
        kt.speedup_vs_reference = kt.reference_latency_ms.median / kt.latency_ms.median if kt.latency_ms.median > 0 else None
    kt.withheld = "; ".join(notes)
    return kt


def _add_note(res: WorkloadResult, text: str) -> None:
    res.message = (res.message + "; " if res.message else "") + text


def _capability(device: torch.device) -> str | None:
    """``"9.0"`` for an H200; None on the CPU."""
    if device.type != "cuda":
        return None
    major, minor = torch.cuda.get_device_capability(device)
    return f"{major}.{minor}"


def _is_compile_error(e: BaseException) -> bool:
    name = type(e).__name__
    mod = type(e).__module__ or ""
    return "CompilationError" in name or (mod.startswith("triton") and "Compil" in name)


def _cuda_context_healthy(device: torch.device) -> bool:
    if device.type != "cuda":
        return True
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device=device).add_(1).item()
        return True
    except Exception:  # noqa: BLE001
        return False


def _ceilings(device: str, measure: bool = True) -> dict[str, Any] | None:
    """This runner's ceilings (cached measurement, else documented defaults; a quick measurement on the
    CPU), sent before any candidate code is imported so the parent can place every time on the roofline."""
    from .ceilings import ceilings_for

    try:
        return ceilings_for(device, never_measure=not measure).model_dump(mode="json")
    except Exception as e:  # noqa: BLE001 — no ceilings means no floor, said in the report
        return {"error": f"{type(e).__name__}: {e}"}


def main() -> int:
    global _T_PROCESS
    t_start = time.monotonic()
    job = json.loads(read_line_keeping_rest(0))
    if _SPARE:
        _T_PROCESS = t_start = time.monotonic()
        if _GPU_RUN and job.get("mode") != "observe":
            prefetch(gpu=True, git=False)
    _NONCE.append(str(job.get("nonce", "")))
    _detach_stdin(bool(job.get("gated")))
    if _SANDBOX_ERROR:  # required, and it could not be set up: no candidate code runs here
        send({"type": "fatal", "message": f"sandbox: {_SANDBOX_ERROR[0]}", "sandbox": _SANDBOX.record()})
        return 5
    if job.get("mode") == "observe":  # it sends no environment: the prefetched queries would outlive it
        from .env import cancel_prefetch

        cancel_prefetch()
    if os.environ.get("TRITON_INTERPRET") == "1":  # CPU runs: Triton's interpreter, with its bf16 dot fixed
        from .interpreter_fixes import apply as fix_interpreter

        fix_interpreter()
    try:
        ev = Evaluator(job)
    except Exception as e:  # noqa: BLE001
        send({"type": "fatal", "message": f"{type(e).__name__}: {e}", "log": traceback.format_exc()[-6000:]})
        return 3
    if job.get("mode") != "observe":  # the observer's one call needs no environment or ceilings
        from .env import environment

        send({"type": "env", "env": environment(ev.device.type), "ceilings": _ceilings(ev.device.type, measure=not job.get("gated")),
              "startup_s": {"torch_import": round(_T_TORCH - _T_MODULE, 3), "sandbox": round(_T_MODULE - _T_SANDBOX, 4),
                            "to_env": round(time.monotonic() - t_start, 3), "spare": _SPARE}})
    if job.get("mode") == "observe" and ev.device.type == "cuda":
        # Subscribe before the candidate is built or imported: CUPTI takes one subscriber per process,
        # and the library must be the one torch loaded, not a look-alike the candidate brought in.
        from .guard import cupti_callbacks

        cupti_callbacks.subscription()
    try:
        built = ev.build_all()
    except SandboxError as e:
        send({"type": "fatal", "message": f"sandbox: {e}", "sandbox": _SANDBOX.record()})
        return 5
    if not built:
        send({"type": "done"})
        return 0
    send({"type": "ready"})
    if job.get("mode") == "observe":
        w = Workload.model_validate(job["workloads"][0])
        findings, seen = ev.observe(w)
        send({"type": "observed", "findings": [f.model_dump(mode="json") for f in findings], "seen": seen})
        send({"type": "done"})
        # Straight out, without the interpreter's teardown of torch (~0.5 s): the timing worker waits at
        # its gate until this process is gone, and nothing here needs finalizing.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    for wd in job["workloads"]:
        w = Workload.model_validate(wd)
        send({"type": "start", "uuid": w.uuid})
        try:
            r = ev.evaluate(w)
        except Exception as e:  # noqa: BLE001 — our own bug or a poisoned context: report, keep going
            r = WorkloadResult(uuid=w.uuid, axes=dict(w.axes), status=Status.RUNTIME_ERROR, message=f"{type(e).__name__}: {e}"[:2000], log=traceback.format_exc()[-6000:])
        try:  # the launch signatures its correctness calls recorded (harness/profile/launches.py)
            r.launches = [LaunchSignature.model_validate(x) for x in ev.guard.launch_signatures()]
        except ValueError:
            r.launches = []
        send({"type": "result", "result": r.model_dump(mode="json")})
        if (r.status is not Status.PASSED or r.baselines) and not _cuda_context_healthy(ev.device):
            return 4  # an illegal address poisons the context: the parent starts a fresh worker for the rest
    send({"type": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
