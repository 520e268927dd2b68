"""Issue-2 overhead with spare workers: `kbot eval-many` on N copies of the shipped rmsnorm solution.

Each copy is a separate evaluation (fresh worker processes of its own), so the per-copy medians are
also N more separate processes for the spread. Per copy: wall time of its evaluation (summary.json),
timed kernel time (candidate and reference samples, n x mean), overhead = the difference. The first
copy pays the torch import; the later ones start from spares started during the one before.
Writes $OUT/many_bench.json and prints a table last.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("--copies", type=int, default=4)
args = ap.parse_args()
REPO = Path(__file__).resolve().parents[2]
OUT = Path(os.environ.get("OUT", "/tmp/out"))
SOL = REPO / "kernels/rmsnorm_h4096/triton_rows/solution.json"

t0 = time.monotonic()
cmd = [
    sys.executable,
    "-m",
    "harness.cli",
    "eval-many",
    *[str(SOL)] * args.copies,
    "-d",
    "rmsnorm_h4096",
    "--device",
    "cuda",
    "--out",
    str(OUT / "many"),
    "--json",
]
p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
process_wall = time.monotonic() - t0
if p.returncode != 0:
    print(p.stdout[-3000:], p.stderr[-3000:])
if not (OUT / "many" / "summary.json").exists():
    sys.exit(p.returncode or 3)
summary = json.loads((OUT / "many" / "summary.json").read_text())
rows = []
for run in summary["runs"]:
    rep = json.loads((Path(run["out"]) / "report.json").read_text())
    timed_ms = sum(
        w["latency_ms"]["n"] * w["latency_ms"]["mean"]
        + ((w.get("reference_latency_ms") or {}).get("n", 0) * (w.get("reference_latency_ms") or {}).get("mean", 0.0))
        for w in rep["workloads"]
        if w.get("latency_ms")
    )
    rows.append(
        {
            "wall_s": run["wall_s"],
            "timed_kernel_s": timed_ms / 1e3,
            "overhead_s": run["wall_s"] - timed_ms / 1e3,
            "spare_worker": rep["config"].get("spare_worker"),
            "all_passed": run["all_passed"],
            "timeline_s": rep["config"].get("timeline_s"),
            "medians_us": {str(w["axes"]["batch_size"]): round(w["latency_ms"]["median"] * 1e3, 3) for w in rep["workloads"] if w.get("latency_ms")},
            "gpu_medians_us": {
                str(w["axes"]["batch_size"]): round(w["kernel_time"]["latency_ms"]["median"] * 1e3, 3)
                for w in rep["workloads"]
                if (w.get("kernel_time") or {}).get("latency_ms")
            },
            "phase_s": {str(w["axes"]["batch_size"]): (w.get("profile") or {}).get("phase_s") for w in rep["workloads"]},
        }
    )


def spread_of(key: str) -> dict:
    out = {}
    for b in rows[0][key]:
        ms = [r[key][b] for r in rows if b in r[key]]
        out[b] = {"medians_us": ms, "spread_pct": round(100 * (max(ms) - min(ms)) / statistics.median(ms), 2)}
    return out


spread, gpu_spread = spread_of("medians_us"), spread_of("gpu_medians_us")
result = {
    "date": time.strftime("%Y-%m-%d"),
    "copies": args.copies,
    "rc": p.returncode,
    "process_wall_s": process_wall,
    "rows": rows,
    "spread": spread,
    "gpu_spread": gpu_spread,
}
(OUT / "many_bench.json").write_text(json.dumps(result, indent=2))
print(f"kbot eval-many x{args.copies}: rc={p.returncode}, process wall {process_wall:.1f} s")
for i, r in enumerate(rows, 1):
    print(
        f"  copy {i}: wall {r['wall_s']:.2f} s, timed {r['timed_kernel_s']:.2f} s, overhead {r['overhead_s']:.2f} s,"
        f" spare={r['spare_worker']}, passed={r['all_passed']}"
    )
    print(f"          timeline {r['timeline_s']}")
print("spread over the copies (separate processes): " + "; ".join(f"b={b}: {s['spread_pct']}% {s['medians_us']}" for b, s in spread.items()))
print("the same, CUPTI kernel time: " + "; ".join(f"b={b}: {s['spread_pct']}% {s['medians_us']}" for b, s in gpu_spread.items()))
sys.exit(p.returncode)
