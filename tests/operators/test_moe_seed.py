"""The MoE seed kernels (skills/seeds/<moe>/) on the CPU through Triton's interpreter.

At shrunk hidden/intermediate sizes (the kernels take every size from the tensors) both of the seed's
paths and a few tunable variants are judged like a candidate: the official verdict and kbot's
per-token check. The full-size run through ``kbot eval --device cpu`` on workloads.small.jsonl takes
minutes (the interpreter at 7168 x 4096 x 32 experts): it runs with KBOT_MOE_SEED_EVAL=1.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch

from opkit import MOE, REPO, clone, gen, judge, make, our_run, ours, scalar, shrink, workload
from test_references import SMALL

SEEDS_DIR = REPO / "skills" / "seeds" / MOE


def seed_module(monkeypatch, name="grouped", **tunables):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # read when @triton.jit runs, i.e. at import below
    spec = importlib.util.spec_from_file_location(f"moe_seed_{name}", SEEDS_DIR / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for k, v in tunables.items():
        assert hasattr(mod, k), k
        setattr(mod, k, v)
    return mod


def judged(mod, T, offset, seed, **params):
    defn, cfg = ours(MOE)
    defn = shrink(defn, **SMALL)
    w = workload({"seq_len": T}, routing_logits=gen("moe_routing_logits", **params), local_expert_offset=scalar(offset),
                 routed_scaling_factor=scalar(1.5))
    x = make(defn, cfg, w, seed)
    expected = our_run(MOE)(**clone(x))
    out = torch.full((T, defn.axes["hidden_size"].value), float("nan"), dtype=torch.bfloat16)  # destination poisoned
    got = mod.run(**clone(x), output=out)
    assert got is out
    return judge(defn, cfg, w, x, got, expected)


def assert_passes_both(r):
    assert r.ok, r.message
    assert r.checks["token_l2"].ok, r.checks["token_l2"].message


def test_seed_declares_tunables_with_the_default_first():
    from bot.agents.offline import load_seeds
    from bot.agents.tunables import solution_tunables
    from harness.guard.static import check_solution

    (seed,) = load_seeds(MOE)
    ts = solution_tunables(seed)
    assert {"SMALL_MAX_TOKENS", "SMALL_SPLIT_K", "BLOCK_M", "INTER_FP8", "NUM_STAGES"} <= {t.name for t in ts}
    assert all(t.index == 0 for t in ts), [(t.name, t.value, t.options) for t in ts if t.index]  # start = defaults
    assert check_solution(seed, ours(MOE)[0]) == []  # the static guard: no host compute, no sync


@pytest.mark.slow
@pytest.mark.parametrize("T,offset", [(1, 32), (5, 224), (40, 0), (70, 96)])
def test_seed_defaults_pass_both_checks(monkeypatch, T, offset):
    """1-40 tokens take the small-batch path (swap-AB, split-K, bf16 intermediate), 70 the large one
    (persistent grouped GEMMs, FP8 intermediate)."""
    mod = seed_module(monkeypatch)
    for seed in (0, 1):
        assert_passes_both(judged(mod, T, offset, seed))


@pytest.mark.slow
@pytest.mark.parametrize("T,tunables", [
    (5, {"SMALL_MAX_TOKENS": 0}),                                      # the large path for a tiny batch
    (70, {"INTER_FP8": False, "BLOCK_N2": 256}),                       # bf16 intermediate
    (70, {"BLOCK_M": 128, "GROUP_M": 1, "BLOCK_N2": 64}),
    (5, {"SMALL_SPLIT_K": 1, "SMALL_BN": 32, "SMALL_BT": 32}),
    (33, {"SMALL_SPLIT_K": 8, "SMALL_BN": 128}),
])
def test_seed_variants_pass_both_checks(monkeypatch, T, tunables):
    mod = seed_module(monkeypatch, **tunables)
    assert_passes_both(judged(mod, T, 64, 0))


@pytest.mark.slow
def test_seed_writes_zeros_for_tokens_that_reach_no_local_expert(monkeypatch):
    mod = seed_module(monkeypatch)
    r = judged(mod, 6, 160, 3, local_share=0.0, hot_local=0, visible_bias_tokens=0)
    assert_passes_both(r)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("KBOT_MOE_SEED_EVAL") != "1", reason="full-size kbot eval on the CPU takes minutes: set KBOT_MOE_SEED_EVAL=1")
def test_seed_passes_kbot_eval_on_the_small_workloads(tmp_path):
    from bot.agents.offline import load_seeds

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
