"""The DSA seed kernels on the H200: correctness and speed on every workload, default and variants.

For each of the two DSA definitions (``--only indexer|attention`` for one):

A. ``kbot eval-many --device cuda`` of the seed at its default tunables (and with ``--eval-variants N``
   the first N variants below too) over definitions/<def>/workloads.jsonl: the real protocol (guard,
   poisoned outputs, 3 trials against the reference, event timing with L2 flushed, CUPTI kernel time,
   the reference timed beside it, roofline floor). Its run folders go into $OUT/evals.tar.gz.
B. In this process, every variant (the seed with some tunables changed, through the offline agent's own
   rewriting) on every workload: one checked call against the reference with the definition's
   comparator, then ``triton.testing.do_bench`` (median, L2 flushed between calls) and the GPU time per
   call (CUPTI through torch.profiler, scripts/gpu/devtime.py: event time is host-bound for calls of a
   few tens of µs). Fixed inputs, so only a guide: A is the measurement.

Prints, last, one compact table per definition: workload, status, event µs, CUPTI µs, floor µs,
reference µs (A), and the best variant's GPU µs with its name (B). Writes $OUT/dsa_dev.json (every
number), $OUT/dsa_dev.md (the tables, and B's full variant x workload grid) and $OUT/evals.tar.gz.
Stays under --budget-s (default 220 s) of work after start-up: each definition's eval-many may use 40 %
of it (times the number of solutions it evaluates: --eval-variants lengthens the run), B gets the rest;
variants B does not reach are recorded as "not measured (time budget)".

On the device:   source scripts/gpu/setup_device.sh; python3 scripts/gpu/dsa_dev.py
Smoke test here: python scripts/gpu/dsa_dev.py --smoke   (CPU, Triton interpreter, workloads.small.jsonl,
                 two variants, tiny timing: checks the pipeline, measures nothing)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from pathlib import Path

SMOKE = "--smoke" in sys.argv  # before triton is imported: the interpreter is chosen when kernels are decorated
if SMOKE:
    os.environ["TRITON_INTERPRET"] = "1"

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

import harness.operators  # noqa: E402,F401  (registers the DSA generators and comparators)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from devtime import kernel_time_us  # noqa: E402

from bot.agents.providers.offline import load_seeds  # noqa: E402
from bot.agents.tunables import apply  # noqa: E402
from bot.promotion.champion import champion_solution_file  # noqa: E402
from harness.compare import compare, normalize_outputs  # noqa: E402
from harness.defconfig import load_config  # noqa: E402
from harness.inputs import allocate_outputs, make_inputs  # noqa: E402
from harness.schema import load_definition, load_solution, load_workloads  # noqa: E402
from harness.trusted_fn import load_trusted_fn  # noqa: E402

DEFS = {
    "indexer": "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64",
    "attention": "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64",
}
# name -> tunable changes; "default" first. The eval (A) takes the first --eval-variants after default.
VARIANTS = {
    "indexer": {
        "default": {},
        # the wide select's four launches as one kernel, the row's programs waiting for each other between passes
        # (chain_max4096 is the seed's default since PR #39; chain differs only in chaining the 1M-score tables)
        "chain": {"CHAIN_SELECT": True, "CHAIN_MAX_CHUNK": 8192},
        "chain_c2048": {"CHAIN_SELECT": True, "CHAIN_MAX_CHUNK": 8192, "SMALL_CHUNK": 2048},  # bigger chunks: fewer programs at each wait
        "chain_w4": {"CHAIN_SELECT": True, "CHAIN_MAX_CHUNK": 8192, "SELECT_WARPS": 4},
        "chain_max4096": {"CHAIN_SELECT": True, "CHAIN_MAX_CHUNK": 4096},  # the 786k / 1M-score tables not chained
        # on the default chain: four 8-bit passes instead of 8 + 12 + 12 (every program scans a 256-bin histogram
        # between passes instead of a 4096-bin one twice, for one more pass and wait), and 16 warps a program
        "chain_8bit": {"WIDE_MAX_SCORES": 0},
        "chain_w16": {"SELECT_WARPS": 16},
        # one program per row, its keys in registers (64 x 16k scores; from 16 rows also 16 x 8k, 24 / 32 x 4k),
        # and the two-page scorer tiles on the 786k / 1M-score tables
        "res64": {"RESIDENT_FROM_ROWS": 64},
        "res64_b11": {"RESIDENT_FROM_ROWS": 64, "RESIDENT_BITS": 11},
        "res64_w32": {"RESIDENT_FROM_ROWS": 64, "RESIDENT_WARPS": 32},
        "res16": {"RESIDENT_FROM_ROWS": 16},
        "large_t2": {"LARGE_FROM_SCORES": 524288},  # the seed's default since recording 47
        "res64_large": {"RESIDENT_FROM_ROWS": 64, "LARGE_FROM_SCORES": 524288},
        # the scorer's tiles on the 786k / 1M-score tables (two-page tiles are the default since recording 47)
        "large_off": {"LARGE_FROM_SCORES": 0},
        "large_p4": {"LARGE_PAGES": 4},
        "large_p4_t1": {"LARGE_PAGES": 4, "LARGE_TILE": 1},
        # the filtered select (slower everywhere, recordings 39-40): one counting pass over linear buckets, the
        # bucket's candidates selected by one program
        "filter256": {"FILTER_BINS": 256},
        "filter1024": {"FILTER_BINS": 1024},
        "filter256_cap4096": {"FILTER_BINS": 256, "FILTER_CAP": 4096},
        "filter256_chunk2048": {"FILTER_BINS": 256, "SMALL_CHUNK": 2048},
        "filter256_st2_p4": {"FILTER_BINS": 256, "PAGES": 4, "SCORE_STAGES": 2},
        "filter256_last": {"FILTER_BINS": 256, "FILTER_LAST": True},  # the exact select in the gather's last program
        "filter1024_last": {"FILTER_BINS": 1024, "FILTER_LAST": True},
        # the scorer's page loop branch-free and pipelined (SCORE_STAGES), more pages per program
        "st2_p4": {"PAGES": 4, "SCORE_STAGES": 2},
        "st3_p4": {"PAGES": 4, "SCORE_STAGES": 3},
        "st3_p8": {"PAGES": 8, "SCORE_STAGES": 3},
        "st2_p2": {"PAGES": 2, "SCORE_STAGES": 2},
        "st3_p8_t2": {"PAGES": 8, "TILE_PAGES": 2, "SCORE_STAGES": 3},
        "st3_p4_w8": {"PAGES": 4, "SCORE_STAGES": 3, "SCORE_WARPS": 8},
        "st3_p8_w8": {"PAGES": 8, "SCORE_STAGES": 3, "SCORE_WARPS": 8},
    },
    "attention": {
        "default": {},
        # the wgmma form (rows as M) from 16 / 64 tokens instead of 48, its tile, depth and split rule
        "swap16": {"SWAP_FROM_T": 16},
        "swap64": {"SWAP_FROM_T": 64},
        "swap_bn32": {"SWAP_BLOCK_N": 32},
        "swap_st3": {"SWAP_STAGES": 3},
        "swap_w8": {"SWAP_WARPS": 8},
        "swap_t264": {"SWAP_TARGET_PROGRAMS": 264},
        "swap_large2": {"SWAP_LARGE_T_SPLIT": 2},
        # the mma.sync form (1-32 tokens)
        "t264": {"TARGET_PROGRAMS": 264},
        "stages3": {"NUM_STAGES": 3},
        "few8": {"FEW_TOKENS": 8},
        "bf16_part": {"PARTIAL_BF16": True},  # split partials in bf16: half the merge's bytes
    },
}


def out_dir() -> Path:
    p = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="dsa_dev_"))
    p.mkdir(parents=True, exist_ok=True)
    return p


def solutions(op: str, only: list[str] | None = None) -> dict:
    """The seed's variants (with ``only``, the default and those named), then the champion on main as
    "champion" (timed beside them in phase B, so a pick is made against what the loop will pair a submission
    with: the seed's default need not be the champion's code, docs/measurements.md recording 37)."""
    unknown = sorted(set(only or ()) - set(VARIANTS[op]))
    if unknown:
        raise SystemExit(f"dsa_dev.py: no {op} variants named {unknown}; there are {sorted(VARIANTS[op])}")
    (seed,) = load_seeds(DEFS[op])  # one seed file per definition
    sols = {name: (apply(seed, ch, name=f"{seed.name}_{name}") if ch else seed) for name, ch in VARIANTS[op].items()
            if only is None or name == "default" or name in only}
    champ = champion_solution_file(REPO, DEFS[op])
    if champ is not None:
        sols["champion"] = load_solution(champ)
    return sols


def load_module(source: str, tag: str):
    """The solution's main.py as a module from a real file (Triton's JIT reads kernel sources)."""
    d = Path(tempfile.mkdtemp(prefix="dsa_dev_mod_"))
    f = d / f"dsa_{tag}.py"
    f.write_text(source)
    spec = importlib.util.spec_from_file_location(f.stem, f)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ----------------------------------------------------------------------------- A: kbot eval-many


def phase_a(op: str, sols: dict, names: list[str], workloads: Path, out: Path, timeout_s: float, device: str) -> dict:
    """{variant: {workload uuid: row}} from the harness's reports, or {"error": ...}."""
    tmp = Path(tempfile.mkdtemp(prefix="dsa_dev_sols_"))
    paths = []
    for n in names:
        p = tmp / f"{op}-{n}.json"
        p.write_text(sols[n].model_dump_json())
        paths.append(str(p))
    run = out / "evals" / op
    cmd = [sys.executable, "-m", "harness.cli", "eval-many", *paths, "-d", DEFS[op], "--device", device,
           "--workloads", str(workloads), "--out", str(run), "--json"]
    if SMOKE:
        cmd += ["--trials", "1", "--budget", "0.01", "--timing", "warmup=1", "--timing", "min_iters=2", "--timing", "recheck=1",
                "--timing", "chunk=2"]
    else:
        cmd += ["--budget", "0.3"]
    print(f"[A] {op}: {' '.join(cmd[2:6])} ... ({len(names)} solutions)", flush=True)
    try:
        p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=max(timeout_s, 30))
    except subprocess.TimeoutExpired:
        return {"error": f"eval-many timed out after {timeout_s:.0f} s"}
    (out / "evals").mkdir(parents=True, exist_ok=True)
    (out / "evals" / f"{op}.log").write_text(p.stdout[-200000:] + "\n--- stderr ---\n" + p.stderr[-200000:])
    if p.returncode not in (0, 1):
        return {"error": f"eval-many exit {p.returncode}: {p.stderr[-1500:]}"}
    result: dict = {}
    runs = {r["solution"]: Path(r["out"]) for r in json.loads((run / "summary.json").read_text())["runs"]} if (run / "summary.json").exists() else {}
    for n in names:
        report = runs.get(sols[n].name, Path("/nonexistent")) / "report.json"
        if not report.exists():
            result[n] = {"error": f"no report.json for {sols[n].name}"}
            continue
        rep = json.loads(report.read_text())
        rows = {}
        for w in rep["workloads"]:
            kt = (w.get("kernel_time") or {}).get("latency_ms") or {}
            rows[w["uuid"]] = {
                "status": w["status"], "message": (w.get("message") or "")[:300],
                "event_us": (w.get("latency_ms") or {}).get("median", None) and w["latency_ms"]["median"] * 1e3,
                "cupti_us": kt.get("median") and kt["median"] * 1e3,
                "cupti_withheld": (w.get("kernel_time") or {}).get("withheld", ""),
                "floor_us": (w.get("roofline") or {}).get("floor_ms") and w["roofline"]["floor_ms"] * 1e3,
                "reference_us": (w.get("reference_latency_ms") or {}).get("median") and w["reference_latency_ms"]["median"] * 1e3,
            }
        result[n] = rows
    return result


