"""On the H200 (not run yet; about 10-20 minutes): campaigns with profiling on, and what the profiling
cost per candidate.

For rmsnorm_h4096 and one contest operator (default gdn_decode_qk4_v8_d128_k_last), ``kbot optimize``
with the offline agent on the GPU (``--profile``, the default, with ``--profile-budget``): every
passing evaluation gets its feedback items (roofline rules; the Triton kernels' ahead-of-time sm_90
compile statistics; ncu with the sections its roofline class calls for, SASS of the kernels it ran
and NVML energy on up to two workloads within the budget). Then, from each campaign's reports:

- per candidate: seconds spent on profiling (static compile, each ncu-profiled workload), the
  workloads left out for the budget, feedback items, the classes and ncu sections of the plan;
- the items the offline agent's next prompt context had (the node summaries' feedback).

Writes ``$OUT/profiled_campaign.json`` and ``$OUT/<definition>/summary.json`` + ``optimize.log``.
Exits 0 when every candidate that passed has feedback items and a profiling record with ncu evidence
for at least one workload, else 1 (3: no GPU or no ncu here).

    OUT=/tmp/pc python scripts/gpu/profiled_campaign.py [--definitions rmsnorm_h4096,gdn_decode_qk4_v8_d128_k_last]
        [--rounds 2] [--candidates 2] [--profile-budget 120]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

DEFAULT_DEFINITIONS = "rmsnorm_h4096,gdn_decode_qk4_v8_d128_k_last"


def candidate_costs(store: Path) -> list[dict[str, Any]]:
    """One row per evaluated node of a campaign store: its profiling record and feedback."""
    from harness.report import load_report

    rows = []
    for path in sorted((store / "reports").glob("*.json"), key=lambda p: p.stat().st_mtime):
        rep = load_report(path)
        prof = rep.profiling or {}
        passing = [w for w in rep.workloads if w.status.value == "PASSED"]
        ncu_ok = [w.uuid for w in passing if "ncu" in ((w.profile or {}).get("evidence") or {})]
        rows.append({
            "node": path.stem, "solution": rep.solution, "passed": len(passing), "workloads": len(rep.workloads),
            "profiling": prof, "ncu_profiled": ncu_ok,
            "items": sum(len(w.feedback) for w in passing),
            "workloads_without_items": [w.uuid for w in passing if not w.feedback],
            "plans": sorted({json.dumps((w.profile or {}).get("plan", {}).get("sections")) for w in passing}),
            "classes": sorted({c for w in passing for c in (w.profile or {}).get("plan", {}).get("classes", [])}),
            "top": [f"[{f.severity}] {f.title}" for f in rep.workloads[0].feedback[:3]] if passing else [],
            "energy_j_per_call": [w.energy_j_per_call for w in passing if w.energy_j_per_call is not None],
        })
    return rows


def run_one(definition: str, out: Path, a: argparse.Namespace) -> dict[str, Any]:
    ws = out / definition / "workspace"
    ws.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "harness.cli", "optimize", definition, "--agent", "offline", "--device", "cuda",
           "--rounds", str(a.rounds), "--candidates", str(a.candidates), "--profile", "--profile-budget", str(a.profile_budget),
           "--workspace", str(ws), "--json"]
    with (out / definition / "optimize.log").open("w") as log:
        p = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=log, text=True,
                           env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=a.timeout)
    (out / definition / "summary.json").write_text(p.stdout)
    stores = sorted((ws / "campaigns" / definition).glob("[0-9][0-9][0-9]"))
    rows = candidate_costs(stores[-1]) if stores else []
    spent = [r["profiling"].get("spent_s") for r in rows if r["profiling"]]
    per_workload = [s for r in rows for s in (r["profiling"].get("profiled_s") or {}).values()]
    return {"definition": definition, "returncode": p.returncode, "command": " ".join(cmd), "candidates": rows,
            "profiling_s_per_candidate": {"median": statistics.median(spent) if spent else None,
                                          "max": max(spent) if spent else None, "n": len(spent)},
            "ncu_s_per_workload": {"median": statistics.median(per_workload) if per_workload else None,
                                   "max": max(per_workload) if per_workload else None, "n": len(per_workload)},
            "skipped_for_budget": sum(len(r["profiling"].get("skipped_for_budget") or []) for r in rows)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--definitions", default=DEFAULT_DEFINITIONS)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--candidates", type=int, default=2)
    ap.add_argument("--profile-budget", type=float, default=120.0)
    ap.add_argument("--timeout", type=int, default=3000, help="seconds per campaign")
    a = ap.parse_args(argv)
    import torch

    from harness.profile.ncu import find_ncu

    if not torch.cuda.is_available():
        print("no CUDA device here: this script measures profiling on a GPU", file=sys.stderr)
        return 3
    if find_ncu() is None:
        print("ncu (Nsight Compute) not found: the per-candidate ncu cost cannot be measured", file=sys.stderr)
        return 3
    out = Path(os.environ.get("OUT") or REPO / "profiled_campaign_out")
    out.mkdir(parents=True, exist_ok=True)
    results = [run_one(d.strip(), out, a) for d in a.definitions.split(",") if d.strip()]
    doc = {"device": torch.cuda.get_device_name(0), "profile_budget_s": a.profile_budget, "rounds": a.rounds,
           "candidates": a.candidates, "results": results}
    (out / "profiled_campaign.json").write_text(json.dumps(doc, indent=1, default=str))
    ok = True
    for r in results:
        print(f"{r['definition']}: rc {r['returncode']}; profiling per candidate {r['profiling_s_per_candidate']}; "
              f"ncu per workload {r['ncu_s_per_workload']}; left out for the budget {r['skipped_for_budget']}")
        for c in r["candidates"]:
            print(f"  {c['node']} {c['solution']}: {c['items']} items, classes {c['classes']}, ncu on {len(c['ncu_profiled'])}, "
                  f"spent {c['profiling'].get('spent_s')} s (static {c['profiling'].get('static_s')} s); {c['top']}")
            if c["passed"] and (not c["items"] or c["workloads_without_items"] or not c["ncu_profiled"]):
                ok = False
        ok = ok and r["returncode"] == 0 and bool(r["candidates"])
    print("EVERY PASSING CANDIDATE PROFILED" if ok else "SOME CANDIDATE WITHOUT PROFILE EVIDENCE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
