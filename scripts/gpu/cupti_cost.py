"""Where the kernel-time tracer's host seconds go (profile.cupti_s was 0.36-0.56 s per rmsnorm candidate
on the H200, docs/measurements.md recording 17): enabling/disabling the activity kinds, flushing, and reading records,
each timed alone in one process. Prints a short table; writes $OUT/cupti_cost.json."""

import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from harness import cupti_activity as ca  # noqa: E402

OUT = Path(os.environ.get("OUT", "."))
t = ca.tracer()
assert t is not None, ca.unavailable()
x = torch.randn(1 << 16, device="cuda")
torch.cuda.synchronize()
res = {}


def timed(fn, reps=20):
    xs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        xs.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(xs)


res["start_stop_ms"] = timed(lambda: (t.start(), t.stop()))
t.start()
res["flush_empty_ms"] = timed(lambda: t.collect())
for n in (100, 1000, 5000):
    def run(n=n):
        for _ in range(n):
            x.mul_(1.0)
        torch.cuda.synchronize()
    run()
    t.collect()
    t0 = time.perf_counter()
    run()
    t_enqueue = time.perf_counter() - t0
    t0 = time.perf_counter()
    ops = t.collect()
    res[f"collect_{n}_kernels_ms"] = (time.perf_counter() - t0) * 1e3
    res[f"ops_{n}"] = len(ops)
    res[f"enqueue_{n}_ms_traced"] = t_enqueue * 1e3
t.stop()
for n in (1000,):
    t0 = time.perf_counter()
    for _ in range(n):
        x.mul_(1.0)
    torch.cuda.synchronize()
    res[f"enqueue_{n}_ms_untraced"] = (time.perf_counter() - t0) * 1e3
(OUT / "cupti_cost.json").write_text(json.dumps(res, indent=2))
for k, v in res.items():
    print(f"{k:28s} {v:.3f}" if isinstance(v, float) else f"{k:28s} {v}")
