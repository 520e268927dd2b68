"""What the OS sandbox of candidate code costs (harness/sandbox.py), on this machine.

1. In fresh processes (``--procs``, default 5): the time of ``Sandbox.enter()`` (building the Landlock
   rules and restricting the process) and of ``seal()`` (the seccomp filter on every thread), and the
   ``import torch`` that follows, with the sandbox and without.
2. ``kbot eval`` of the shipped rmsnorm kernel (kernels/rmsnorm_h4096/triton_rows), ``--reps`` times
   with ``--sandbox required`` and ``--sandbox off``, alternating: the wall time of each evaluation,
   where it went (config.timeline_s: worker start, env, build, ready, results), the torch import in the
   worker, the kernel medians (the sandbox must not move them), and the isolation each run recorded.

On the GPU (``--device cuda``): every workload of rmsnorm_h4096; on the CPU (``--device cpu``, the
Triton interpreter) the small workloads. Writes $OUT/sandbox_cost.json and prints a table last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOL = REPO / "kernels/rmsnorm_h4096/triton_rows/solution.json"

ENTER = r'''
import json, os, sys, time
t0 = time.perf_counter()
from harness.sandbox import Sandbox
t1 = time.perf_counter()
sb = Sandbox(sys.argv[1], sys.argv[2], [])
sb.enter()
t2 = time.perf_counter()
sb.use_scratch()
import torch
t3 = time.perf_counter()
sb.seal()
t4 = time.perf_counter()
print(json.dumps({"import_sandbox_ms": (t1 - t0) * 1e3, "enter_ms": (t2 - t1) * 1e3, "torch_import_s": t3 - t2,
                  "seal_ms": (t4 - t3) * 1e3, "record": sb.record(), "threads_at_seal": int(open("/proc/self/status").read().split("Threads:")[1].split()[0])}))
'''


def fresh_processes(n: int) -> dict:
    out = {}
    for mode in ("required", "off"):
        rows = []
        for _ in range(n):
            scratch = tempfile.mkdtemp(prefix="kbot-w-")
            p = subprocess.run([sys.executable, "-c", ENTER, mode, scratch], capture_output=True, text=True, cwd=REPO,
                               env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)})
            subprocess.run(["rm", "-rf", scratch])
            if p.returncode != 0:
                rows.append({"error": p.stderr[-1500:]})
                continue
            rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
        ok = [r for r in rows if "error" not in r]
        out[mode] = {"runs": rows, **{k: round(statistics.median(r[k] for r in ok), 3) for k in ("enter_ms", "seal_ms", "torch_import_s") if ok}}
    return out


def evals(device: str, reps: int, work: Path) -> dict:
    args = ["-d", "rmsnorm_h4096", "--device", device, "--json"]
    if device == "cpu":
        args += ["-w", str(REPO / "definitions/rmsnorm_h4096/workloads.small.jsonl"), "--budget", "0.2"]
    rows = {"required": [], "off": []}
    for i in range(reps):
        for mode in ("required", "off"):
            out = work / f"eval_{mode}_{i}"
            t0 = time.monotonic()
            p = subprocess.run([sys.executable, "-m", "harness.cli", "eval", str(SOL), *args, "--out", str(out), "--sandbox", mode],
                               capture_output=True, text=True, cwd=REPO)
            wall = time.monotonic() - t0
            rep = json.loads((out / "report.json").read_text()) if (out / "report.json").is_file() else {}
            ws = rep.get("workloads", [])
            rows[mode].append({
                "rc": p.returncode, "wall_s": round(wall, 3), "stderr_tail": p.stderr[-600:] if p.returncode else "",
                "passed": sum(w["status"] == "PASSED" for w in ws), "workloads": len(ws),
                "timeline_s": (rep.get("config") or {}).get("timeline_s"),
                "worker_startup_s": (rep.get("config") or {}).get("worker_startup_s"),
                "isolation": {k: v for k, v in (rep.get("isolation") or {}).items() if k != "workers"},
                "worker_isolation": (rep.get("isolation") or {}).get("workers"),
                "medians_us": {str(w["axes"]["batch_size"]): round(w["latency_ms"]["median"] * 1e3, 3) for w in ws if w.get("latency_ms")},
                "gpu_medians_us": {str(w["axes"]["batch_size"]): round(w["kernel_time"]["latency_ms"]["median"] * 1e3, 3)
                                   for w in ws if (w.get("kernel_time") or {}).get("latency_ms")},
                "driver_in_env": "driver" in ((rep.get("environment") or {}).get("gpu") or {}),
            })
    summary = {}
    for mode, rs in rows.items():
        ok = [r for r in rs if r["rc"] == 0]
        summary[mode] = {"median_wall_s": round(statistics.median(r["wall_s"] for r in ok), 3) if ok else None,
                         "walls_s": [r["wall_s"] for r in rs], "all_passed": all(r["rc"] == 0 for r in rs)}
    if summary["required"]["median_wall_s"] and summary["off"]["median_wall_s"]:
        summary["cost_per_eval_s"] = round(summary["required"]["median_wall_s"] - summary["off"]["median_wall_s"], 3)
    return {"rows": rows, "summary": summary}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--procs", type=int, default=5)
    args = ap.parse_args()
    out = Path(os.environ.get("OUT", "/tmp/out"))
    out.mkdir(parents=True, exist_ok=True)
    from harness import sandbox

    result = {"date": time.strftime("%Y-%m-%d"), "device": args.device, "landlock_abi": sandbox.landlock_abi(),
              "unavailable": sandbox.unavailable_reason(), "euid": os.geteuid(), "kernel": os.uname().release}
    result["processes"] = fresh_processes(args.procs)
    with tempfile.TemporaryDirectory() as work:
        result["evals"] = evals(args.device, args.reps, Path(work))
    (out / "sandbox_cost.json").write_text(json.dumps(result, indent=2))
    p, e = result["processes"], result["evals"]["summary"]
    print(f"kernel {result['kernel']}, Landlock ABI {result['landlock_abi']} {result['unavailable']}, euid {result['euid']}")
    print(f"{'':28}{'required':>12}{'off':>12}")
    for k, unit in (("enter_ms", "ms"), ("seal_ms", "ms"), ("torch_import_s", "s")):
        print(f"{k + ' (' + unit + ')':28}{p['required'].get(k, float('nan')):>12}{p['off'].get(k, float('nan')):>12}")
    print(f"{'kbot eval wall (s), median':28}{e['required']['median_wall_s']!s:>12}{e['off']['median_wall_s']!s:>12}")
    print(f"{'kbot eval walls (s)':28}{str(e['required']['walls_s']):>12} {e['off']['walls_s']}")
    print(f"cost per evaluation: {e.get('cost_per_eval_s')} s; all passed: required {e['required']['all_passed']}, off {e['off']['all_passed']}")
    for mode, rs in result["evals"]["rows"].items():
        bad = next((r for r in rs if r["rc"] != 0), None)
        if bad:
            print(f"a --sandbox {mode} evaluation failed (rc {bad['rc']}): {bad['stderr_tail'].strip()[-400:]}")
    first = result["evals"]["rows"]["required"][0]
    print(f"isolation recorded: {first['isolation'].get('summary')}")
    print(f"medians (us) required {first['medians_us']} / off {result['evals']['rows']['off'][0]['medians_us']}")
    return 0 if e["required"]["all_passed"] and e["off"]["all_passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
