"""The MoE seed kernels (skills/seeds/<moe>/) on the CPU through Triton's interpreter.

At shrunk hidden/intermediate sizes (the kernels take every size from the tensors) both of the seed's
paths and a few tunable variants are judged like a candidate: the official verdict and kbot's
per-token check, in a process of its own (moe_seed_run.py: the interpreter must be on before Triton's
language is first imported). The full-size run through ``kbot eval --device cpu`` on workloads.small.jsonl takes
minutes (the interpreter at 7168 x 4096 x 32 experts): it runs with KBOT_MOE_SEED_EVAL=1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opkit import MOE, REPO, ours


def run_cases(cases):
    """Results of tests/operators/moe_seed_run.py (a process of its own, Triton's interpreter on)."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, str(Path(__file__).with_name("moe_seed_run.py")), json.dumps(cases)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def assert_all_pass_both(results, n):
    assert len(results) == n
    for r in results:
        assert r["same_buffer"], "run() must write into and return the destination buffer"
        assert r["ok"], (r["T"], r.get("tunables"), r["message"])
        assert r["checks"]["token_l2"]["ok"], (r["T"], r.get("tunables"), r["checks"]["token_l2"]["message"])


def test_seed_declares_tunables_with_the_default_first():
    from bot.agents.providers.offline import load_seeds
    from bot.agents.tunables import solution_tunables
    from harness.guard.static import check_solution

    (seed,) = load_seeds(MOE)
    ts = solution_tunables(seed)
    assert {"SMALL_MAX_TOKENS", "SMALL_SPLIT_K", "BLOCK_M", "INTER_FP8", "NUM_STAGES"} <= {t.name for t in ts}
    assert all(t.index == 0 for t in ts), [(t.name, t.value, t.options) for t in ts if t.index]  # start = defaults
    assert check_solution(seed, ours(MOE)[0]) == []  # the static guard: no host compute, no sync


@pytest.mark.slow
def test_seed_defaults_pass_both_checks():
    """1-62 tokens take the small-batch path (swap-AB, split-K, FP8 intermediate), 70 the large one
    (persistent grouped GEMMs, FP8 intermediate); two seeds each (62: one)."""
    cases = [{"T": T, "offset": off, "seed": s} for T, off in ((1, 32), (5, 224), (40, 0), (70, 96)) for s in (0, 1)]
    cases.append({"T": 62, "offset": 96, "seed": 0})  # the H200 run's seq_len 62 (64-token routing tile, 16 warps)
    assert_all_pass_both(run_cases(cases), len(cases))


@pytest.mark.slow
def test_seed_variants_pass_both_checks():
    cases = [{"T": T, "offset": 64, "seed": 0, "tunables": t} for T, t in (
        (5, {"SMALL_MAX_TOKENS": 0}),                                      # the large path for a tiny batch
        (70, {"INTER_FP8": False, "BLOCK_N2": 256}),                       # bf16 intermediate
        (70, {"BLOCK_M": 128, "GROUP_M": 1, "BLOCK_N2": 64}),
        (5, {"SMALL_SPLIT_K": 1, "SMALL_BN": 32, "SMALL_BT": 32}),
        (33, {"SMALL_SPLIT_K": 8, "SMALL_BN": 128}),
        (40, {"SMALL_ROUTE_MAX": 16}),                                     # small GEMMs after the multi-program routing
        (70, {"G2_BLOCK_M": 128, "G2_WARPS": 8, "G1_PROGS_PER_SM": 1}),    # GEMM2's own m-tile
        (70, {"G1_BN": 64}),                                               # 64-column requant blocks, GEMM2 K steps of 64
        (70, {"G1_BN": 64, "BLOCK_M": 128, "INTER_FP8": False}),
        (70, {"BIG_TILE_TOKENS": 64}),                                     # the big-batch tiles, as chosen by run()
        (70, {"PREFETCH_SCALES": 1}),                                      # next step's scales loaded a step early
        (70, {"PREFETCH_SCALES": 1, "INTER_FP8": False, "BIG_TILE_TOKENS": 64}),
        (5, {"PREFETCH_SCALES": 1}),                                       # the swap-AB GEMM1 of small batches
        (40, {"SMALL_ROUTE_BT": 4}),                                       # routing over 10 programs, positions in one
        (5, {"SMALL_ROUTE_BT": 2, "SMALL_G2_STAGES": 8, "SMALL_PROGS_PER_SM": 2, "SMALL_STAGES": 6}),
        (40, {"SMALL_ROUTE_BT": 0}),                                       # all routing in one program
        (40, {"SMALL_INTER_FP8": True, "SMALL_G1_BT": 32}),                # FP8 x FP8 swap GEMM2, 32-token GEMM1 tiles
        (1, {"SMALL_INTER_FP8": False}),                                   # bf16 intermediate, 16-bit swap GEMM2
        (70, {"ROUTE_BT": 16}),                                            # the large path's routing in 16-token programs
        (70, {"RESCALE_ACC": True, "BIG_TILE_TOKENS": 64}),                # GEMM1 accumulating in place, scales after the loop
        (70, {"RESCALE_ACC": True, "W_SCALE_ONE": True, "PREFETCH_SCALES": 1}),
        (70, {"RESCALE_ACC": True, "W_SCALE_ONE": True, "BIG_TILE_TOKENS": 64, "BIG_G1_BLOCK_M": 64, "G1_WARPS": 4,
              "G1_STAGES": 2}),                                            # GEMM1 two CTAs per SM (64-row tiles, 4 warps)
    )]
    # a batch whose tokens mostly reach no local expert: those rows must be written as zeros
    cases.append({"T": 6, "offset": 160, "seed": 3, "params": {"local_share": 0.0, "hot_local": 0, "visible_bias_tokens": 0}})
    assert_all_pass_both(run_cases(cases), len(cases))


# sizes where every scale array has a multiple of 4 columns (SCALE_TMA's [BM, 4] boxes need 16-byte rows)
TMA_DIMS = dict(hidden_size=512, intermediate_size=512, gemm1_out_size=1024, num_hidden_blocks=4, num_intermediate_blocks=4,
                num_gemm1_out_blocks=8)


@pytest.mark.slow
def test_seed_tma_variants_pass_both_checks_and_take_their_tma_paths():
    """The TMA paths (descriptors built on the host) give the same verdicts, and each case built exactly the
    descriptors it names (one call): weight tiles [BN, 128], GEMM2's intermediate [BM, 128], scale boxes [BM, 4]."""
    cases = [  # (T, tunables, the descriptor blocks that must be built)
        (70, {"W_TMA": True}, [[128, 128], [64, 128], [128, 128]]),         # large path, 64-row tiles
        (70, {"W_TMA": True, "BIG_TILE_TOKENS": 64, "G1_BN": 64}, [[64, 128], [128, 64], [128, 64]]),
        (70, {"W_TMA": True, "INTER_FP8": False}, [[128, 128]]),           # bf16 intermediate: GEMM2 keeps pointers
        (40, {"SMALL_W_TMA": True}, [[64, 128], [16, 128], [64, 128]]),     # the swap-AB GEMMs
        (5, {"SMALL_W_TMA": True, "SMALL_INTER_FP8": False, "SMALL_BN": 32}, [[32, 128]]),
        (70, {"SCALE_TMA": True}, [[64, 4], [64, 4]]),                      # scales through [BM, 4] boxes
        (70, {"SCALE_TMA": True, "W_TMA": True, "BIG_TILE_TOKENS": 64}, [[128, 128], [128, 4], [128, 128], [128, 128], [128, 4]]),
        (5, {"SCALE_TMA": True, "SMALL_MAX_TOKENS": 0}, [[64, 4], [64, 4]]),  # the large path for a tiny batch
        # one weight scale per tile and K step (4 scale blocks along N here: a wrong block shows)
        (70, {"W_SCALE_ONE": True, "W_TMA": True, "PREFETCH_SCALES": 1}, [[128, 128], [64, 128], [128, 128]]),
        (70, {"W_SCALE_ONE": True, "BIG_TILE_TOKENS": 64, "INTER_FP8": False}, []),
        (40, {"W_SCALE_ONE": True, "SMALL_W_TMA": True}, [[64, 128], [16, 128], [64, 128]]),
        (5, {"W_SCALE_ONE": True, "SMALL_INTER_FP8": False, "SMALL_BN": 32}, []),
    ]
    results = run_cases([{"T": T, "offset": 64, "seed": i % 2, "tunables": t, "dims": TMA_DIMS} for i, (T, t, _) in enumerate(cases)])
    assert_all_pass_both(results, len(cases))
    for r, (_T, t, blocks) in zip(results, cases):
        assert sorted(r["descriptors"]) == sorted(blocks), (t, r["descriptors"])
    # without the tunables no descriptor is built
    (plain,) = run_cases([{"T": 70, "offset": 64, "seed": 0, "dims": TMA_DIMS}])
    assert plain["ok"] and plain["descriptors"] == []


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("KBOT_MOE_SEED_EVAL") != "1", reason="full-size kbot eval on the CPU takes minutes: set KBOT_MOE_SEED_EVAL=1")
def test_seed_passes_kbot_eval_on_the_small_workloads(tmp_path):
    from bot.agents.providers.offline import load_seeds

    (seed,) = load_seeds(MOE)
    sol = tmp_path / "seed.json"
    sol.write_text(seed.to_json())
    out = tmp_path / "run"
    p = subprocess.run(
        [sys.executable, "-m", "harness.cli", "eval", str(sol), "-d", MOE, "-w", str(REPO / "definitions" / MOE / "workloads.small.jsonl"),
         "--device", "cpu", "--trials", "1", "--budget", "0.01", "--timing", "warmup=0", "--timing", "min_iters=1",
         "--timing", "chunk=1", "--timing", "recheck=1", "--timeout", "2400", "--out", str(out)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=3600,
    )
    report = json.loads((out / "report.json").read_text())
    assert [w["status"] for w in report["workloads"]] == ["PASSED"] * len(report["workloads"]), p.stdout[-3000:]
