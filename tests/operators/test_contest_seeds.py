"""The contest seed kernels (skills/seeds/<definition>/*.py) are right on the CPU, through the Triton
interpreter: every seed at its default tunables and at the variants that take its other code paths,
judged by the definition's own comparator on workloads.small.jsonl; and each seed through the real
harness (`kbot eval --device cpu`), guard included.

The interpreter is chosen when a kernel is decorated, so the seeds run in a subprocess that sets
TRITON_INTERPRET=1 first (this process may have imported Triton already), with the harness's fix of the
interpreter's bf16 dot (harness/interpreter_fixes.py), as in the harness's own CPU worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from opkit import ATTENTION, DECODE, INDEXER, MOE, PREFILL, REPO

# Variants (tunable -> value, applied with the offline agent's own rewriting) that reach the other paths.
VARIANTS = {
    INDEXER: [
        {},  # split selection (few rows) chained in one kernel (512-score chunks, 5-10 a row at these sizes)
        {"CHAIN_SELECT": False},  # the split selection's passes as separate launches
        {"RESIDENT_FROM_ROWS": 1},  # one program per row, its keys in registers
        {"RESIDENT_FROM_ROWS": 1, "RESIDENT_BITS": 11, "RESIDENT_WARPS": 8},  # ... 11-bit digits, 8 warps
        {"RESIDENT_FROM_ROWS": 1, "RESIDENT_MAX": 8192, "LARGE_FROM_SCORES": 1},  # two-page scorer tiles everywhere
        {"FILTER_BINS": 256, "LARGE_FROM_SCORES": 1, "LARGE_PAGES": 4},  # the filtered select's row range over 4-page programs
        {"LARGE_FROM_SCORES": 1, "LARGE_PAGES": 4, "LARGE_TILE": 1},
        {"SPLIT_BELOW_ROWS": 1},  # one program per row
        {"RADIX_BITS": 11, "SPLIT_CHUNK": 4096, "SELECT_BLOCK": 1024, "PAGES": 4},  # 3 passes, rows over several chunks
        {"RADIX_BITS": 11, "SPLIT_BELOW_ROWS": 1, "SELECT_BLOCK": 4096},
        {"FUSE_HIST0": 1},  # the first radix pass in the scorer
        {"FUSE_HIST0": 1, "RADIX_BITS": 11, "PAGES": 4, "SPLIT_CHUNK": 4096},
        {"FUSE_HIST0": 1, "SPLIT_BELOW_ROWS": 1},  # fusing asked for, but the row-per-program path: not fused
        {"ZERO_IN_SCORER": 0, "SMALL_CHUNK": 1024},  # the scratch zeroed by a memset; 1024-score chunks
        {"SMALL_CHUNK_MAX_SCORES": 0, "SELECT_BLOCK": 512},  # SPLIT_CHUNK at every size, 4 blocks per chunk
        {"WIDE_MAX_SCORES": 262144},  # 8 + 12 + 12-bit passes, the scratch zeroed by the scorer
        {"WIDE_MAX_SCORES": 262144, "ZERO_IN_SCORER": 0, "SMALL_CHUNK": 2048},  # the same after a memset, one chunk
        {"PAGES": 2, "TILE_PAGES": 2},  # two pages per dot
        {"PAGES": 1, "TILE_PAGES": 4, "FUSE_HIST0": 1},  # a tile wider than the program's pages: the rest masked
        {"PAGES": 4, "SCORE_STAGES": 2},  # the scorer's page loop branch-free and pipelined
        {"PAGES": 8, "TILE_PAGES": 2, "SCORE_STAGES": 3, "FUSE_HIST0": 1},  # the same with pass 0 fused
        {"FILTER_BINS": 256},  # the filtered select: 3-116 candidates a row here, selected from the buffer
        {"FILTER_BINS": 1024, "FILTER_CAP": 16},  # most rows overflow the buffer: the select over the whole row
        {"FILTER_BINS": 256, "PAGES": 4, "SCORE_STAGES": 2, "SMALL_CHUNK_MAX_SCORES": 0, "SELECT_BLOCK": 512},
        {"FILTER_BINS": 256, "FILTER_LAST": True},  # the exact select by the row's last gather program
        {"FILTER_BINS": 256, "FILTER_LAST": True, "FILTER_CAP": 16, "SMALL_CHUNK": 1024},  # ... over the whole row
        {"CHAIN_SELECT": True},  # the wide select's passes in one kernel (a pass per launch in the interpreter)
        {"CHAIN_SELECT": True, "SMALL_CHUNK": 2048, "SELECT_BLOCK": 512},  # ... four blocks per chunk
        {"CHAIN_SELECT": True, "WIDE_MAX_SCORES": 0},  # ... over four 8-bit passes
        {"CHAIN_SELECT": True, "CHAIN_MAX_CHUNK": 8192},  # ... the 1M-score tables too, in 8192-score chunks
    ],
    ATTENTION: [
        {},  # split-KV + merge
        {"TARGET_PROGRAMS": 1, "LARGE_T_SPLIT": 1},  # one split per token: the direct path, no merge
        {"BLOCK_N": 64, "MIN_SPLIT_LEN": 512, "MERGE_BLOCK_D": 512},
        {"BLOCK_N": 16, "MIN_SPLIT_LEN": 128},
        {"MERGE_PAR_MIN_SPLITS": 1000000},  # the per-token merge at every split count
        {"TARGET_PROGRAMS": 1, "MERGE_PAR_MIN_SPLITS": 2},  # the large-batch rule (2 splits each), parallel merge
        {"TARGET_PROGRAMS": 1, "LARGE_T_SPLIT": 4},  # 4 splits each, the per-token merge
        {"SWAP_FROM_T": 1},  # the rows as the M dimension (transposed products), split + merge
        {"SWAP_FROM_T": 1, "SWAP_BLOCK_N": 32, "SWAP_TARGET_PROGRAMS": 1, "SWAP_LARGE_T_SPLIT": 1},  # the same, direct path
        {"SWAP_FROM_T": 1, "SWAP_TARGET_PROGRAMS": 1, "SWAP_LARGE_T_SPLIT": 2},  # the same, 2 splits: the per-token merge
        {"PARTIAL_BF16": True},  # bf16 split partials, both merges
        {"PARTIAL_BF16": True, "SWAP_FROM_T": 1, "MERGE_PAR_MIN_SPLITS": 1000000},
    ],
    PREFILL: [
        {},  # token-by-token for the short workloads; chunked with BV 16 for the two-sequence one
        {"REC_PARALLEL_O": True, "RECURRENT_MAX_LEN": 64},  # token-by-token, output from the state before the update
        {"REC_PARALLEL_O": False, "REC_WARPS": 2},  # token-by-token, output after the update (the default before #38)
        {"RECURRENT_MAX_LEN": 0},  # chunked everywhere: BV 16 (one or two sequences) and BV 32 (three)
        {"RECURRENT_MAX_LEN": 0, "CHUNK": 128, "MANY_SEQS": 1},  # 128-token chunks, BV 64 at 8 warps
        {"RECURRENT_MAX_LEN": 0, "TRANSITION_FROM": 16},  # per-chunk transitions (P, B), 64-token chunks
        {"RECURRENT_MAX_LEN": 0, "TRANSITION_FROM": 16, "CHUNK": 128, "TRANS_WARPS": 4},  # the same at 128
        {"RECURRENT_MAX_LEN": 0, "TRANSITION_FROM": 16, "TRANS_VN": False},  # Vn formed by the output pass
        {"RECURRENT_MAX_LEN": 0, "TRANSITION_FROM": 16, "TRANS_IN_PREP": True},  # P, B formed by the prep
        {"RECURRENT_MAX_LEN": 0, "TRANSITION_FROM": 16, "TRANS_IN_PREP": True, "CHUNK": 128, "LONG_PREP_WARPS": 8},
        {"RECURRENT_MAX_LEN": 0, "TRANSITION_FROM": 16, "SCAN_GROUP": 2},  # one sequence: the chain as a two-level scan
        {"RECURRENT_MAX_LEN": 0, "TRANSITION_FROM": 16, "SCAN_GROUP": 2, "TRANS_IN_PREP": True, "FEW_SEQS_BV": 32},
        {"RECURRENT_MAX_LEN": 0, "TRANSITION_FROM": 16, "SCAN_GROUP": 2, "CHUNK": 128, "TRANS_WARPS": 4},
    ],
}
# Workloads beside workloads.small.jsonl: the small ones hold no sequence longer than 64 tokens, so the second
# 64-token block of a 128-token chunk (its cross term, and its share of a chunk's transition) never carried
# a value there.
EXTRA_WORKLOADS = {
    PREFILL: [{"uuid": "two-long-chunks", "axes": {"total_seq_len": 300, "num_seqs": 2, "len_cu_seqlens": 3},
               "inputs": {"cu_seqlens": {"type": "generated", "generator": "gdn_cu_seqlens", "params": {"mix": "skewed"}},
                          "scale": {"type": "scalar", "value": 0.3}}},
              # one sequence of 5 chunks of 64 (3 of 128): groups of 2 chunks leave a short last group
              {"uuid": "one-sequence-five-chunks", "axes": {"total_seq_len": 300, "num_seqs": 1, "len_cu_seqlens": 2},
               "inputs": {"cu_seqlens": {"type": "generated", "generator": "gdn_cu_seqlens"},
                          "scale": {"type": "scalar", "value": 0.7}}}],
}

DRIVER = r"""
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
sys.path[:0] = [sys.argv[1], os.path.join(sys.argv[1], "tests", "operators")]
import torch
torch.set_num_threads(1)
from harness.interpreter_fixes import apply as fix_interpreter
fix_interpreter()  # as the harness's CPU worker does: the interpreter's bf16 dot multiplies raw bits
from bot.agents.providers.offline import load_seeds
from bot.agents.tunables import apply
from harness.compare import normalize_outputs
from harness.inputs import allocate_outputs, poison
from harness.measure import call_solution
from harness.schema import load_workloads
from opkit import clone, judge, make, our_run, ours
name, variants, extra = sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
GUARD = 4096
defn, cfg = ours(name)
ws = load_workloads(os.path.join(sys.argv[1], "definitions", name, "workloads.small.jsonl"), defn)
from harness.schema import Workload
ws += [Workload.model_validate(e) for e in extra]
out = []
for seed_sol in load_seeds(name):
    for v in variants:
        sol = apply(seed_sol, v) if v else seed_sol
        ns = {}
        exec(compile(sol.source("main.py"), sol.name, "exec"), ns)
        for w in ws:
            for trial in (0,):
                x = make(defn, cfg, w, trial)
                # Poisoned outputs, as the harness makes them, inside a poisoned buffer with GUARD elements on
                # each side: the interpreter does not check bounds, so a stray store shows as a changed guard.
                dest, guards = {}, {}
                for k, t in allocate_outputs(defn, defn.resolve_axes(w.axes), "cpu").items():
                    flat = torch.empty(t.numel() + 2 * GUARD, dtype=t.dtype)
                    poison(flat)
                    guards[k] = (flat, flat.clone())
                    dest[k] = flat[GUARD : GUARD + t.numel()].view(t.shape)
                got = call_solution(ns["run"], defn, clone(x), dest)
                r = judge(defn, cfg, w, x, got, our_run(name)(**clone(x)))
                stray = [k for k, (flat, before) in guards.items()
                         if not (torch.equal(flat[:GUARD].view(torch.uint8), before[:GUARD].view(torch.uint8))
                                 and torch.equal(flat[-GUARD:].view(torch.uint8), before[-GUARD:].view(torch.uint8)))]
                msg = r.message + (f" stores outside {stray}" if stray else "")
                out.append({"seed": seed_sol.name, "variant": v, "workload": w.uuid, "trial": trial, "ok": r.ok and not stray, "message": msg})
