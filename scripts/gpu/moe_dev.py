"""MoE seed and baselines on the H200: the judged path first, then variants, within one device call.

    source scripts/gpu/setup_device.sh; python3 scripts/gpu/moe_dev.py          # on the device (~6 min)
    python3 scripts/gpu/moe_dev.py --dry-run                                    # anywhere: the plan only
    python3 scripts/gpu/moe_dev.py --sync-baselines                             # rewrite baselines/*/solution.json

Definition ``moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048``, workloads.jsonl (the
official seq_len / local_expert_offset pairs with generated routing).

Phase B first (the judged path): ``kbot eval --device cuda`` of the seed at its defaults on every
workload (trials 1, budget 0.2 s, min_iters 10), each workload bounded by --workload-timeout (60 s: a
hang costs a minute, not the official 300 s) and the whole eval by its share of the budget. Its report
carries, per workload, the CUPTI GPU time, the event latency and the roofline floor counted from the
timed routing (harness/input_counts.py): the table's seed/floor is that floor.

Phase A (variants on a few representative workloads, --seq-lens, default 1, 16, 62, 80, 901, 14107): every
variant in a child process of its own, bounded by --variant-timeout (a hung kernel cannot be stopped
from inside the process): inputs built once per workload, one call checked against the reference with
the sidecar's comparator (official verdict and token_l2), then triton.testing.do_bench (CUDA events,
L2 flushed, median). Variants: the seed at its defaults and a few tunable changes, the scaled_mm_loop
baseline (as shipped and with M_ALIGN 16), the torch_compile baseline (last: it compiles per shape);
a variant that changes only the large-batch (small-batch) path runs only on workloads above (at or
below) 64 tokens. The seed's defaults also get a per-kernel GPU time breakdown (torch.profiler).
Each phase-A row's floor is the same roofline, counted from that row's inputs.

Everything stays within --budget-s (default 330 s after start-up; phase B gets --eval-share of it);
what the budget does not reach says so. Writes $OUT/moe_dev.json, $OUT/moe_dev.md, $OUT/evals.tar.gz
(the kbot eval report.json and traces) and prints the compact tables last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # devtime.py beside this file

DEF = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"
DDIR = REPO / "definitions" / DEF
DEVICE = "cuda"
# Tunable changes of the seed measured beside its defaults (names and values from its `# kbot: tunable` lists).
VARIANTS = {
    "default": {},
    "g2_bm128": {"G2_BLOCK_M": 128, "G2_WARPS": 8},                  # GEMM2: 128 FLOP per L2 byte instead of 85
    "bm128": {"BLOCK_M": 128, "G2_BLOCK_M": 128, "G2_WARPS": 8},    # and GEMM1: 171 instead of 102 (24 B spill)
    "g1bn64_bm128": {"G1_BN": 64, "BLOCK_M": 128, "G2_BLOCK_M": 128, "G2_WARPS": 8},  # GEMM1 128 FLOP/L2 byte, no spill
    "g1bn64_2cta": {"G1_BN": 64, "G1_WARPS": 4},                    # GEMM1 2 CTAs per SM (hides the promotion), 85 FLOP/B
    "g1_one_wave": {"G1_PROGS_PER_SM": 1},                          # GEMM1 fits one CTA per SM: no second wave
    "route_multi": {"SMALL_ROUTE_MAX": 0},                          # small batches routed by T/16 programs (1 at 62 tokens spills)
    "no_small_path": {"SMALL_MAX_TOKENS": 0},
    "bf16_inter": {"INTER_FP8": False},
    "stages4": {"NUM_STAGES": 4, "SMALL_STAGES": 5},
    "split8_bn128": {"SMALL_SPLIT_K": 8, "SMALL_BN": 128},
    # the small path (<= SMALL_MAX_TOKENS): routing over several programs, bytes in flight of the swap-AB GEMMs
    "route_bt4": {"SMALL_ROUTE_BT": 4},                             # T/4 routing programs + one positions program
    "route_bt8": {"SMALL_ROUTE_BT": 8},
    "g2_stages8": {"SMALL_G2_STAGES": 8},                           # GEMM2 swap: 7 x 8 KB of weights in flight per program
    "g2_stages6": {"SMALL_G2_STAGES": 6},
    "g1_stages6": {"SMALL_STAGES": 6},                              # GEMM1 swap: 5 x 16 KB in flight per program
    "small_progs3": {"SMALL_PROGS_PER_SM": 3},
    "small_bt32": {"SMALL_BT": 32},                                 # one m-tile for experts of up to 32 rows
    "small_all": {"SMALL_ROUTE_BT": 8, "SMALL_G2_STAGES": 8, "SMALL_STAGES": 6},
    # on top of the first sweep's best (2026-12-06, H100): routing over T/4 programs, 3 swap-GEMM programs per SM
    "rs": {"SMALL_ROUTE_BT": 4, "SMALL_PROGS_PER_SM": 3},
    "rs_bt32": {"SMALL_ROUTE_BT": 4, "SMALL_PROGS_PER_SM": 3, "SMALL_BT": 32},
    "rs_progs4": {"SMALL_ROUTE_BT": 4, "SMALL_PROGS_PER_SM": 4},
    "rs_split2": {"SMALL_ROUTE_BT": 4, "SMALL_PROGS_PER_SM": 3, "SMALL_SPLIT_K": 2},
    "rs_split7": {"SMALL_ROUTE_BT": 4, "SMALL_PROGS_PER_SM": 3, "SMALL_SPLIT_K": 7},
    "rs_route2": {"SMALL_ROUTE_BT": 2, "SMALL_PROGS_PER_SM": 3},
    # on the seed = champion #30 (SMALL_ROUTE_BT 4, SMALL_PROGS_PER_SM 3 by default)
    "fp8_g2": {"SMALL_INTER_FP8": True},                            # FP8 x FP8 swap GEMM2 (no bf16 conversion of weights)
    "g1_bt32": {"SMALL_G1_BT": 32},                                 # GEMM1's token tile 32, GEMM2's 16
    "fp8_g2_g1_bt32": {"SMALL_INTER_FP8": True, "SMALL_G1_BT": 32},
    # TMA (host-side tensor descriptors) for the weight tiles and GEMM2's intermediate
    "tma": {"W_TMA": True},                                         # the large path's GEMMs
    "small_tma": {"SMALL_W_TMA": True},                             # the swap-AB GEMMs
    "tma_all": {"W_TMA": True, "SMALL_W_TMA": True},
    "tma_g1w16": {"W_TMA": True, "G1_WARPS": 16},                   # GEMM1: 4 warpgroups, 128 registers a thread
    "tma_stages4": {"W_TMA": True, "NUM_STAGES": 4},
    "small_tma_s6": {"SMALL_W_TMA": True, "SMALL_STAGES": 6, "SMALL_G2_STAGES": 6},
    "ws1": {"W_SCALE_ONE": True},                                   # one weight scale per tile and K step
    "tma_ws1": {"W_TMA": True, "W_SCALE_ONE": True},
    "tma_ws1_stma": {"W_TMA": True, "W_SCALE_ONE": True, "SCALE_TMA": True},  # + activation scales by TMA boxes
    "tma_ws1_pf": {"W_TMA": True, "W_SCALE_ONE": True, "PREFETCH_SCALES": 1},  # + next step's scales a step early
    "all_tma_ws1": {"W_TMA": True, "SMALL_W_TMA": True, "W_SCALE_ONE": True},
    # the large path's routing over 4- or 8-token programs instead of 16
    "route4": {"ROUTE_BT": 4},
    "rescale": {"RESCALE_ACC": True, "W_SCALE_ONE": True},       # GEMM1 accumulates in place: BM 128 255 -> 236 registers, no spill
    "rescale_2cta": {"RESCALE_ACC": True, "W_SCALE_ONE": True, "BIG_G1_BLOCK_M": 64, "G1_WARPS": 4, "G1_STAGES": 2},  # 239 regs, 80 KB: 2 CTAs/SM
    "rescale_tma_pf": {"RESCALE_ACC": True, "W_SCALE_ONE": True, "W_TMA": True, "PREFETCH_SCALES": 1},  # 245, no spill (#37's + rescale)
    "route8": {"ROUTE_BT": 8},
}
# Baselines (folder name, module constants changed): scaled_mm_loop pads every expert's rows to M_ALIGN.
BASELINES = {"scaled_mm_loop": ("scaled_mm_loop", {}), "scaled_mm_loop_m16": ("scaled_mm_loop", {"M_ALIGN": 16}),
             "torch_compile": ("torch_compile", {})}
PHASE_A_ORDER = ("default", "scaled_mm_loop", "g2_bm128", "bm128", "g1bn64_bm128", "g1bn64_2cta", "g1_one_wave", "route_multi",
                 "no_small_path", "bf16_inter", "stages4", "split8_bn128", "route_bt4", "route_bt8", "g2_stages8", "g2_stages6",
                 "g1_stages6", "small_progs3", "small_bt32", "small_all", "rs", "rs_bt32", "rs_progs4", "rs_split2", "rs_split7", "rs_route2",
                 "fp8_g2", "g1_bt32", "fp8_g2_g1_bt32", "tma", "small_tma", "tma_all", "tma_g1w16", "tma_stages4", "small_tma_s6",
                 "ws1", "tma_ws1", "tma_ws1_stma", "tma_ws1_pf", "all_tma_ws1", "route4", "route8", "rescale", "rescale_2cta", "rescale_tma_pf",
                 "scaled_mm_loop_m16", "torch_compile")
# Variants that change only one path run only on its workloads (the small path: <= the seed's SMALL_MAX_TOKENS).
LARGE_ONLY = {"g2_bm128", "bm128", "g1bn64_bm128", "g1bn64_2cta", "g1_one_wave", "bf16_inter", "tma", "tma_g1w16", "tma_stages4",
              "route4", "route8", "rescale", "rescale_2cta", "rescale_tma_pf"}
SMALL_ONLY = {"route_multi", "split8_bn128", "route_bt4", "route_bt8", "g2_stages8", "g2_stages6", "g1_stages6", "small_progs3",
              "small_bt32", "small_all", "rs", "rs_bt32", "rs_progs4", "rs_split2", "rs_split7", "rs_route2",
              "fp8_g2", "g1_bt32", "fp8_g2_g1_bt32", "small_tma", "small_tma_s6"}


def seq_lens_for(name, seq_lens):
    if name not in LARGE_ONLY and name not in SMALL_ONLY:
        return tuple(seq_lens)
    from bot.agents.tunables import solution_tunables

    small_max = next(t.value for t in solution_tunables(seed_solutions()["default"]) if t.name == "SMALL_MAX_TOKENS")
    return tuple(s for s in seq_lens if (s > small_max) == (name in LARGE_ONLY))
SEQ_LENS = (1, 16, 62, 80, 901, 14107)


def seed_solutions():
    """{variant name: Solution} for the first seed at each VARIANTS entry."""
    from bot.agents.providers.offline import load_seeds
    from bot.agents.tunables import apply

    seed = load_seeds(DEF)[0]
    return {name: (apply(seed, changes, name=f"{seed.name}_{name}") if changes else seed) for name, changes in VARIANTS.items()}


def baseline_solution(folder):
    from harness.schema import load_solution

    return load_solution(DDIR / "baselines" / folder / "solution.json")


def sync_baselines() -> int:
    """Rewrite every baselines/*/solution.json's sources from the folder's main.py and the definition's
    reference.py (the files are the one home; solution.json is what the harness runs)."""
    for folder in sorted({f for f, _ in BASELINES.values()}):
        path = DDIR / "baselines" / folder / "solution.json"
        data = json.loads(path.read_text())
        files = {"main.py": DDIR / "baselines" / folder / "main.py", "reference.py": DDIR / "reference.py"}
        data["sources"] = [{"path": s["path"], "content": files[s["path"]].read_text()} for s in data["sources"]]
        path.write_text(json.dumps(data, indent=2) + "\n")
        print(f"wrote {path.relative_to(REPO)}")
    return 0


def load_callable(sol, tag, constants=None):
    """The solution's entry point, imported from its sources written under a temporary folder."""
    import importlib.util
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix=f"moe_{tag}_"))
    for src in sol.sources:
        (folder / src.path).write_text(src.content)
    file, fn = sol.spec.entry_point.split("::")
    sys.path.insert(0, str(folder))  # a baseline imports its second source (reference.py), as the harness lets it
    sys.modules.pop("reference", None)
    spec = importlib.util.spec_from_file_location(f"moe_dev_{tag}", folder / file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for k, v in (constants or {}).items():
        if not hasattr(mod, k):
            raise AttributeError(f"{tag}: no module constant {k}")
        setattr(mod, k, v)
    return getattr(mod, fn)


def variant_callable(name):
    if name in VARIANTS:
        return load_callable(seed_solutions()[name], name)
    folder, constants = BASELINES[name]
    return load_callable(baseline_solution(folder), name, constants)


def floor_of(defn, axes, inputs, cfg):
    """The harness's roofline floor (skills/roofline/moe.yaml) counted from these inputs' routing."""
    from harness.ceilings import documented_ceilings
    from harness.operators.moe import local_routing_counts
    from harness.roofline import roofline

    counts = local_routing_counts(inputs, axes, cfg)
    r = roofline(defn, axes, documented_ceilings("NVIDIA H200"), given=counts)
    return {**{k: int(v) for k, v in counts.items()}, "floor_ms": r.floor_ms, "bound": r.bound}


def kernel_times(fn, x, calls=3):
    """(GPU µs per call, the same per kernel) from scripts/gpu/devtime.py (torch.profiler, CUDA activities):
    where a variant's time goes. A profiler problem gives (None, {"error": ...}), reported, not fatal."""
    from devtime import kernel_time_us

    try:
        total, per = kernel_time_us(lambda: fn(**x), iters=calls)
    except Exception as e:  # noqa: BLE001
        return None, {"error": f"{type(e).__name__}: {str(e)[:200]}"}
    out = {k[:48]: round(v, 1) for k, v in sorted(per.items(), key=lambda kv: -kv[1]) if v}
    return total, out


def phase_a_child(name, seq_lens, budget_s) -> int:
    """One variant on the chosen workloads, one JSON line per workload (run in a process of its own)."""
    import torch
    import triton.testing

    import harness.operators  # noqa: F401  (registers the MoE builder, generators, checks)
    from harness.compare import compare, normalize_outputs
    from harness.defconfig import load_config
    from harness.inputs import make_inputs
    from harness.schema import load_definition, load_workloads
    from harness.trusted_fn import load_trusted_fn

    t_end = time.monotonic() + budget_s
    defn = load_definition(DDIR / "definition.json")
    cfg = load_config(DEF, DDIR / "definition.json")
    ref = load_trusted_fn(cfg.reference_fn, cfg.root)
    try:
        fn = variant_callable(name)
    except Exception as e:  # noqa: BLE001 — reported, the parent goes on
        print(json.dumps({"variant": name, "status": f"LOAD_ERROR {type(e).__name__}: {str(e)[:200]}"}), flush=True)
        return 0
    for w in load_workloads(DDIR / "workloads.jsonl", defn):
        if w.axes["seq_len"] not in seq_lens:
            continue
        cell = {"variant": name, "uuid": w.uuid, "seq_len": w.axes["seq_len"]}
        if time.monotonic() > t_end:
            print(json.dumps({**cell, "status": "SKIPPED (variant budget)"}), flush=True)
            continue
        x = None
        try:
            axes = defn.resolve_axes(w.axes)
            x = make_inputs(defn, w, seed=1234, device=DEVICE, config=cfg)
            cell.update(floor_of(defn, axes, x, cfg))
            expected = normalize_outputs(ref(**x), defn)
            got = normalize_outputs(fn(**{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in x.items()}), defn)
            torch.cuda.synchronize()
            r = compare(got, expected, definition=defn, axes=axes, config=cfg, inputs=x)
            cell.update(status=r.status.value, matched=r.matched_ratio, message=r.message[:300],
                        checks={k: {"ok": c.ok, "value": c.value} for k, c in r.checks.items()})
            if r.ok:
                cell["do_bench_ms"] = triton.testing.do_bench(lambda x=x: fn(**x), warmup=5, rep=40, return_mode="median")
                if name in VARIANTS:  # the seed's variants: where the time goes, and their GPU time (CUPTI) per call
                    total, cell["kernels_us"] = kernel_times(fn, x)
                    if total:
                        cell["gpu_ms"] = round(total / 1000.0, 5)
        except Exception as e:  # noqa: BLE001
            cell["status"] = f"ERROR {type(e).__name__}: {str(e)[:300]}"
        print(json.dumps(cell), flush=True)
        del x
        torch.cuda.empty_cache()
    return 0


def phase_a(names, seq_lens, deadline, variant_timeout, rows_a):
    """Each variant in a child (bounded): cells {(variant, uuid): result}."""
    for name in names:
        left = deadline - time.monotonic()
        if left < 15:
            rows_a.append({"variant": name, "status": "SKIPPED (budget)"})
            print(f"[A] {name}: skipped (budget)", flush=True)
            continue
        limit = min(variant_timeout, left)
        t0 = time.monotonic()
        cmd = [sys.executable, str(Path(__file__).resolve()), "--phase-a-child", name, "--seq-lens", ",".join(map(str, seq_lens_for(name, seq_lens))),
               "--child-budget", str(max(5.0, limit - 10))]
        try:
            p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=limit)
            out, tail, status = p.stdout, p.stderr[-600:], ("" if p.returncode == 0 else f"child exit {p.returncode}")
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            tail, status = "", f"TIMEOUT after {limit:.0f} s"
        got = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        rows_a.extend(got)
        if status:
            rows_a.append({"variant": name, "status": status, "stderr": tail})
        cells = ", ".join(f"{c.get('seq_len')}:{fmt(c['do_bench_ms']) if 'do_bench_ms' in c else c.get('status')}" for c in got)
        print(f"[A] {name} ({time.monotonic() - t0:.0f} s{', ' + status if status else ''}): {cells}", flush=True)


def kbot_eval(sol_path, out, wl_path, total_s, workload_timeout):
    """One evaluation with the real protocol; (report or None, seconds, log tail)."""
    t0 = time.monotonic()
    cmd = [sys.executable, "-m", "harness.cli", "eval", str(sol_path), "--device", "cuda", "--trials", "1", "--budget", "0.2",
           "--timing", "min_iters=10", "--timeout", str(int(workload_timeout)), "--total-timeout", str(int(total_s)),
           "--out", str(out), "-w", str(wl_path), "-d", DEF]
    try:
        p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=total_s + 60)
        log = p.stdout[-3000:] + p.stderr[-2000:]
    except subprocess.TimeoutExpired:
        log = "kbot eval itself did not end within its total timeout + 60 s"
    report = out / "report.json"
    return (json.loads(report.read_text()) if report.is_file() else None), time.monotonic() - t0, log


def fmt(v, scale=1.0, digits=3):
    return "-" if v is None else f"{v * scale:.{digits}g}"


def eval_table(report):
    lines = ["| seq_len | status | GPU ms (CUPTI) | event ms | floor ms | local experts | local pairs | seed / floor | token_l2 |",
             "|---|---|---|---|---|---|---|---|---|"]
    gpu, ratios = [], []
    for w in (report or {}).get("workloads", []):
        kt = ((w.get("kernel_time") or {}).get("latency_ms") or {}).get("median")
        ev = (w.get("latency_ms") or {}).get("median")
        roof = w.get("roofline") or {}
        counts = roof.get("input_counts") or {}
        t = kt if kt is not None else ev
        ratio = t / roof["floor_ms"] if t and roof.get("floor_ms") else None
        if w["status"] == "PASSED" and t is not None:
            gpu.append(t)
            if ratio:
                ratios.append(ratio)
        l2 = (((w.get("correctness") or {}).get("checks") or {}).get("token_l2") or {}).get("value")
        status = w["status"] if w["status"] == "PASSED" else f"{w['status']}: {(w.get('message') or '')[:80]}"
        lines.append(f"| {w['axes'].get('seq_len')} | {status} | {fmt(kt)} | {fmt(ev)} | {fmt(roof.get('floor_ms'))} | "
                     f"{fmt(counts.get('local_experts'), digits=4)} | {fmt(counts.get('local_pairs'), digits=6)} | {fmt(ratio)} | {fmt(l2)} |")
    lines.append("")
    n = len((report or {}).get("workloads", []))
    if gpu:
        lines.append(f"seed mean GPU time: {statistics.mean(gpu):.4f} ms over {len(gpu)} of {n} workloads passed (target <= 0.45 ms over all)")
    if ratios:
        lines.append(f"seed time / floor: median {statistics.median(ratios):.2f}x, max {max(ratios):.2f}x")
    return "\n".join(lines)


def a_table(rows_a, names, seq_lens):
    cells = {(c["variant"], c["seq_len"]): c for c in rows_a if "seq_len" in c}
    failed = {c["variant"]: c["status"] for c in rows_a if "seq_len" not in c}
    lines = ["| seq_len | local experts | floor ms | " + " | ".join(f"{n} ms" for n in names) + " |", "|" + "---|" * (3 + len(names))]
    for s in seq_lens:
        any_c = next((cells[(n, s)] for n in names if (n, s) in cells and "floor_ms" in cells[(n, s)]), {})
        row = []
        for n in names:
            c = cells.get((n, s))
            row.append(fmt(c["do_bench_ms"]) if c and "do_bench_ms" in c else ((c or {}).get("status") or failed.get(n, "-"))[:24])
        lines.append(f"| {s} | {any_c.get('local_experts', '-')} | {fmt(any_c.get('floor_ms'))} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget-s", type=float, default=330.0, help="seconds of work after start-up")
    ap.add_argument("--eval-share", type=float, default=0.5, help="share of the budget for phase B (kbot eval of the seed)")
    ap.add_argument("--workload-timeout", type=float, default=60.0, help="kbot eval's per-workload timeout (s)")
    ap.add_argument("--variant-timeout", type=float, default=75.0, help="phase A: seconds per variant's child process")
    ap.add_argument("--seq-lens", default=",".join(map(str, SEQ_LENS)), help="phase A workloads by seq_len")
    ap.add_argument("--only", action="append", default=[], help="phase A variants to run (repeatable; default all)")
    ap.add_argument("--skip-eval", action="store_true", help="phase A only")
    ap.add_argument("--skip-a", action="store_true", help="phase B only")
    ap.add_argument("--dry-run", action="store_true", help="load workloads and build every variant's source; run nothing")
    ap.add_argument("--sync-baselines", action="store_true", help="rewrite baselines/*/solution.json from their files")
    ap.add_argument("--phase-a-child", help=argparse.SUPPRESS)
    ap.add_argument("--child-budget", type=float, default=60.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    seq_lens = tuple(int(s) for s in args.seq_lens.split(",") if s)
    if args.sync_baselines:
        return sync_baselines()
    if args.phase_a_child:
        return phase_a_child(args.phase_a_child, seq_lens, args.child_budget)
    t_start = time.monotonic()
    out = Path(os.environ.get("OUT", "/tmp/out"))
    out.mkdir(parents=True, exist_ok=True)

    from harness.schema import load_definition, load_workloads

    defn = load_definition(DDIR / "definition.json")
    wl_path = DDIR / "workloads.jsonl"
    workloads = load_workloads(wl_path, defn)
    names = [n for n in PHASE_A_ORDER if not args.only or n in args.only]
    missing = sorted(set(seq_lens) - {w.axes["seq_len"] for w in workloads})
    if missing:
        print(f"no workload has seq_len {missing}", file=sys.stderr)
        return 2
    if args.dry_run:
        seeds = seed_solutions()
        for n in names:
            sol = seeds[n] if n in seeds else baseline_solution(BASELINES[n][0])
            compile(sol.sources[0].content, f"{n}/{sol.sources[0].path}", "exec")
        print(f"{len(workloads)} workloads; phase B: kbot eval of the seed on all of them ({args.workload_timeout:.0f} s each at most); "
              f"phase A on seq_len {list(seq_lens)}: variants {names}; budget {args.budget_s:.0f} s")
        return 0

    results = {"date": time.strftime("%Y-%m-%d"), "definition": DEF, "budget_s": args.budget_s, "variants": VARIANTS,
               "baselines": {k: list(v) for k, v in BASELINES.items()}, "seq_lens": list(seq_lens)}
    report = None
    if not args.skip_eval:
        tmp = out / "evals"
        tmp.mkdir(exist_ok=True)
        seed_json = tmp / "seed.json"
        seed_json.write_text(seed_solutions()["default"].to_json(indent=2))
        total = args.budget_s * (args.eval_share if not args.skip_a else 1.0)
        report, secs, log = kbot_eval(seed_json, tmp / "seed", wl_path, total, args.workload_timeout)
        results["eval"] = {"seconds": round(secs, 1), "ran": report is not None, "log_tail": log[-1500:] if report is None else "",
                           "summary": (report or {}).get("summary")}
        print(f"[B] seed: {'ran' if report else 'did not run'} in {secs:.0f} s", flush=True)
        print(eval_table(report), flush=True)
        with tarfile.open(out / "evals.tar.gz", "w:gz") as tar:
            for f in ("report.json", "traces.jsonl"):
                if (tmp / "seed" / f).is_file():
                    tar.add(tmp / "seed" / f, arcname=f"seed/{f}")
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    rows_a: list[dict] = []
    if not args.skip_a:
        phase_a(names, seq_lens, t_start + args.budget_s, args.variant_timeout, rows_a)
    results["phase_a"] = rows_a
    results["total_s"] = round(time.monotonic() - t_start, 1)
    tb, ta = eval_table(report), a_table(rows_a, names, seq_lens)
    (out / "moe_dev.json").write_text(json.dumps(results, indent=1, default=str))
    kern = "\n".join(f"- {c['variant']}, seq_len {c['seq_len']}: " + ", ".join(f"{k} {v}" for k, v in c["kernels_us"].items())
                     for c in rows_a if c.get("kernels_us"))
    (out / "moe_dev.md").write_text(f"# MoE seed and baselines, H200, {results['date']}\n\nkbot eval of the seed (phase B):\n\n{tb}\n\n"
                                    f"phase A (do_bench median ms, in a child per variant):\n\n{ta}\n\n"
                                    f"the seed's kernels, GPU µs per call (torch.profiler):\n\n{kern}\n")
    print(f"\ntotal {results['total_s']} s\n\nthe seed's kernels, GPU µs per call:\n{kern}\n\nkbot eval of the seed (phase B):\n\n{tb}\n\n"
          f"phase A (do_bench median ms):\n\n{ta}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
