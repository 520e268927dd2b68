"""Why do a few-µs kernel's medians move between processes? One process's evidence (the 1% spread target).

Run it several times as separate processes (see scripts/gpu/timing_spread.sh). In one process, for a
few rmsnorm batch sizes, it times the shipped Triton kernel with the harness Timer:
  alloc_k   six input sets at different addresses (a spacer of random size before each), each sampled
            until the budget: if their medians differ as much as processes do, addresses matter;
  n50       ten short runs (50 samples, the old early stop) on one input set: the sampling noise of a
            50-sample median;
  again     the first input set timed again at the end: drift within the process (clocks, heat).
Writes $OUT/timing_spread_<pid>.json and prints one line per batch.
"""

import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from harness.build import build  # noqa: E402
from harness.measure import Refresher, Timer, TimingConfig  # noqa: E402
from harness.schema import load_solution  # noqa: E402

OUT = Path(os.environ.get("OUT", "/tmp/out"))
SOL = REPO / "kernels/rmsnorm_h4096/triton_rows/solution.json"
TICK_MS = 0.000032  # the H200's CUDA event tick, seen in every sample (multiples of 32 ns)


def timed(fn, inputs, out, cfg):
    t = Timer(torch.device("cuda"), cfg, Refresher(["hidden_states"]), 0)
    s = t.run([lambda: (fn(**inputs, output=out), {"output": out})[1]], inputs, [{"output": out}])[0].times_ms
    xs = sorted(s)
    return {"median_us": statistics.median(xs) * 1e3, "n": len(xs), "p10_us": xs[len(xs) // 10] * 1e3, "p90_us": xs[9 * len(xs) // 10] * 1e3,
            "mean_us": statistics.fmean(xs) * 1e3}


def main():
    fn, res = build(load_solution(SOL), OUT / f"build_spread_{os.getpid()}", device="cuda")
    assert res.ok, res
    rng = random.Random(os.getpid())
    full = TimingConfig(resolution_ms=TICK_MS, budget_s=0.3, recheck=0, max_iters=20000)
    short = TimingConfig(min_iters=50, max_iters=50, recheck=0)
    keep = []
    result = {"pid": os.getpid(), "batches": {}}
    t_start = time.perf_counter()
    for b in (1, 128, 512, 2048):
        sets = []
        for _ in range(6):
            keep.append(torch.empty(rng.randint(1, 64) << 20, dtype=torch.uint8, device="cuda"))  # moves the next allocation
            x = torch.randn(b, 4096, device="cuda", dtype=torch.bfloat16)
            sets.append(({"hidden_states": x, "weight": torch.randn(4096, device="cuda", dtype=torch.bfloat16)}, torch.empty_like(x)))
        allocs = [timed(fn, i, o, full) for i, o in sets]
        n50 = [timed(fn, sets[0][0], sets[0][1], short)["median_us"] for _ in range(10)]
        again = timed(fn, sets[0][0], sets[0][1], full)
        meds = [a["median_us"] for a in allocs]
        row = {"allocs": allocs, "n50_medians_us": n50, "again": again,
               "alloc_spread_pct": 100 * (max(meds) - min(meds)) / statistics.median(meds),
               "n50_spread_pct": 100 * (max(n50) - min(n50)) / statistics.median(n50),
               "drift_pct": 100 * (again["median_us"] - allocs[0]["median_us"]) / allocs[0]["median_us"],
               "seconds_since_start": time.perf_counter() - t_start}
        result["batches"][b] = row
        print(
            f"pid {os.getpid()} batch {b:>5}: alloc medians {[round(m, 3) for m in meds]} (n {[a['n'] for a in allocs]})"
            f" spread {row['alloc_spread_pct']:.2f}% | "
            f"n50 medians {min(n50):.3f}..{max(n50):.3f} spread {row['n50_spread_pct']:.2f}% | again {again['median_us']:.3f} drift {row['drift_pct']:+.2f}%",
            flush=True,
        )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"timing_spread_{os.getpid()}.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
