"""GPU time of one call for the device sweeps (scripts/gpu/*_dev.py), from the torch profiler's CUDA
activities (CUPTI): the sum of the durations of every kernel, memcpy and memset the calls launched,
divided by the calls; host launch time is not in it. Event time per call (do_bench) is host-bound for
calls of a few tens of µs (an H100 sweep, 2026-12-06: the 2560-page indexer calls read 61-180 µs, never
under ~61 whatever the variant, up to 3x apart between identical code paths), so a sweep that picks among
such calls picks by this."""

from __future__ import annotations


def kernel_table(fn, iters: int = 20, warmup: int = 1) -> list[tuple[str, float, float]]:
    """(kernel name, GPU µs per call, launches per call) of ``fn()``, slowest first, after ``warmup`` calls."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    per: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            row = per.setdefault(e.name, [0.0, 0.0])
            row[0] += e.time_range.elapsed_us() / iters
            row[1] += 1 / iters
    return sorted(((n, us, c) for n, (us, c) in per.items()), key=lambda r: -r[1])


def kernel_time_us(fn, iters: int = 20) -> tuple[float, dict[str, float]]:
    """(GPU µs per call of ``fn()``, the same per kernel name), after one warm-up call."""
    rows = kernel_table(fn, iters)
    return sum(us for _, us, _ in rows), {n: us for n, us, _ in rows}
