"""The timing protocol's knobs, in a module without torch so the CLI can validate them cheaply."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass
class TimingConfig:
    warmup: int = 10
    min_iters: int = 50  # the official protocol's iteration count is the floor
    max_iters: int = 5000
    target_rsem: float = 0.003  # stop when the median's 95% interval is within ±0.3 %...
    budget_s: float = 0.5  # ...or after this much wall time
    # The event clock's tick: on the H200 every sample is a multiple of 32 ns (docs/measurements.md), far
    # finer than the ~0.5 µs the CUDA documentation promises. Sampling stops when the median's interval is
    # within ±target_rsem or within two ticks, whichever is wider.
    resolution_ms: float = 0.000064
    chunk: int = 25  # iterations enqueued between synchronizations
    flush_l2_bytes: int = 256 << 20
    recheck: int = 8  # timed outputs re-checked against the reference (a uniform sample of all timed calls)
    refresh_inputs: bool = True
    # Cycles the GPU spins before each timed call (~100 µs at Hopper clocks): the host enqueues the call
    # while the GPU is still busy, so the start event is recorded right before the kernel runs and host
    # launch latency never lands inside the timed region, however slow the Python around it is.
    hold_cycles: int = 200_000
    # A few-µs kernel's time depends on where its buffers sit: on the H200 the same kernel read 5-15 %
    # apart on six allocations in one process, and each allocation re-timed gave its own median again
    # (scripts/gpu/timing_spread.py). Timed calls therefore rotate over this many input/output sets at
    # different addresses, so a median averages placements instead of sampling the one a process got.
    rotate_sets: int = 16
    # At most this much memory for the extra sets: large workloads get fewer (a 16384-row rmsnorm set is
    # 256 MiB). With 256 MiB they got 2 sets and their medians still moved ~1 % between processes; with
    # 2 GiB (9 sets) 0.15-0.5 % (H200, docs/measurements.md, recording 17).
    rotate_bytes: int = 2 << 30
    # Also read each timed call's GPU time from CUPTI activity records (harness.cupti_activity) and
    # report it beside the event latency: it leaves out the per-process launch floor that spreads
    # few-µs kernels' event medians between processes.
    kernel_time: bool = True
    # After the timed loop, each timed callable (the candidate and its paired baseline) runs back to
    # back for this many seconds between two reads of the board's NVML energy counter: energy per call
    # on every GPU evaluation, what promotion breaks a speed tie with. 0: not measured. On a CPU there
    # is no counter and the report says so.
    energy_s: float = 0.2


def parse_timing_overrides(pairs: list[str] | tuple[str, ...]) -> dict[str, int | float | bool]:
    """``["budget_s=1.0", "chunk=50"]`` -> ``{"budget_s": 1.0, "chunk": 50}``; unknown names and values of
    the wrong type raise ValueError naming the valid fields."""
    fields = {f.name: f for f in dataclasses.fields(TimingConfig)}
    out: dict[str, int | float | bool] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name = name.strip()
        if not sep or name not in fields:
            raise ValueError(f"timing setting '{pair}': expected NAME=VALUE with NAME one of {', '.join(sorted(fields))}")
        kind = type(fields[name].default)
        try:
            if kind is bool:
                if raw.strip().lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError
                value: int | float | bool = raw.strip().lower() in ("true", "1", "yes")
            else:
                value = kind(raw)
        except ValueError:
            raise ValueError(f"timing setting '{pair}': {name} takes a {kind.__name__}") from None
        if kind is not bool and not (_MINIMUM.get(name, 0) <= value < float("inf")):
            raise ValueError(f"timing setting '{pair}': {name} must be a finite number of at least {_MINIMUM.get(name, 0)}")
        out[name] = value
    merged = {**dataclasses.asdict(TimingConfig()), **out}
    if merged["max_iters"] < merged["min_iters"]:
        raise ValueError(f"timing settings: max_iters ({merged['max_iters']}) is below min_iters ({merged['min_iters']})")
    return out


# Settings below these would never take a sample (chunk, max_iters) or never stop sampling for a reason
# the report can name (budget_s, rotate_sets).
_MINIMUM: dict[str, float] = {"chunk": 1, "max_iters": 1, "min_iters": 1, "budget_s": 0.001, "rotate_sets": 1}
