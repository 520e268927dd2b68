"""On the GPU: every declared baseline of each contest definition through `kbot eval`, beside the
reference, then each champion measured beside all of them (paired), and one table.

What it runs, per definition (kbot's own workloads unless --dataset names an official dataset that has
the definition's workloads):

1. `kbot eval baseline:<name> -d <definition> --device cuda` for every baseline declared in
   definitions/<definition>/baselines/ (the baseline trust level; the reference is timed the same way
   in the same worker, so "x ref" is that baseline's speedup over the reference). A baseline whose
   library or GPU is not here exits 4 with the reason: the table says "could not run here: <reason>".
2. With --champions (default): the definition's champion (kernels/<definition>/champion.json) with
   `--baselines all`: each baseline paired with the champion in its worker, i.e. the champion's speedup
   over the best baseline that ran.

Usage, from the repository root on the device (no internet; carry the wheels):

    # .whl/ holds kbot's wheels as for every device run, plus fla_core-0.6.0-py3-none-any.whl (1 MB) and,
    # for FlashInfer baselines, flashinfer_python-*.whl (62 MB) with its pure-Python dependencies.
    source scripts/gpu/setup_device.sh
    OUT=/tmp/out/baselines python3 scripts/gpu/baselines.py            # the five contest definitions
    OUT=... python3 scripts/gpu/baselines.py --definitions gdn_decode_qk4_v8_d128_k_last --only fla_fused_recurrent

Writes under $OUT (at most 8 files come back from the device): baselines.md (the table, last),
baselines.json (one row per run), reports.tar.gz (every report.json, traces.jsonl and each run's stderr). Prints the
table at the end. Exit 0 when every run either passed all workloads or could not run here (said).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from harness.baselines import declared  # noqa: E402
from harness.geomean import geomean  # noqa: E402
from harness.operators import CONTEST_DEFINITIONS  # noqa: E402

EXIT_UNAVAILABLE = 4


def kbot(args: list[str], log: Path, timeout: int) -> int:
    with log.open("w") as err:
        try:
            return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=REPO, stdout=subprocess.DEVNULL, stderr=err,
                                  env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO))}, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            err.write(f"\n[baselines.py] timed out after {timeout} s\n")
            return 124


def summarize(report: dict) -> dict:
    """The figures of one report: passed, geomean speedup vs reference, mean latency, mean GPU time,
    and (for a champion run) the geomean over the best baseline per workload."""
    ws = report.get("workloads") or []
    passed = [w for w in ws if w.get("status") == "PASSED"]
    refs = [w["speedup_vs_reference"] for w in passed if w.get("speedup_vs_reference")]
    lat = [w["latency_ms"]["median"] for w in passed if w.get("latency_ms")]
    gpu = [w["kernel_time"]["latency_ms"]["median"] for w in passed if (w.get("kernel_time") or {}).get("latency_ms")]
    s = report.get("summary") or {}
    return {
        "passed": len(passed), "workloads": len(ws),
        "geomean_vs_reference": geomean(refs) if refs and len(refs) == len(ws) else None,
        "mean_latency_ms": sum(lat) / len(lat) if lat and len(lat) == len(ws) else None,
        "mean_gpu_ms": sum(gpu) / len(gpu) if gpu and len(gpu) == len(ws) else None,
        "geomean_vs_best_baseline": s.get("geomean_speedup_vs_best_baseline"),
        "best_baselines": s.get("best_baselines") or {},
        "could_not_run": s.get("baselines_could_not_run") or {},
        "statuses": s.get("statuses") or {},
    }


def fmt(x, unit: str = "", digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}g}{unit}"


def table(rows: list[dict]) -> str:
    lines = ["| definition | solution | trust | result | passed | x reference (geomean) | mean latency ms | mean GPU ms | x best baseline | wall s |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r.get("unavailable"):
            result = f"could not run here: {r['unavailable']}"
        elif r["rc"] not in (0, 1):
            result = f"failed (exit {r['rc']}; see its log)"
        else:
            result = "all passed" if r["rc"] == 0 else ", ".join(f"{k} {v}" for k, v in sorted(r["statuses"].items()))
        best = fmt(r.get("geomean_vs_best_baseline"), "x") + (f" ({', '.join(f'{k}: {v}' for k, v in r['best_baselines'].items())})"
                                                            if r.get("best_baselines") else "")
        lines.append(f"| {r['definition']} | {r['solution']} | {r['trust']} | {result} | {r.get('passed', 0)}/{r.get('workloads', 0)} | "
                     f"{fmt(r.get('geomean_vs_reference'), 'x')} | {fmt(r.get('mean_latency_ms'))} | {fmt(r.get('mean_gpu_ms'))} | "
                     f"{best} | {r['wall_s']:.0f} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--definitions", nargs="+", default=list(CONTEST_DEFINITIONS))
    ap.add_argument("--only", nargs="+", help="only these baseline names")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--dataset", help="an official dataset (its workloads where it has them)")
    ap.add_argument("--workloads", help="a workloads file for every definition (a smoke run)")
    ap.add_argument("--no-champions", dest="champions", action="store_false")
    ap.add_argument("--beside-only", action="store_true",
                    help="skip step 1: the baselines run only beside the champion, one run per definition "
                         "(their per-workload figures are in the champion's report)")
    ap.add_argument("--timeout", type=int, default=1500, help="seconds per kbot eval")
    args = ap.parse_args()
    out = Path(os.environ.get("OUT", REPO / "baselines_out"))
    work = Path(os.environ.get("WORK", "/tmp/kbot_baselines_work"))  # run folders: outside $OUT, which returns 8 files at most
    work.mkdir(parents=True, exist_ok=True)
    extra = (["--dataset", args.dataset] if args.dataset else []) + (["-w", args.workloads] if args.workloads else [])
    rows: list[dict] = []

    def run(definition: str, solution: str, label: str, trust: str, more: list[str]) -> None:
        rdir = work / definition / label
        t0 = time.monotonic()
        rc = kbot(["eval", solution, "-d", definition, "--device", args.device, "--out", str(rdir), "--json", *extra, *more],
                  work / definition / f"{label}.stderr.txt", args.timeout)
        row = {"definition": definition, "solution": label, "trust": trust, "rc": rc, "wall_s": time.monotonic() - t0}
        try:
            report = json.loads((rdir / "report.json").read_text())
        except (OSError, ValueError):
            report = None
        if report is not None:
            row["unavailable"] = report.get("unavailable")
            row.update(summarize(report))
        rows.append(row)
        print(table([row]).splitlines()[-1], flush=True)

    def write() -> str:  # after every run: a device command stopped at its limit still returns what ran
        out.mkdir(parents=True, exist_ok=True)
        (out / "baselines.json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
        with tarfile.open(out / "reports.tar.gz", "w:gz") as tar:
            for p in sorted(work.rglob("*")):
                if p.is_file() and (p.name in ("report.json", "traces.jsonl") or p.name.endswith(".stderr.txt")):
                    tar.add(p, arcname=str(p.relative_to(work)))
        md = ("# Declared baselines through the harness\n\n"
              f"`python3 scripts/gpu/baselines.py {' '.join(sys.argv[1:])}` on {args.device}; per-workload figures in reports.tar.gz.\n\n"
              + table(rows) + "\n")
        (out / "baselines.md").write_text(md)
        return md

    for definition in args.definitions:
        (work / definition).mkdir(parents=True, exist_ok=True)
        names = [b.name for b in declared(definition) if not args.only or b.name in args.only]
        for name in names if not args.beside_only else []:
            run(definition, f"baseline:{name}", name, "baseline", [])
            write()
        champ = REPO / "kernels" / definition / "champion.json"
        if args.beside_only and not (args.champions and champ.is_file()):
            print(f"{definition}: --beside-only, but no champion to run beside ({champ} {'absent' if not champ.is_file() else 'not asked for'})",
                  file=sys.stderr)
        if args.champions and names and champ.is_file():
            path = json.loads(champ.read_text()).get("solution_path")
            if isinstance(path, str) and (REPO / path).is_file():
                run(definition, str(REPO / path), f"champion {Path(path).parent.name}", "candidate", ["--baselines", ",".join(names)])
                write()

    print("\n" + write())
    bad = [r for r in rows if r["rc"] not in (0, EXIT_UNAVAILABLE)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
