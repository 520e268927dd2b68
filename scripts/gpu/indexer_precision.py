"""How far the DSA indexer seed's FP8 scores are from exact, on the inputs the timer gives it.

Why: on the H200 (2026-12-02) two honest radix seeds were rejected on the 64-row x 16k-token workload
with ``timed-output-mismatch`` (a token 0.014 below the 2048th score chosen, at a boundary near 0),
while every other workload passed. This measures, per input distribution and scorer variant, the
kernel's score error against a float64 computation of the definition's math, the checker's own
float32 error, and the definition comparator's verdict on the full ``run``:

  distributions  ``official``: q and weights as definitions/<indexer>/kbot.yaml makes them (official
                 magnitudes); ``unit``: q and weights N(0, 1), the earlier inputs.
  variants       ``default``: the seed as written (Triton's sm_90 default for fp8 ``tl.dot``: no
                 promotion of the tensor cores' accumulator); ``promote32``: ``max_num_imprecise_acc=32``
                 (the accumulator added into float32 after every k32 wgmma); ``fp16``: q and k converted
                 (exactly) to fp16 and multiplied with a float32 accumulator.

Each (distribution, draw) is one set of inputs made as the worker makes the timed trial's, then
redrawn as the timer redraws them. Errors are reported absolute and relative to the row's score spread
(std over its tokens), with the top-k boundary score beside them. Times: ``triton.testing.do_bench``
median of the whole ``run`` (a guide only: ``kbot eval`` is the measurement).

On the device:  source scripts/gpu/setup_device.sh; python3 scripts/gpu/indexer_precision.py
Writes $OUT/indexer_precision.json and prints a table last.
Smoke test here: python scripts/gpu/indexer_precision.py --smoke --workloads 1 --draws 1
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

SMOKE = "--smoke" in sys.argv  # CPU, Triton interpreter, the small workloads: checks the script, measures nothing
if SMOKE:
    os.environ["TRITON_INTERPRET"] = "1"
DEV = "cpu" if SMOKE else "cuda"
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import triton  # noqa: E402

import harness.operators  # noqa: E402,F401  (registers the DSA generators and comparators)
from harness.compare import compare, normalize_outputs  # noqa: E402
from harness.defconfig import load_config  # noqa: E402
from harness.inputs import TIMED_TRIAL, make_inputs, seed_for  # noqa: E402
from harness.measure import Refresher, refreshable_inputs  # noqa: E402
from harness.operators.dsa import index_scores, unpack_k_cache  # noqa: E402
from harness.schema import load_definition, load_workloads  # noqa: E402
from harness.trusted_fn import load_trusted_fn  # noqa: E402

DEF = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"
SEED = REPO / "skills" / "seeds" / DEF / "radix.py"
DOT = "tl.dot(q, tl.trans(k))"
VARIANTS = {
    "default": DOT,
    "promote32": "tl.dot(q, tl.trans(k), max_num_imprecise_acc=32)",
    "fp16": "tl.dot(q.to(tl.float16), tl.trans(k.to(tl.float16)))",
}


def load_variant(name: str, dot: str):
    src = SEED.read_text()
    if src.count(DOT) != 1:
        raise SystemExit(f"{SEED}: expected exactly one '{DOT}' to replace, found {src.count(DOT)}")
    f = Path(tempfile.mkdtemp(prefix="idx_prec_")) / f"radix_{name}.py"
    f.write_text(src.replace(DOT, dot))
    spec = importlib.util.spec_from_file_location(f.stem, f)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def exact_scores(x: dict) -> torch.Tensor:
    """float64 scores [B, L] of the definition's math; -inf past each sequence's length."""
    q, cache, w, lens, bt = x["q_index_fp8"], x["k_index_cache_fp8"], x["weights"], x["seq_lens"].long(), x["block_table"]
    ps = cache.shape[1]
    L = int(lens.max())
    mp = -(-L // ps)
    data, sc = unpack_k_cache(cache)
    pages = bt[:, :mp].long()
    out = torch.empty((q.shape[0], mp * ps), dtype=torch.float64, device=q.device)
    for b in range(q.shape[0]):  # one row at a time: [H, T] in float64
        k = data[pages[b]].to(torch.float64) * sc[pages[b]].to(torch.float64).unsqueeze(-1)
        logits = q[b].to(torch.float64) @ k.reshape(mp * ps, -1).T
        out[b] = (logits.clamp_min(0) * w[b].to(torch.float64).unsqueeze(-1)).sum(0)
    pos = torch.arange(mp * ps, device=q.device)
    return out.masked_fill(pos.unsqueeze(0) >= lens.unsqueeze(1), float("-inf"))[:, :L]


def kernel_scores(mod, x: dict) -> torch.Tensor:
    """The variant's ``_score_pages`` output [B, mp * PS], launched as its ``run`` launches it."""
    q, cache, w, lens, bt = x["q_index_fp8"], x["k_index_cache_fp8"], x["weights"], x["seq_lens"], x["block_table"]
    B, H, D = q.shape
    PS = cache.shape[1]
    mp = bt.shape[1]
    scores = torch.full((B, mp * PS), float("nan"), dtype=torch.float32, device=q.device)
    c = cache.contiguous()
    nprog = triton.cdiv(mp, mod.PAGES)
    mod._score_pages[(B, nprog)](
        q.contiguous(), c.view(torch.float8_e4m3fn), c.view(torch.float32), w.contiguous(), lens, bt, bt.stride(0),
        scores, scores.stride(0), scores, scores, scores, TOPK=mod.TOPK, H=H, D=D, PS=PS, PAGES=mod.PAGES,
        TILE=mod.TILE_PAGES, HIST0=False, ZERO=False, ROW=256, BITS=mod.RADIX_BITS,
        STAGES=getattr(mod, "SCORE_STAGES", 0), RANGE=False, NPROG=nprog, CNT=2,
        num_warps=mod.SCORE_WARPS)  # HIST0, ZERO and RANGE off: the scores alone (the scratch pointers are unused)
    return scores


