"""Is the small-kernel per-process offset a per-process launch floor, and does CPU placement move it?

The harness bench read the SM clock from each hold (a fixed number of spin cycles between two
events): processes whose small kernels read ~0.5 µs slow also read their holds ~0.6 µs long, though the
clock (nvidia-smi: 1980 MHz) is the same. So something adds a per-process constant to every interval
between two events. Each child process here measures, with the harness's own protocol (L2 flush,
hold, events), three things:

  floor      an empty kernel (a zero-cycle GPU sleep) between two events
  hold       the 200k-cycle hold (its excess over 200k/1980 MHz is the same constant, if the guess is right)
  add        a 4096-element in-place add (a 4 µs-class kernel like rmsnorm batch 1)

once with events made fresh per sample (as the harness does) and once with a pool of events made up
front; children alternate CPU placement (first half of the CPUs, second half, unpinned) so placement
effects show. Writes $OUT/launch_floor.json and prints a table last.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

OUT = Path(os.environ.get("OUT", "."))

CHILD = r"""
import json, os, sys, statistics
cpus = json.loads(sys.argv[1])
use_stream = len(sys.argv) > 2 and sys.argv[2] == "stream"
if cpus:
    os.sched_setaffinity(0, cpus)
import torch
dev = torch.device("cuda")
if use_stream:
    torch.cuda.set_stream(torch.cuda.Stream())
flush = torch.empty((256 << 20) // 4, dtype=torch.int32, device=dev)
x = torch.randn(4096, device=dev)
HOLD = 200_000
def run(kind, fresh, n=400):
    pool = [torch.cuda.Event(enable_timing=True) for _ in range(3 * n)] if not fresh else None
    evs = []
    for i in range(n):
        flush.zero_()
        h, s, e = (torch.cuda.Event(enable_timing=True) for _ in range(3)) if fresh else pool[3 * i: 3 * i + 3]
        h.record()
        torch.cuda._sleep(HOLD)
        s.record()
        if kind == "floor":
            torch.cuda._sleep(0)
        else:
            x.add_(1.0)
        e.record()
        evs.append((h, s, e))
        if i % 25 == 24:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    t = sorted(s.elapsed_time(e) * 1e3 for h, s, e in evs)
    hold = sorted(h.elapsed_time(s) * 1e3 for h, s, e in evs)
    return {"median_us": t[len(t) // 2], "hold_us": hold[len(hold) // 2]}
for _ in range(2):
    run("floor", True, 100)  # warm-up and clocks up
res = {"cpus": sorted(os.sched_getaffinity(0))[:3] + ["..."], "cpu_now": int(open("/proc/self/stat").read().split()[38])}
for kind in ("floor", "add"):
    for fresh in ((True, False) if len(sys.argv) <= 3 else (True,)):
        res[f"{kind}_{'fresh' if fresh else 'pool'}"] = run(kind, fresh)
print(json.dumps(res))
"""


def sh(cmd: str) -> str:
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def main() -> int:
    n = os.cpu_count() or 2
    halves = [list(range(n // 2)), list(range(n // 2, n)), []]
    info = {
        "lscpu_numa": sh("lscpu | grep -i numa"),
        "gpu_numa_node": sh("cat /sys/bus/pci/devices/*/numa_node 2>/dev/null | sort | uniq -c"),
        "gpu_local_cpus": sh(
            'for d in /sys/bus/pci/devices/*; do [ "$(cat $d/vendor 2>/dev/null)" = 0x10de ] && echo $d $(cat $d/local_cpulist) $(cat $d/numa_node); done'
        ),
        "topo": sh("nvidia-smi topo -m 2>&1 | head -8"),
    }
    rows = []
    script = OUT / "launch_floor_child.py"
    script.write_text(CHILD)
    for i in range(3):  # placement: no effect on 2026-11-29 (one NUMA node), kept as the baseline group
        cpus = halves[i % 3]
        p = subprocess.run([sys.executable, str(script), json.dumps(cpus)], capture_output=True, text=True, timeout=120)
        try:
            r = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            r = {"error": p.stderr[-800:]}
        r["placement"] = ["first half", "second half", "unpinned"][i % 3]
        rows.append(r)
        print(json.dumps(r), flush=True)
    # Does anything under our control remove the per-process floor? Six processes each: a non-default
    # stream, one hardware connection, and (as a disturbance check) nvidia-smi querying in a loop.
    variants = {
        "side_stream": ([], "stream", {}),
        "max_connections_1": ([], "default", {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}),
        "smi_running": ([], "default", {}),
    }
    for name, (cpus, stream, extra_env) in variants.items():
        for _ in range(6):
            smi = subprocess.Popen(["bash", "-c", "while true; do nvidia-smi -q > /dev/null; done"], start_new_session=True) if name == "smi_running" else None
            try:
                p = subprocess.run(
                    [sys.executable, str(script), json.dumps(cpus), stream, "fresh-only"],
                    capture_output=True,
                    text=True,
                    timeout=120,
                    env={**os.environ, **extra_env},
                )
            finally:
                if smi is not None:  # the loop and the nvidia-smi it is running: a process group
                    os.killpg(smi.pid, 9)
                    smi.wait()
            try:
                r = json.loads(p.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                r = {"error": p.stderr[-800:]}
            r["placement"] = name
            rows.append(r)
            print(json.dumps(r), flush=True)
    (OUT / "launch_floor.json").write_text(json.dumps({"info": info, "rows": rows}, indent=2))
    print(json.dumps(info, indent=1))
    print("\nplacement          cpu  floor_fresh  hold_fresh  add_fresh   (µs, medians)")
    for r in rows:
        if "error" in r:
            print(r["placement"], r["error"][-300:])
            continue
        print(
            f"{r['placement']:<17} {r['cpu_now']:>4}  {r['floor_fresh']['median_us']:>10.3f} {r['floor_fresh']['hold_us']:>10.3f}"
            f" {r['add_fresh']['median_us']:>10.3f}"
        )
    groups: dict[str, list] = {}
    for r in rows:
        if "error" not in r:
            groups.setdefault("pinning" if r["placement"] in ("first half", "second half", "unpinned") else r["placement"], []).append(r)
    for g, rs in groups.items():
        for key in ("floor_fresh", "add_fresh"):
            ms = [r[key]["median_us"] for r in rs]
            print(
                f"{g:<17} spread {key}: {100 * (max(ms) - min(ms)) / statistics.median(ms):.1f}%  range {min(ms):.3f}-{max(ms):.3f} µs over {len(ms)} processes"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