# ----------------------------------------------------------------------------- B: variants in process


def timer(fn) -> float:
    """Median µs of fn()."""
    if SMOKE:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6
    import triton.testing

    return triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median") * 1e3


def phase_b(op: str, sols: dict, workloads: list, defn, cfg, device: str, deadline: float) -> dict:
    """{variant: {uuid: {"ok", "us" (do_bench event time), "gpu_us" (CUPTI, scripts/gpu/devtime.py), "message"}}}."""
    ref = load_trusted_fn(cfg.reference_fn, cfg.root)
    mods, res = {}, {n: {} for n in sols}
    for w in workloads:
        axes = defn.resolve_axes(w.axes)
        try:
            x = make_inputs(defn, w, seed=0, device=device, config=cfg)
            expected = normalize_outputs(ref(**x), defn)
        except Exception as e:  # noqa: BLE001 — a workload that cannot be made is reported, the rest go on
            for n in sols:
                res[n][w.uuid] = {"ok": False, "us": None, "message": f"inputs/reference: {type(e).__name__}: {e}"[:300]}
            continue
        for n, sol in sols.items():
            if time.monotonic() > deadline:
                res[n][w.uuid] = {"ok": None, "us": None, "message": "not measured (time budget)"}
                continue
            try:
                if n not in mods:
                    mods[n] = load_module(sol.source("main.py"), f"{op}_{n}")
                fn = mods[n].run
                dest = allocate_outputs(defn, axes, device)
                fn(**x, **dest)
                if device == "cuda":
                    torch.cuda.synchronize()
                r = compare(dict(dest), expected, definition=defn, axes=axes, config=cfg, inputs=x)
                call = lambda fn=fn, x=x, dest=dest: fn(**x, **dest)  # noqa: E731
                us = timer(call) if r.ok else None
                gpu = kernel_time_us(call)[0] if r.ok and device == "cuda" else None
                res[n][w.uuid] = {"ok": r.ok, "us": us, "gpu_us": gpu, "message": r.message[:300]}
            except Exception as e:  # noqa: BLE001
                res[n][w.uuid] = {"ok": False, "us": None, "message": f"{type(e).__name__}: {e}"[:300] + " | " + traceback.format_exc()[-300:]}
        del x, expected
        if device == "cuda":
            torch.cuda.empty_cache()
    return res


