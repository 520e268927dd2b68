"""Calling a solution and timing it: the parts of the worker that touch the candidate.

Timing on the GPU follows the protocol most public harnesses converged on: each timed call is preceded
(outside the timed region) by fresh input values, a 256 MiB write that evicts L2, and re-poisoned
outputs; CUDA events bracket the call on the current stream; the host enqueues many iterations before
one device-wide synchronize, so the flush kernel hides launch latency the way `do_bench` does. Samples
are taken until the median's 95% interval is narrow or the time budget is spent.

On the CPU the same statistics come from ``time.perf_counter_ns``, and reports say so.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .compare import normalize_outputs
from .cupti_activity import attribute
from .inputs import poison
from .schema import Definition
from .stats import precise_enough
from .timing_config import TimingConfig

# Captured before any candidate code is imported into this process, so a candidate that patches the
# torch or time attributes later cannot change what the harness calls.
_perf_counter_ns = time.perf_counter_ns
_monotonic = time.monotonic
_Event = torch.cuda.Event
_event_record = torch.cuda.Event.record
_event_elapsed = torch.cuda.Event.elapsed_time
_cuda_sync = torch.cuda.synchronize
_randn = torch.randn
_clone = torch.Tensor.clone
_copy = torch.Tensor.copy_
_mul = torch.mul
_add = torch.add
_zero = torch.Tensor.zero_
_gpu_sleep = getattr(torch.cuda, "_sleep", None)
_MARKER_CYCLES = 1  # the spin kernel after each traced call's end event: it closes the call's CUPTI window


def wait_until_quiet(device: torch.device, *, max_s: float = 10.0, threshold_ms: float = 0.02, probes: int = 20, hold_cycles: int = 200_000) -> dict[str, Any]:
    """Wait until nothing else keeps the GPU busy before the first timed call of a worker.

    A tiny memset, held behind a GPU sleep so host launch latency stays outside its events, takes a few
    µs on an idle GPU and tens of µs when another context shares it (the GPU time-slices between them).
    The sleep must outlast the host's enqueueing of the next probe: at 20k cycles (10 µs) the probes
    read 9-20 µs on an idle H200, which was the host's launch latency, not the GPU.
    Probes until two rounds in a row have a median under ``threshold_ms``, or ``max_s`` passes; returns
    the seconds waited, the round medians, and whether it got quiet (said in the report when not)."""
    if device.type != "cuda":
        return {"waited_s": 0.0, "quiet": True, "medians_ms": []}
    x = torch.empty(1024, dtype=torch.float32, device=device)
    t0 = _monotonic()
    medians: list[float] = []
    while True:
        pairs = []
        for _ in range(probes):
            if _gpu_sleep is not None:
                _gpu_sleep(hold_cycles)
            s, e = _Event(enable_timing=True), _Event(enable_timing=True)
            _event_record(s)
            _zero(x)
            _event_record(e)
            pairs.append((s, e))
        _cuda_sync()
        times = sorted(_event_elapsed(s, e) for s, e in pairs)
        medians.append(times[len(times) // 2])
        quiet = len(medians) >= 2 and medians[-1] < threshold_ms and medians[-2] < threshold_ms
        waited = _monotonic() - t0
        if quiet or waited > max_s:
            return {"waited_s": round(waited, 3), "quiet": quiet, "medians_ms": [round(m, 5) for m in medians[-20:]]}
        if medians[-1] >= threshold_ms:
            time.sleep(0.05)


# Inputs drawn from this generator are unstructured (i.i.d. normal values): the timer may redraw them
# between calls from the same distribution. Inputs of any other generator keep their values across timed
# calls: many make structure (lengths, tables, quantized caches, positive states) that a redraw could break.
REDRAWN_GENERATOR = "normal"
_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_FP8_MAX = {d: float(torch.finfo(d).max) for d in _FP8}  # looked up now: a candidate cannot patch it later
_F32 = torch.float32
_clamp = torch.clamp


@dataclass
class Refresher:
    """Writes new random values into the float inputs that the workload marks ``random`` (or draws from
    the plain ``normal`` generator).

    Scalars and generator-made inputs (indices, lengths, tables; see REDRAWN_GENERATOR) keep their
    values; the named tensors get new contents before every timed call, so an output cache keyed on
    pointers or on a fingerprint of the values cannot serve a timed call. ``names`` lists the inputs,
    or maps each to the (std, mean) its values are drawn from (default (1, 0)): the same distribution
    it was made with, so a timed call sees inputs of the magnitude the tolerance was set for.
    """

    names: list[str] | dict[str, tuple[float, float]]
    gen: torch.Generator | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.names, dict):
            self.names = {n: (1.0, 0.0) for n in self.names}

    def __call__(self, inputs: dict[str, Any]) -> None:
        for n, (std, mean) in self.names.items():
            t = inputs[n]
            lim = _FP8_MAX.get(t.dtype)
            x = _randn(t.shape, device=t.device, dtype=_F32 if lim is not None else t.dtype, generator=self.gen)
            if std != 1.0 or mean != 0.0:
                x = _add(_mul(x, std), mean)
            if lim is not None:
                x = _clamp(x, -lim, lim)
            _copy(t, x)


def refreshable_inputs(definition: Definition, workload_inputs: dict[str, Any], config_inputs: dict[str, Any],
                       built: set[str]) -> dict[str, tuple[float, float]]:
    """The float inputs the timer redraws between calls, each with the (std, mean) it is drawn from:
    those marked random (N(0, 1)) and those made by the ``normal`` generator (its own std and mean)."""
    out: dict[str, tuple[float, float]] = {}
    for name, spec in definition.inputs.items():
        src = workload_inputs.get(name)
        kind = getattr(src, "type", "random")
        if name in built or spec.shape is None or not (spec.dtype.startswith("float") or spec.dtype == "bfloat16"):
            continue
        if kind == "generated":
            gen, params = src.generator, src.params
        elif kind == "random" and name in config_inputs:
            gen, params = config_inputs[name].generator, config_inputs[name].params
        elif kind == "random":
            gen, params = REDRAWN_GENERATOR, {}
        else:
            continue
        if gen == REDRAWN_GENERATOR and float(params.get("std", 1.0)) != 0.0:  # std 0 is a constant: nothing to redraw
            out[name] = (float(params.get("std", 1.0)), float(params.get("mean", 0.0)))
    return out


def call_solution(fn: Callable[..., Any], definition: Definition, inputs: dict[str, Any], outputs: dict[str, torch.Tensor] | None) -> dict[str, Any]:
    """One call: destination-passing when ``outputs`` is given, else value-returning."""
    if outputs is not None:
        fn(**inputs, **outputs)
        return dict(outputs)
    return normalize_outputs(fn(**inputs), definition)


@dataclass
class Samples:
    times_ms: list[float] = field(default_factory=list)
    wall_ms_per_call: float | None = None
    rechecks: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)  # (inputs, outputs)
    input_sets: list[dict[str, Any]] = field(default_factory=list)  # every input set the timed calls used
    sets: int = 1
    clock_mhz: list[float] = field(default_factory=list)  # hold cycles / hold time, per kept timed call
    late_dropped: int = 0  # timed calls enqueued after their hold had ended (host latency inside the events)
    late_kept: int = 0  # the same, kept because the hold was already at its longest: the call is host-bound
    hold_cycles: int = 0  # the hold in use when sampling stopped (it doubles while calls arrive late)
    # GPU time per kept timed call from CUPTI activity records (harness.cupti_activity), aligned with
    # times_ms while nothing below goes wrong; any count below makes kernel_time() withhold the figure.
    kept_calls: list[int] = field(default_factory=list)  # each kept time's call, by enqueue order in the run
    gpu_ms: list[float] = field(default_factory=list)
    gpu_missing: int = 0  # kept calls with no GPU operation in their window
    gpu_over: int = 0  # kept calls whose GPU work outlasted their window or their event interval
    gpu_error: str = ""  # the tracer failed, was not there, or its records did not add up
    cupti_s: float = 0.0  # host seconds spent starting, reading and stopping CUPTI for this run
    # NVML energy per call, measured back to back after the timed loop (Timer.run(energy=True)); the
    # reason when there is none (no counter on a CPU, no pynvml, a counter that did not advance).
    energy_j_per_call: float | None = None
    energy_missing: str = ""

    def kernel_time(self) -> tuple[list[float] | None, str]:
        """The per-call GPU times, or None and why they are withheld."""
        n = len(self.times_ms)
        if self.gpu_error:
            return None, self.gpu_error
        problems = [f"{self.gpu_missing} timed calls with no GPU operation recorded"] if self.gpu_missing else []
        if self.gpu_over * 100 > n:
            problems.append(f"{self.gpu_over} of {n} calls ran on the GPU longer than their events measured (work outside the caller's stream?)")
        if problems:
            return None, "; ".join(problems)
        if not n or len(self.gpu_ms) != n:
            return None, f"{len(self.gpu_ms)} GPU times for {n} timed calls"
        return list(self.gpu_ms), ""

    def sm_clock_mhz(self) -> dict[str, float] | None:
        """The multiprocessor clock while this callable was timed, from the holds: the hold spins a fixed
        number of cycles, so cycles / time is the clock (read a little low: the hold's own launch is in
        its interval). Latency-bound kernels run at this clock; an unlocked GPU that has not boosted
        makes them read slow, which is what this is here to show."""
        xs = sorted(self.clock_mhz)
        if not xs:
            return None
        return {"median": round(xs[len(xs) // 2], 1), "min": round(xs[0], 1), "max": round(xs[-1], 1)}


class Rotation:
    """K input/output sets at different device addresses, swapped into the dicts the solution's closures
    read, one set per timed call. Set 0 is the caller's own tensors; the others are copies allocated
    behind random spacers, so they land in other memory segments. ``restore`` puts set 0 back."""

    def __init__(self, inputs: dict[str, Any], outputs: list[dict[str, torch.Tensor] | None], k: int, max_bytes: int, rng: random.Random):
        self.inputs, self.outputs = inputs, outputs
        tensors = [v for v in inputs.values() if isinstance(v, torch.Tensor)] + [t for o in outputs if o for t in o.values()]
        per_set = sum(t.numel() * t.element_size() for t in tensors)
        k = max(1, min(k, 1 + max_bytes // per_set)) if per_set > 0 else 1
        self.in_sets: list[dict[str, Any]] = [dict(inputs)]
        self.out_sets: list[list[dict[str, torch.Tensor] | None]] = [[dict(o) if o is not None else None for o in outputs]]
        spacers = []
        for _ in range(k - 1):
            if tensors and tensors[0].is_cuda:
                spacers.append(torch.empty(rng.randint(1, 8) << 20, dtype=torch.uint8, device=tensors[0].device))
            self.in_sets.append({n: (_clone(v) if isinstance(v, torch.Tensor) else v) for n, v in inputs.items()})
            self.out_sets.append([{n: torch.empty_like(t) for n, t in o.items()} if o is not None else None for o in outputs])
        del spacers  # freed: the copies keep their addresses
        self.k = k

    def use(self, i: int) -> None:
        if self.k == 1:
            return
        s = i % self.k
        self.inputs.update(self.in_sets[s])
        for j, o in enumerate(self.outputs):
            if o is not None:
                o.update(self.out_sets[s][j])  # type: ignore[arg-type]

    def restore(self) -> None:
        self.use(0)


class Timer:
    """Times one or several callables on the same inputs, interleaved when several."""

    def __init__(self, device: torch.device, cfg: TimingConfig, refresher: Refresher, seed: int, *, rotate_on_cpu: bool = False, tracer: Any = None):
        self.device = device
        # harness.cupti_activity.Tracer (GPU only): the GPU time of each timed call, beside its events.
        self.tracer = tracer if (device.type == "cuda" and cfg.kernel_time) else None
        self.cfg = cfg
        self.refresh = refresher
        self.rng = random.Random(seed)
        self.cuda = device.type == "cuda"
        # Address rotation matters on the GPU only; tests turn it on for the CPU to exercise the same path.
        self.rotate = cfg.rotate_sets if (self.cuda or rotate_on_cpu) else 1
        self._flush = torch.empty(cfg.flush_l2_bytes // 4, dtype=torch.int32, device=device) if self.cuda else None
        self._hold_enqueued_ns = 0

    def _prepare(self, inputs: dict[str, Any], outputs: dict[str, torch.Tensor] | None, keep: bool = False,
                 hold_start: Any = None, hold_cycles: int | None = None) -> dict[str, Any] | None:
        """New input values, poisoned outputs, then (last) the L2 flush and the GPU hold. With ``keep``,
        a copy of the inputs is taken before the flush, so the timed call still starts cold. With
        ``hold_start`` (an event), the hold's start is recorded, so its length gives the SM clock."""
        if self.cfg.refresh_inputs:
            self.refresh(inputs)
        if outputs is not None:
            for t in outputs.values():
                poison(t)
        kept = {n: (_clone(v) if isinstance(v, torch.Tensor) else v) for n, v in inputs.items()} if keep else None
        self._hold(hold_start, hold_cycles)
        return kept

    def _hold(self, hold_start: Any = None, cycles: int | None = None) -> None:
        if self._flush is not None:
            _zero(self._flush)  # last, so neither new inputs nor poisoned outputs sit in L2
            if _gpu_sleep is not None:
                # The hold cannot start on the GPU before this moment (taken before its start event, so a
                # host stall between the two only makes the check stricter): a call enqueued less than a
                # hold's length later was waiting in the queue when the hold ended (see _collect).
                self._hold_enqueued_ns = _perf_counter_ns()
                if hold_start is not None:
                    _event_record(hold_start)
                _gpu_sleep(self.cfg.hold_cycles if cycles is None else cycles)

    def run(
        self,
        fns: list[Callable[[], dict[str, Any]]],
        inputs: dict[str, Any],
        outputs: list[dict[str, torch.Tensor] | None],
        *,
        budget_s: float | None = None,
        min_iters: int | None = None,
        recheck: int | None = None,
        warmup: int | None = None,
        energy: bool = False,
    ) -> list[Samples]:
        """Time each ``fns[k]`` (a closure calling the solution on ``inputs``/``outputs[k]``).

        With several callables the order alternates every iteration (ABBA), so drift and ordering
        effects cancel in the paired ratio. ``energy``: also measure each one's NVML energy per call
        (``TimingConfig.energy_s`` seconds each, after the timing; see ``_energy``).
        """
        cfg = self.cfg
        budget = cfg.budget_s if budget_s is None else budget_s
        min_n = cfg.min_iters if min_iters is None else min_iters
        n_recheck = cfg.recheck if recheck is None else recheck
        k = len(fns)
        samples = [Samples() for _ in range(k)]
        rot = Rotation(inputs, outputs, self.rotate, cfg.rotate_bytes, self.rng)
        try:
            self._run(fns, rot, samples, budget, min_n, n_recheck, warmup)
        finally:
            rot.restore()
        if energy:
            self._energy(fns, samples)
        samples[0].input_sets = rot.in_sets
        samples[0].sets = rot.k
        return samples

    def _run(
        self, fns: list[Callable[[], dict[str, Any]]], rot: Rotation, samples: list[Samples], budget: float, min_n: int, n_recheck: int, warmup: int | None
    ) -> None:
        cfg = self.cfg
        k = len(fns)
        inputs, outputs = rot.inputs, rot.outputs
        # warm-up: compile, autotune, fill caches of the allocator
        for w in range(cfg.warmup if warmup is None else warmup):
            rot.use(w)
            for j in range(k):
                self._prepare(inputs, outputs[j])
                fns[j]()
        self._sync()
        # Which timed calls get their outputs re-checked: a reservoir sample over *all* timed calls, so
        # a solution cannot be honest for the first N calls and cheap afterwards.
        kept: list[tuple[dict[str, Any], dict[str, Any]]] = []
        t0 = _perf_counter_ns()
        tracer = self._start_tracer(samples)
        t_started = _perf_counter_ns()
        try:
            calls = self._timed_loop(fns, rot, samples, budget, min_n, n_recheck, kept, tracer)
            t_looped = _perf_counter_ns()
            if tracer is not None:
                self._kernel_times(tracer, samples, calls)
        finally:
            if tracer is not None:
                tracer.stop()
        if tracer is not None:
            samples[0].cupti_s = round((t_started - t0 + _perf_counter_ns() - t_looped) / 1e9, 4)
        samples[0].rechecks = kept
        rot.restore()
        # Host wall time per call, synchronized, without the flush: what a caller waiting on the result sees.
        for j in range(k):
            reps = 5
            self._sync()
            t0 = _perf_counter_ns()
            for _ in range(reps):
                fns[j]()
            self._sync()
            samples[j].wall_ms_per_call = (_perf_counter_ns() - t0) / 1e6 / reps

    def _energy(self, fns: list[Callable[[], dict[str, Any]]], samples: list[Samples]) -> None:
        """Energy per call of each callable: run back to back (no flush, no hold: the steady state a
        caller sees) for ``energy_s`` between two reads of the board's total-energy counter. The idle
        power of the board is included, which is what a tie-breaker between equally fast kernels
        compares (harness/profile/nvml.py). A missing figure is a note, never a failure."""
        if self.cfg.energy_s <= 0:
            for smp in samples:
                smp.energy_missing = "not measured (timing setting energy_s=0)"
            return
        if not self.cuda:
            for smp in samples:
                smp.energy_missing = "no energy counter on the CPU (NVML is a GPU board's)"
            return
        from .profile.nvml import energy_per_call

        for fn, smp in zip(fns, samples):
            try:
                got = energy_per_call(fn, device_index=self.device.index or 0, min_seconds=self.cfg.energy_s, synchronize=self._sync)
            except Exception as e:  # noqa: BLE001 — the figure's failure, not the candidate's
                smp.energy_missing = f"energy run failed: {type(e).__name__}: {e}"[:300]
                continue
            if got.ok and got.evidence.get("energy_j_per_call", 0) > 0:
                smp.energy_j_per_call = float(got.evidence["energy_j_per_call"])
            else:
                smp.energy_missing = str(got.missing or "energy counter gave nothing")[:300]

    def _start_tracer(self, samples: list[Samples]) -> Any:
        """Start CUPTI tracing for a timed run (None: no kernel time; the samples say why). The first
        time, one lone spin kernel tells the name that holds and markers carry in the records."""
        if self.tracer is None or _gpu_sleep is None:
            return None
        why = ""
        try:
            self.tracer.start()
            if self.tracer.spin_name is None:
                _gpu_sleep(_MARKER_CYCLES)
                self._sync()
                ops = self.tracer.collect()
                if len(ops) == 1 and ops[0].name:
                    self.tracer.spin_name = ops[0].name
                else:
                    why = f"CUPTI showed {len(ops)} operations for one spin kernel, so holds cannot be told apart"
        except Exception as e:  # noqa: BLE001 — no kernel time is a note in the report, not a failure
            why = f"CUPTI tracing did not start: {type(e).__name__}: {e}"
        if why:
            for smp in samples:
                smp.gpu_error = why
            try:
                self.tracer.stop()
                self.tracer.errors.clear()  # this run's problem, said above; the next run starts clean
            except Exception:  # noqa: BLE001
                pass
            return None
        return self.tracer

    def _kernel_times(self, tracer: Any, samples: list[Samples], calls: int) -> None:
        """After the timed loop: the GPU span of every kept call, from the run's CUPTI records. A failure
        here is the figure's, never the candidate's: it is withheld with the reason."""
        try:
            self._read_kernel_times(tracer, samples, calls)
        except Exception as e:  # noqa: BLE001
            for smp in samples:
                smp.gpu_ms, smp.gpu_error = [], f"reading CUPTI records failed: {type(e).__name__}: {e}"

    @staticmethod
    def _read_kernel_times(tracer: Any, samples: list[Samples], calls: int) -> None:
        ops = tracer.collect()
        if tracer.errors:
            for smp in samples:
                smp.gpu_error = f"reading CUPTI records failed: {tracer.errors[-1]}"
            tracer.errors.clear()
            return
        win = attribute(ops, tracer.spin_name or "", calls)
        for smp in samples:
            if win.problem:
                smp.gpu_error = win.problem
                continue
            for pos, c in enumerate(smp.kept_calls):
                span = win.spans[c]
                if span is None or span <= 0:
                    smp.gpu_missing += 1
                    continue
                g = span / 1e6
                smp.gpu_ms.append(g)
                # Kernels on the caller's stream run between its events: a span longer than the
                # interval (beyond clock granularity), or work still running at the marker, is work
                # the events did not cover.
                if win.over[c] or g > 1.02 * smp.times_ms[pos] + 0.001:
                    smp.gpu_over += 1

    def _timed_loop(
        self,
        fns: list[Callable[[], dict[str, Any]]],
        rot: Rotation,
        samples: list[Samples],
        budget: float,
        min_n: int,
        n_recheck: int,
        kept: list[tuple[dict[str, Any], dict[str, Any]]],
        tracer: Any,
    ) -> int:
        """The timed iterations; returns how many timed calls were enqueued."""
        cfg = self.cfg
        k = len(fns)
        inputs, outputs = rot.inputs, rot.outputs
        t_start = _monotonic()
        it = 0
        hold = cfg.hold_cycles
        timed_holds = self.cuda and _gpu_sleep is not None
        calls = 0
        while True:
            pending: list[list[tuple[int, Any, Any, int]]] = []  # per iteration: (callable, events, cpu ms, host ns from hold to enqueued)
            pending_calls: list[list[int]] = []  # the same shape: each call's number in the run
            for _ in range(cfg.chunk):
                rot.use(it)
                order = range(k) if it % 2 == 0 else range(k - 1, -1, -1)
                row, row_calls = [], []
                for j in order:
                    slot = self._reservoir_slot(it, n_recheck) if j == 0 else None
                    h = _Event(enable_timing=True) if timed_holds else None
                    keep_in = self._prepare(inputs, outputs[j], keep=slot is not None, hold_start=h, hold_cycles=hold)
                    if self.cuda:
                        s, e = _Event(enable_timing=True), _Event(enable_timing=True)
                        _event_record(s)
                        out = fns[j]()
                        enqueued_ns = _perf_counter_ns() - self._hold_enqueued_ns if timed_holds else 0
                        _event_record(e)
                        if tracer is not None:
                            _gpu_sleep(_MARKER_CYCLES)  # closes this call's window in the CUPTI records
                        row.append((j, (h, s, e), None, enqueued_ns))
                    else:
                        t0 = _perf_counter_ns()
                        out = fns[j]()
                        row.append((j, None, (_perf_counter_ns() - t0) / 1e6, 0))
                    row_calls.append(calls)
                    calls += 1
                    if keep_in is not None:
                        pair = (keep_in, {n: (_clone(v) if isinstance(v, torch.Tensor) else v) for n, v in out.items()})
                        if slot < len(kept):
                            kept[slot] = pair
                        else:
                            kept.append(pair)
                pending.append(row)
                pending_calls.append(row_calls)
                it += 1
            self._sync()
            hold = self._collect(pending, samples, hold, pending_calls)
            n = len(samples[0].times_ms)
            elapsed = _monotonic() - t_start
            if n >= cfg.max_iters or (
                n >= min_n and (elapsed > budget or all(precise_enough(s.times_ms, cfg.target_rsem, cfg.resolution_ms) for s in samples))
            ):
                break
            if elapsed > 4 * budget and n >= 3:  # a very slow callable (a reference taking seconds)
                break
        return calls

    def _collect(self, pending: list[list[tuple[int, Any, Any, int]]], samples: list[Samples], hold: int, calls: list[list[int]] | None = None) -> int:
        """Read a chunk's events into the samples; returns the hold to use next.

        A timed call is *covered* when the host had enqueued it before the GPU finished the hold in
        front of it; then the start event fires right before the kernel and the interval holds GPU
        work only. A call enqueued later (a slow host: another process's start-up or exit on a shared
        CPU, a candidate that launches many small kernels) leaves host latency between the events:
        such an iteration is dropped and, when more than a fifth of a chunk arrived late, the hold
        grows at once to what the latest call needed (at least double, a power of two, up to 16x the
        configured one): a call that synchronizes is late behind any hold and goes to 16x in one step
        rather than spending its budget on chunks that are all dropped. At the longest hold late calls
        are kept and counted (``late_kept``): the call itself is host-bound."""
        longest = 16 * self.cfg.hold_cycles
        late = 0
        needed = 1.0  # how many times longer the hold had to be for the latest call
        for r, row in enumerate(pending):
            if any(ev is None for _, ev, _, _ in row):  # the CPU: no hold, no events
                for j, _, ms, _ in row:
                    samples[j].times_ms.append(ms)
                continue
            times = [(j, _event_elapsed(ev[1], ev[2]), _event_elapsed(ev[0], ev[1]) if ev[0] is not None else None, ns) for j, ev, _, ns in row]
            is_late = any(hold_ms is not None and ns / 1e6 >= 0.9 * hold_ms for _, _, hold_ms, ns in times)
            if is_late:
                late += 1
                needed = max([needed] + [ns / 1e6 / (0.9 * hold_ms) for _, _, hold_ms, ns in times if hold_ms])
                if hold < longest:
                    samples[0].late_dropped += 1
                    continue
                samples[0].late_kept += 1
            for m, (j, ms, hold_ms, _) in enumerate(times):
                samples[j].times_ms.append(ms)
                if hold_ms is not None and hold_ms > 0:
                    samples[j].clock_mhz.append(hold / (hold_ms * 1e3))
                if calls is not None:
                    samples[j].kept_calls.append(calls[r][m])
        if late * 5 > len(pending) and hold < longest:
            factor = 2
            while factor < needed and hold * factor < longest:
                factor *= 2
            hold = min(hold * factor, longest)
        for smp in samples:
            smp.hold_cycles = hold
        return hold

    def _reservoir_slot(self, it: int, size: int) -> int | None:
        """Reservoir sampling (Algorithm R): the slot call ``it`` takes in a uniform sample of ``size``
        calls out of all timed calls so far, or None when it is not kept."""
        if size <= 0:
            return None
        if it < size:
            return it
        r = self.rng.randrange(it + 1)
        return r if r < size else None

    def _sync(self) -> None:
        if self.cuda:
            _cuda_sync()
