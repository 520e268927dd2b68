"""On the H200: ceilings, then ncu on each flawed kernel and the good one, then the rule engine.

Writes under $OUT (8 files, flat):
  <case>.csv        raw `ncu --csv --page raw` output, one per case (6)   -> commit to tests/fixtures/ncu/
  ceilings.json     measured ceilings of this GPU                         -> commit to tests/fixtures/ncu/
  feedback.json     per case: top item, expected rule, pass/fail, Markdown, engine JSON, ncu command,
                    SASS facts of the compiled kernel, ncu logs (tails)   -> commit to tests/fixtures/ncu/

Usage: python scripts/gpu/profile_flawed.py [--out DIR] [--cases a,b] [--skip-ceilings]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.ceilings import Ceilings, documented_ceilings, measure_ceilings  # noqa: E402
from harness.profile.ncu import METRICS, command_text, filter_metrics, find_ncu, known_metric_bases, run_ncu  # noqa: E402
from harness.profile.pipeline import explain_csv, sass_from_dirs  # noqa: E402
from harness.schema import load_definition  # noqa: E402

FIXTURE_DEFS = REPO / "tests" / "fixtures" / "ncu" / "definitions"


def profile_case(ncu: str, case: str, logs: dict[str, str], cache: Path, timeout: int = 150) -> tuple[str, str, list[str]]:
    """ncu on one case (metrics this ncu rejects are dropped and reported)."""
    prog = [sys.executable, str(Path(__file__).resolve().parent / "profile_flawed_kernels.py"), case]
    # A private Triton cache per case: afterwards it holds exactly this case's cubin, for SASS facts.
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRITON_CACHE_DIR": str(cache)}
    t0 = time.time()
    run = run_ncu(prog, ncu=ncu, metrics=METRICS, env=env, cwd=str(REPO), timeout=timeout, launch_count=5)
    logs[f"{case}.ncu.log"] = f"# {time.time() - t0:.1f}s, dropped: {run.dropped}\n{run.log}"
    return run.csv, command_text(run.command), run.dropped


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "profile_out"))
    ap.add_argument("--cases", default="uncoalesced,small_grid,matmul_no_dot,spill,good,good_matmul")
    ap.add_argument("--skip-ceilings", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from profile_flawed_kernels import CASES

    logs: dict[str, str] = {}
    summary: dict[str, object] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    import torch

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    summary["gpu"] = gpu
    summary["torch"] = torch.__version__
    try:
        import triton

        summary["triton"] = triton.__version__
    except ImportError:
        pass
    ceilings: Ceilings | None = None
    if not args.skip_ceilings and torch.cuda.is_available():
        t0 = time.time()
        try:
            ceilings = measure_ceilings("cuda")
            (out / "ceilings.json").write_text(ceilings.model_dump_json(indent=2) + "\n")
            summary["ceilings_seconds"] = round(time.time() - t0, 1)
        except Exception as e:  # noqa: BLE001
            summary["ceilings_error"] = f"{type(e).__name__}: {e}"
    if ceilings is None:
        ceilings = documented_ceilings(gpu) or documented_ceilings("H200")
    ncu = find_ncu()
    summary["ncu"] = ncu
    if ncu:
        v = subprocess.run([ncu, "--version"], capture_output=True, text=True)
        summary["ncu_version"] = v.stdout.strip().splitlines()[-1] if v.stdout.strip() else v.stderr.strip()
    if ncu:
        known, query_text = known_metric_bases(ncu)
        logs["query-metrics.txt"] = query_text[-300000:]
        kept, dropped = filter_metrics(METRICS, known)
        summary["metrics"] = {"requested": len(METRICS), "kept": len(kept), "dropped_by_query": dropped}
    results = {}
    import tempfile

    tmp = tempfile.mkdtemp(prefix="kbot_flawed_")
    for name in [c for c in args.cases.split(",") if c]:
        case = CASES[name]
        t0 = time.time()
        entry: dict[str, object] = {"expect_top": case.expect_top, "accept_top": list(case.accept_top)}
        if not ncu:
            entry["error"] = "ncu not found"
            results[name] = entry
            continue
        try:
            csv_text, cmd, dropped = profile_case(ncu, name, logs, Path(tmp) / name)
            entry["dropped_metrics"] = dropped
        except subprocess.TimeoutExpired:
            csv_text, cmd = "", "timeout"
        entry["ncu_command"] = cmd
        entry["seconds"] = round(time.time() - t0, 1)
        if not csv_text:
            entry["error"] = "ncu produced no CSV (see feedback.json logs)"
            results[name] = entry
            continue
        (out / f"{name}.csv").write_text(csv_text)
        d = load_definition(FIXTURE_DEFS / f"{case.definition}.json")
        axes = d.resolve_axes(case.axes)

        def judge(items, case=case):
            top = items[0].rule if items else None
            if case.expect_top:
                return top, top in (case.expect_top, *case.accept_top)
            return top, not any(i.severity in ("critical", "high") for i in items)

        # What CI checks: the CSV alone. Also reported: CSV + SASS of the cubin this run compiled.
        outcome = explain_csv(csv_text, d, axes, ceilings=ceilings)
        items = list(outcome.feedback)
        top, ok_top = judge(items)
        kname = outcome.feedback.evidence.get("kernel_name")
        sass = sass_from_dirs([Path(tmp) / name], kname if isinstance(kname, str) else None)
        with_sass = explain_csv(csv_text, d, axes, ceilings=ceilings, extra=[sass])
        entry["sass"] = sass.evidence if sass.ok else {"missing": sass.missing}
        entry["top_with_sass"], entry["passed_with_sass"] = judge(list(with_sass.feedback))
        entry.update(top=top, top_severity=items[0].severity if items else None, passed=ok_top,
                     items=[(i.severity, i.rule, i.title) for i in items],
                     markdown=outcome.markdown(title=f"{name}: {case.definition} {case.axes}"),
                     engine=outcome.to_json())
        results[name] = entry
        print(f"== {name}: top={top} expected={case.expect_top} passed={ok_top} ({entry['seconds']}s)", flush=True)
        print(entry["markdown"], flush=True)
    summary["cases"] = results
    summary["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    # Logs ride inside feedback.json (tails only) to stay within the 8 files $OUT may hold.
    summary["logs"] = {k: v[-6000:] for k, v in logs.items() if k != "query-metrics.txt"}
    summary["logs"]["query-metrics.txt"] = logs.get("query-metrics.txt", "")[:3000]
    (out / "feedback.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    passed = [n for n, r in results.items() if r.get("passed")]
    print(f"passed {len(passed)}/{len(results)}: {passed}")
    return 0 if len(passed) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