# ----------------------------------------------------------------------------- tables


SHORT = {"batch_size": "B", "max_num_pages": "mp", "num_pages": "P", "num_tokens": "T"}


def fmt(v, nd=1):
    return "-" if v is None else f"{v:.{nd}f}"


def _t(cell: dict):
    """A B cell's time: GPU time where measured (the CPU smoke has none), else do_bench's (the same rule
    as scripts/gpu/pick_submission.py)."""
    return cell.get("gpu_us") or cell.get("us")


def tables(op: str, workloads: list, a: dict, b: dict) -> tuple[str, str]:
    """(the compact table, B's variant x workload grid) as markdown."""
    da = a.get("default", {}) if isinstance(a.get("default"), dict) else {}
    lines = [f"### {DEFS[op]}", "", "| workload | status | event µs | CUPTI µs | floor µs | ref µs | best variant GPU µs |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for w in workloads:
        row = da.get(w.uuid, {})
        cands = [(_t(v[w.uuid]), n) for n, v in b.items() if v.get(w.uuid, {}).get("ok") and _t(v[w.uuid]) is not None]
        best = min(cands) if cands else None
        status = row.get("status", "-") + ("" if row.get("cupti_us") or not row.get("cupti_withheld") else " (CUPTI withheld)")
        axes = " ".join(f"{SHORT.get(k, k)}={v}" for k, v in w.axes.items())
        lines.append(f"| {axes} | {status} | {fmt(row.get('event_us'))} | {fmt(row.get('cupti_us'))} | {fmt(row.get('floor_us'), 2)} | "
                     f"{fmt(row.get('reference_us'), 0)} | {fmt(best[0]) + ' ' + best[1] if best else '-'} |")
    if "error" in a:
        lines.append(f"\n(A failed: {a['error'][:500]})")
    names = list(b)
    grid = [f"#### {op}: GPU µs (CUPTI; do_bench event µs where there is none) per variant (x = wrong, - = not measured)", "",
            "| workload | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names)]
    for w in workloads:
        cells = []
        for n in names:
            r = b[n].get(w.uuid, {})
            cells.append("x" if r.get("ok") is False else fmt(_t(r)))
        grid.append(f"| {' '.join(f'{SHORT.get(k, k)}={v}' for k, v in w.axes.items())} | " + " | ".join(cells) + " |")
    wrong = [f"- {n} on {u[:8]}: {r['message']}" for n in names for u, r in b[n].items() if r.get("ok") is False]
    return "\n".join(lines), "\n".join(grid + ([""] + wrong[:40] if wrong else []))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=sorted(DEFS), action="append")
    ap.add_argument("--budget-s", type=float, default=220.0)
    ap.add_argument("--eval-variants", type=int, default=0, help="also run the first N non-default variants through kbot eval")
    ap.add_argument("--max-workloads", type=int, default=0, help="only the first N workloads of each definition (0: all)")
    ap.add_argument("--no-eval", action="store_true", help="skip A (kbot eval-many): only the variant sweep B")
    ap.add_argument("--variant", action="append", metavar="NAME",
                    help="sweep only these variants of the ops run (the default and the champion always); repeatable")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    device = "cpu" if SMOKE else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device (use --smoke on a CPU)", file=sys.stderr)
        return 2
    t_start = time.monotonic()
    out = out_dir()
    ops = args.only or ["indexer", "attention"]
    stray = sorted(set(args.variant or ()) - {v for op in ops for v in VARIANTS[op]})
    if stray:
        ap.error(f"no variants named {stray} in {ops}")
    result: dict = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu (smoke)", "ops": {}}
    loaded = {}
    for op in ops:
        defn = load_definition(REPO / "definitions" / DEFS[op] / "definition.json")
        cfg = load_config(DEFS[op], REPO / "definitions" / DEFS[op] / "definition.json")
        wpath = REPO / "definitions" / DEFS[op] / ("workloads.small.jsonl" if SMOKE else "workloads.jsonl")
        sols = solutions(op, [v for v in args.variant if v in VARIANTS[op]] if args.variant else None)
        if SMOKE:
            sols = {n: sols[n] for n in list(sols)[:2]}
        ws = load_workloads(wpath, defn)
        if args.max_workloads:
            ws = ws[: args.max_workloads]
            wpath = Path(tempfile.mkdtemp(prefix="dsa_dev_wl_")) / "workloads.jsonl"
            wpath.write_text("".join(w.model_dump_json() + "\n" for w in ws))
        loaded[op] = (defn, cfg, wpath, ws, sols)
    # A for every op first (the measurement that matters; each may take up to 40 % of the budget), then B
    # with what is left.
    share_a = 0.4 if len(ops) > 1 else 0.7
    for op in ops:
        defn, cfg, wpath, ws, sols = loaded[op]
        names = list(sols)[: 1 + max(0, args.eval_variants)]
        t0 = time.monotonic()
        limit = 900.0 if SMOKE else args.budget_s * share_a * len(names)  # the interpreter is slow
        a = {} if args.no_eval else phase_a(op, sols, names, wpath, out, limit, device)
        result["ops"][op] = {"definition": DEFS[op], "A": a, "A_s": round(time.monotonic() - t0, 1),
                             "variants": {n: VARIANTS[op].get(n, {}) for n in sols}}  # champion: not a seed variant
        print(f"[A] {op}: {result['ops'][op]['A_s']} s", flush=True)
    for i, op in enumerate(ops):
        defn, cfg, wpath, ws, sols = loaded[op]
        left = args.budget_s - (time.monotonic() - t_start)
        deadline = time.monotonic() + left / (len(ops) - i)
        t0 = time.monotonic()
        result["ops"][op]["B"] = phase_b(op, sols, ws, defn, cfg, device, deadline)
        result["ops"][op]["B_s"] = round(time.monotonic() - t0, 1)
        print(f"[B] {op}: {result['ops'][op]['B_s']} s", flush=True)
    (out / "dsa_dev.json").write_text(json.dumps(result, indent=1, default=str))
    md, compact = [], []
    for op in ops:
        defn, cfg, wpath, ws, sols = loaded[op]
        t, grid = tables(op, ws, result["ops"][op]["A"], result["ops"][op]["B"])
        compact.append(t)
        md += [t, "", grid, ""]
    (out / "dsa_dev.md").write_text(f"# DSA seeds on {result['device']}\n\n" + "\n".join(md))
    if (out / "evals").is_dir():
        with tarfile.open(out / "evals.tar.gz", "w:gz") as tf:
            tf.add(out / "evals", arcname="evals")
        if os.environ.get("OUT"):
            import shutil

            shutil.rmtree(out / "evals")  # the tarball holds it: at most 8 files come back from the device
    wrote = "dsa_dev.json, dsa_dev.md" + (", evals.tar.gz" if (out / "evals.tar.gz").exists() else "")
    print(f"\nwrote {out}/{wrote} ({time.monotonic() - t_start:.0f} s)\n")
    print("\n\n".join(compact))
    return 0


if __name__ == "__main__":
    sys.exit(main())