def error_stats(got: torch.Tensor, exact: torch.Tensor, lens: torch.Tensor, topk: int) -> dict:
    """Max and p99.9 absolute error over long rows' tokens; the worst error relative to its row's spread."""
    errs, rels, bounds = [], [], []
    for b in range(exact.shape[0]):
        n = int(lens[b])
        if n <= topk:
            continue
        e, g = exact[b, :n], got[b, :n].to(torch.float64)
        d = (g - e).abs()
        errs.append(d)
        rels.append(float(d.max() / e.std()))
        bounds.append(float(torch.topk(e, topk).values[-1]))
    if not errs:
        return {}
    d = torch.cat(errs)
    return {"max_abs": float(d.max()), "p999_abs": float(torch.quantile(d[:: max(1, d.numel() // 1_000_000)].float(), 0.999)),
            "max_rel_to_row_std": max(rels), "min_abs_boundary": min(abs(v) for v in bounds)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", type=int, default=2, help="the last N workloads of workloads.jsonl (the largest)")
    ap.add_argument("--draws", type=int, default=3, help="redrawn input sets per (workload, distribution)")
    ap.add_argument("--index", type=int, nargs="*", help="these workloads (0-based lines) instead of the last N")
    ap.add_argument("--smoke", action="store_true", help="CPU smoke test of this script (Triton interpreter, small workloads)")
    args = ap.parse_args()
    out_dir = Path(os.environ.get("OUT", "indexer_precision_out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    dpath = REPO / "definitions" / DEF / "definition.json"
    defn, cfg = load_definition(dpath), load_config(DEF, dpath)
    ref = load_trusted_fn(cfg.reference_fn, cfg.root)
    mods = {n: load_variant(n, d) for n, d in VARIANTS.items()}
    ws = load_workloads(REPO / "definitions" / DEF / ("workloads.small.jsonl" if SMOKE else "workloads.jsonl"), defn)
    ws = [ws[i] for i in args.index] if args.index else ws[-args.workloads:]
    rows = []
    for w in ws:
        axes = defn.resolve_axes(w.axes)
        for dist in ("official", "unit"):
            base = make_inputs(defn, w, seed=seed_for(0, w.uuid, TIMED_TRIAL), device=DEV, config=cfg)
            names = refreshable_inputs(defn, w.inputs, cfg.inputs, set())
            if dist == "unit":
                names = {n: (1.0, 0.0) for n in names}
            refresh = Refresher(names, torch.Generator(device=DEV).manual_seed(seed_for(0, w.uuid, 0, "refresh") % (1 << 62)))
            for draw in range(args.draws):
                x = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in base.items()}
                refresh(x)
                exact = exact_scores(x)
                lens = x["seq_lens"].cpu()
                expected = normalize_outputs(ref(**x), defn)
                row = {"workload": w.uuid, "axes": w.axes, "distribution": dist, "draw": draw, "refreshed": sorted(names)}
                chk, _ = index_scores(x["q_index_fp8"], x["k_index_cache_fp8"], x["weights"], x["seq_lens"], x["block_table"])
                row["checker_fp32"] = error_stats(chk, exact, lens, 2048)
                for n, mod in mods.items():
                    r = {"scores": error_stats(kernel_scores(mod, x), exact, lens, 2048)}
                    got = mod.run(**x)
                    v = compare({"topk_indices": got}, expected, definition=defn, axes=axes, config=cfg, inputs=x)
                    r["verdict"] = v.status.value if hasattr(v.status, "value") else str(v.status)
                    r["message"] = v.message[:300]
                    if draw == 0 and not SMOKE:
                        r["do_bench_us"] = triton.testing.do_bench(lambda mod=mod, x=x: mod.run(**x), warmup=10, rep=50, return_mode="median") * 1e3
                    row[n] = r
                rows.append(row)
                print(json.dumps(row), flush=True)
                del x, exact, expected
                if not SMOKE:
                    torch.cuda.empty_cache()
    device = DEV if SMOKE else torch.cuda.get_device_name()
    (out_dir / "indexer_precision.json").write_text(
        json.dumps({"device": device, "triton": triton.__version__, "torch": torch.__version__, "rows": rows}, indent=1))
    print(f"\n{'workload':<10} {'dist':<8} {'draw':>4} {'|bound|min':>10} {'chk max':>9} " + " ".join(f"{n + ' max/rel/verdict':>34}" for n in VARIANTS))
    for r in rows:
        cells = []
        for n in VARIANTS:
            s = r[n]["scores"]
            cells.append(f"{s.get('max_abs', 0):9.2e} {s.get('max_rel_to_row_std', 0):8.1e} {r[n]['verdict'][:15]:>15}")
        chk = r["checker_fp32"]
        print(f"{r['workload'][:8]:<10} {r['distribution']:<8} {r['draw']:>4} {chk.get('min_abs_boundary', 0):10.3g} "
              f"{chk.get('max_abs', 0):9.2e} " + " ".join(f"{c:>34}" for c in cells))
    for n in VARIANTS:
        t = [f"{r[n]['do_bench_us']:.1f}" for r in rows if "do_bench_us" in r[n]]
        print(f"do_bench us {n}: {' '.join(t)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