print(json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the interpreter on a shared 2-core machine: minutes
@pytest.mark.parametrize("name", [INDEXER, ATTENTION, PREFILL], ids=["indexer", "attention", "gdn_prefill"])
def test_seed_variants_are_correct_on_cpu(name):
    extra = EXTRA_WORKLOADS.get(name, [])
    p = subprocess.run([sys.executable, "-c", DRIVER, str(REPO), name, json.dumps(VARIANTS[name]), json.dumps(extra)],
                       capture_output=True, text=True, timeout=1200, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    rows = json.loads(p.stdout.strip().splitlines()[-1])
    assert len(rows) == len(VARIANTS[name]) * (3 + len(extra)) * len(list((REPO / "skills" / "seeds" / name).glob("[!_]*.py")))
    bad = [r for r in rows if not r["ok"]]
    assert not bad, [(r["variant"], r["workload"][:8], r["message"][:300]) for r in bad[:6]]


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", [INDEXER, ATTENTION], ids=["indexer", "attention"])
def test_seeds_pass_kbot_eval_on_cpu(tmp_path, name):
    from bot.agents.providers.offline import load_seeds

    for sol in load_seeds(name):
        path = tmp_path / f"{sol.name}.json"
        path.write_text(sol.model_dump_json())
        out = tmp_path / sol.name
        p = subprocess.run(
            [sys.executable, "-m", "harness.cli", "eval", str(path), "-d", name, "--device", "cpu",
             "--workloads", str(REPO / "definitions" / name / "workloads.small.jsonl"), "--trials", "2",
             "--budget", "0.01", "--timing", "warmup=1", "--timing", "min_iters=2", "--timing", "recheck=1", "--timing", "chunk=2",
             "--out", str(out)],
            cwd=REPO, capture_output=True, text=True, timeout=1200, env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
        report = json.loads((out / "report.json").read_text())
        statuses = [w["status"] for w in report["workloads"]]
        assert statuses == ["PASSED"] * 3, statuses


PADDING = r"""
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
sys.path[:0] = [sys.argv[1], os.path.join(sys.argv[1], "tests", "operators")]
import torch
torch.set_num_threads(1)
torch.manual_seed(0)
from harness.interpreter_fixes import apply as fix_interpreter
fix_interpreter()
from bot.agents.providers.offline import load_seeds
from bot.agents.tunables import apply
from opkit import ATTENTION, our_run
ref = our_run(ATTENTION)
T, P = 3, 40
qn, qp = torch.randn(T, 16, 512).bfloat16(), torch.randn(T, 16, 64).bfloat16()
ckv, kpe = torch.randn(P, 64, 512).bfloat16(), torch.randn(P, 64, 64).bfloat16()
idx = torch.randint(0, P * 64, (T, 2048), dtype=torch.int32)
idx[0, :700] = -1  # padding first: whole tiles and whole splits before the first valid index
idx[1, 100:1500] = -1  # padding inside
idx[1, 1569:] = -1  # ... and the last valid index (1568) starts a tile: a loop bound one short misses it
idx[2, :] = -1  # nothing valid: output 0, lse -inf
ro, rlse = ref(qn, qp, ckv, kpe, idx, 0.07)
out = []
for seed in load_seeds(ATTENTION):
    for v in ({}, {"TARGET_PROGRAMS": 1}, {"TARGET_PROGRAMS": 1, "LARGE_T_SPLIT": 1}):  # 32 splits, 2, one (no merge)
        ns = {}
        exec(compile(apply(seed, v).source("main.py") if v else seed.source("main.py"), seed.name, "exec"), ns)
        o, lse = ns["run"](qn, qp, ckv, kpe, idx, 0.07)
        fin = torch.isfinite(rlse)
        out.append({"seed": seed.name, "variant": v, "out_err": (o.float() - ro.float()).abs().max().item(),
                    "lse_err": (lse[fin] - rlse[fin]).abs().max().item(), "nan": bool(torch.isnan(o.float()).any()),
                    "lse_inf_match": bool(torch.equal(torch.isneginf(lse), torch.isneginf(rlse)))})
print(json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_attention_seeds_handle_padding_anywhere_in_a_split():
    """-1 before the first valid index, inside a split and everywhere: the loop's bound and the -inf-safe
    rescaling give the reference's output (no NaN from an all-padding tile, lse -inf where nothing is valid)."""
    p = subprocess.run([sys.executable, "-c", PADDING, str(REPO)], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    rows = json.loads(p.stdout.strip().splitlines()[-1])
    assert rows and len(rows) == 3 * len(list((REPO / "skills" / "seeds" / ATTENTION).glob("[!_]*.py")))
    bad = [r for r in rows if r["nan"] or not r["lse_inf_match"] or r["out_err"] > 1e-2 or r["lse_err"] > 1e-3]
    assert not bad, bad


TIES = r"""
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
sys.path[:0] = [sys.argv[1], os.path.join(sys.argv[1], "tests", "operators")]
import torch
torch.set_num_threads(1)
from bot.agents.providers.offline import load_seeds
from bot.agents.tunables import apply
from harness.schema import load_workloads
from opkit import INDEXER, clone, judge, make, our_run, ours
defn, cfg = ours(INDEXER)
w = load_workloads(os.path.join(sys.argv[1], "definitions", INDEXER, "workloads.small.jsonl"), defn)[1]  # rows of 3-5k
out = []
for seed in load_seeds(INDEXER):
    for v in ({}, {"FILTER_BINS": 256}, {"FILTER_BINS": 256, "FILTER_CAP": 16}, {"FILTER_BINS": 256, "FILTER_LAST": True},
              {"SPLIT_BELOW_ROWS": 1}, {"CHAIN_SELECT": False}, {"RESIDENT_FROM_ROWS": 1},
              {"RESIDENT_FROM_ROWS": 1, "RESIDENT_BITS": 11},
              # the chained select on a GPU of 4 SMs: 2 rows of 80 pages take 4096-score chunks (2 blocks each) to fit;
              # on one of 1 SM two rows cannot fit, and the separate launches run instead
              {"CHAIN_SELECT": True, "_slots": 4}, {"CHAIN_SELECT": True, "_slots": 1},
              {"CHAIN_SELECT": True, "WIDE_MAX_SCORES": 0, "_slots": 4}):
        ns = {}
        tunables = {k: x for k, x in v.items() if not k.startswith("_")}
        exec(compile(apply(seed, tunables).source("main.py") if tunables else seed.source("main.py"), seed.name, "exec"), ns)
        if "_slots" in v:
            ns["_resident_programs"] = lambda dev, n=v["_slots"]: n
        gathers = []  # launches of the four-launch path's gather: none when the chained select ran

        residents = []  # launches of the resident select

        class Counted:
            def __init__(self, fn, log):
                self.fn, self.log = fn, log

            def __getitem__(self, grid):
                self.log.append(grid)
                return self.fn[grid]

        ns["_split_gather"] = Counted(ns["_split_gather"], gathers)
        ns["_select_resident"] = Counted(ns["_select_resident"], residents)
        for case in ("all-equal", "two-values"):
            x = make(defn, cfg, w, 0)
            if case == "all-equal":  # every score 0: one bucket, more ties than top-k
                x["weights"].zero_()
            else:  # the scores of one head, half of them tied at 0 by the relu
                x["weights"].zero_()
                x["weights"][:, 0] = 1.0
            got = ns["run"](**{k: clone(x)[k] for k in ("q_index_fp8", "k_index_cache_fp8", "weights", "seq_lens", "block_table")})
            r = judge(defn, cfg, w, x, {"topk_indices": got}, our_run(INDEXER)(**clone(x)))
            if "_slots" in v:  # chained where the grid fits the stand-in SMs, the separate launches otherwise
                path_ok = (not gathers) == (v["_slots"] >= 2)
            elif v.get("CHAIN_SELECT") is False:
                path_ok = bool(gathers)
            else:  # the default chains (these small tables fit the SMs); the resident select where asked
                path_ok = bool(residents) == ("RESIDENT_FROM_ROWS" in v)
                if v == {}:
                    path_ok = path_ok and not gathers
            if v.get("_slots") == 1:  # not chained: the separate launches keep their own 512-score chunks (10 a row)
                path_ok = path_ok and all(g[1] == 10 for g in gathers)
            out.append({"variant": v, "case": case, "ok": r.ok and path_ok,
                        "message": r.message[:300] + f" gather launches {len(gathers)}, resident {len(residents)}"})
            gathers.clear()
            residents.clear()
print(json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_indexer_selects_exactly_among_ties():
    """Rows whose scores tie far beyond top-k (all equal; half of them 0): every path of the indexer's
    selection, the filtered one included (its threshold bucket is then the whole row, more than the
    candidate buffer holds), returns top-k valid, distinct ids whose sorted scores match the reference's."""
    p = subprocess.run([sys.executable, "-c", TIES, str(REPO)], capture_output=True, text=True, timeout=900,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    rows = json.loads(p.stdout.strip().splitlines()[-1])
    assert len(rows) == 22 * len(list((REPO / "skills" / "seeds" / INDEXER).glob("[!_]*.py")))
    bad = [r for r in rows if not r["ok"]]
    assert not bad, bad


COMPILE_DRIVER = r"""
import importlib.util, json, os, pathlib, sys, tempfile
sys.path[:0] = [sys.argv[1], os.path.join(sys.argv[1], "tests", "operators")]
import torch
torch.set_num_threads(1)
from bot.agents.providers.offline import load_seeds
from bot.agents.tunables import apply
from harness.inputs import allocate_outputs
from harness.measure import call_solution
from harness.profile.triton_stats import compiled_launches
from harness.schema import Workload, load_workloads
from opkit import clone, make, ours
name, variants, extra = sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
defn, cfg = ours(name)
ws = load_workloads(os.path.join(sys.argv[1], "definitions", name, "workloads.small.jsonl"), defn)
ws += [Workload.model_validate(e) for e in extra]
inputs = [(w, make(defn, cfg, w, 0)) for w in ws]
out = []
for seed_sol in load_seeds(name):
    for v in variants:
        sol = apply(seed_sol, v) if v else seed_sol
        d = tempfile.mkdtemp()  # the compiler reads a kernel's source from its file (the interpreter does not)
        for src in sol.sources:
            pathlib.Path(d, src.path).write_text(src.content)
        spec = importlib.util.spec_from_file_location(f"seed_{len(out)}", os.path.join(d, "main.py"))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        with compiled_launches() as launches:
            for w, x in inputs:
                dest = allocate_outputs(defn, defn.resolve_axes(w.axes), "cpu")
                call_solution(mod.run, defn, clone(x), dest)
        out.append({"seed": seed_sol.name, "variant": v, "kernels": sorted({c.kernel for c in launches}),
                    "passes": sorted({(c.constexprs["FIRST"], c.constexprs["LAST"], c.options.get("launch_cooperative_grid", False))
                                      for c in launches if "FIRST" in c.constexprs}),
                    "errors": [f"{c.kernel} {c.constexprs}: {c.error}" for c in launches if c.error],
                    # the interpreter's workarounds (constexprs the seeds set only under TRITON_INTERPRET=1)
                    "interp": sorted({c.kernel for c in launches if c.constexprs.get("INTERP") or c.constexprs.get("WIDEN")})})
print(json.dumps(out))
"""


# The compile check's variants and extra workloads for the two seeds the interpreter tests above leave to
# their own files (tests/operators/test_moe_seed.py, the decode seed's tests): each path once.
COMPILE_VARIANTS = {
    **VARIANTS,
    DECODE: [{}, {"LARGE_FROM": 4, "LARGE_BV": 32, "LARGE_WARPS": 8}],  # the small-batch and the large-batch kernels
    MOE: [{},  # the small path (7 and 1 tokens) and the large one (70)
          {"ROUTE_BT": 16, "BLOCK_M": 128, "G1_BN": 64, "INTER_FP8": False, "PREFETCH_SCALES": 1},
          {"W_TMA": True, "SCALE_TMA": True, "SMALL_W_TMA": True, "SMALL_INTER_FP8": False, "SMALL_SPLIT_K": 1},
          {"SMALL_ROUTE_BT": 0, "SMALL_G1_BT": 32, "W_SCALE_ONE": True, "RESCALE_ACC": True, "G1_WARPS": 4, "G1_STAGES": 2}],
}
COMPILE_EXTRA = {
    **EXTRA_WORKLOADS,
    # the indexer at two timed sizes (compiled, not run: only the host code runs, so size costs nothing): 1 x 131k
    # scores (wide digits, chunks sized to the SMs) and 64 x 16k (8-bit digits: chained in 8192-score chunks,
    # or the resident select)
    INDEXER: [{"uuid": "compile-1x2048-pages", "axes": {"batch_size": 1, "max_num_pages": 2048, "num_pages": 2560},
               "inputs": {"seq_lens": {"type": "generated", "generator": "dsa_seq_lens",
                                       "params": {"fill_max": True, "mix": "long", "low": 126976}}}},
              {"uuid": "compile-64x256-pages", "axes": {"batch_size": 64, "max_num_pages": 256, "num_pages": 16640},
               "inputs": {"seq_lens": {"type": "generated", "generator": "dsa_seq_lens",
                                       "params": {"fill_max": True, "mix": "long", "low": 14336}}}}],
    DECODE: [{"uuid": "decode-batch-8", "axes": {"batch_size": 8}, "inputs": {"scale": {"type": "scalar", "value": 0.5}}}],
    MOE: [{"uuid": "moe-70-tokens", "axes": {"seq_len": 70},
           "inputs": {"routing_logits": {"type": "generated", "generator": "moe_routing_logits", "params": {}},
                      "local_expert_offset": {"type": "scalar", "value": 64},
                      "routed_scaling_factor": {"type": "scalar", "value": 2.5}}}],
}


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", [INDEXER, ATTENTION, PREFILL, DECODE, MOE], ids=["indexer", "attention", "gdn_prefill", "gdn_decode", "moe"])
def test_seed_variants_compile_for_sm90(name):
    """Every launch the seeds make at every variant above, compiled for sm_90 by Triton's real compiler
    (to a cubin, no GPU): the interpreter runs code the compiler rejects, and a variant that does not
    compile costs a device call to find out."""
    extra = COMPILE_EXTRA.get(name, [])
    p = subprocess.run([sys.executable, "-c", COMPILE_DRIVER, str(REPO), name, json.dumps(COMPILE_VARIANTS[name]), json.dumps(extra)],
                       capture_output=True, text=True, timeout=1200, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    rows = json.loads(p.stdout.strip().splitlines()[-1])
    assert len(rows) == len(COMPILE_VARIANTS[name]) * len(list((REPO / "skills" / "seeds" / name).glob("[!_]*.py")))
    assert all(r["kernels"] for r in rows), [r["variant"] for r in rows if not r["kernels"]]
    # the chained select compiles as the GPU runs it: every pass, and the waits between them, in one cooperative
    # launch (wide digits up to the 131k-score tables; 8-bit ones at 1M scores, which fit the SMs only in
    # 8192-score chunks)
    def chained(v):
        if v.get("WIDE_MAX_SCORES") == 0:
            return [[0, 4, True]]
        return [[0, 3, True]] + ([[0, 4, True]] if v.get("CHAIN_MAX_CHUNK", 4096) >= 8192 else [])
    assert all(r["passes"] == chained(r["variant"]) for r in rows
               if name == INDEXER and (r["variant"].get("CHAIN_SELECT") or r["variant"] == {})), \
        [r for r in rows if "CHAIN_SELECT" in r["variant"]]
    bad = [r for r in rows if r["errors"]]
    assert not bad, [(r["variant"], r["errors"][0][:600]) for r in bad[:4]]
    # what is compiled is what the GPU runs: the interpreter's workarounds are keyed to the interpreter, not
    # to the CPU tensors the host code is given here
    assert not [r for r in rows if r["interp"]], [(r["variant"], r["interp"]) for r in rows if r["interp"]]
