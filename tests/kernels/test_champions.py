"""The submission record: every champion on main is the kernel the pointer names, its leaderboard is
the one the pointer renders, and it passes `kbot eval` (CPU: the Triton interpreter on small workloads;
GPU: every workload, `-m gpu` on the device)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.promotion.champion import render_leaderboard
from harness.schema import load_solution

REPO = Path(__file__).resolve().parents[2]
POINTERS = sorted((REPO / "kernels").glob("*/champion.json"))


def _small(definition: str, n: int) -> list[dict]:
    """The first ``n`` of the definition's interpreter-sized workloads (workloads.small.jsonl)."""
    lines = (REPO / "definitions" / definition / "workloads.small.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()][:n]


# Small enough for the interpreter, and each one takes a different path through the kernels: decode
# with the state in and absent; prefill short (token by token) and chunked, with an empty sequence.
CPU_WORKLOADS = {
    "gdn_decode_qk4_v8_d128_k_last": [
        {"uuid": "cpu-dec-b2", "axes": {"batch_size": 2}, "inputs": {"scale": {"type": "scalar", "value": 0.5}}},
        {"uuid": "cpu-dec-b1-absent", "axes": {"batch_size": 1},
         "inputs": {"scale": {"type": "scalar", "value": 0.0}, "state": {"type": "generated", "generator": "absent"}}},
    ],
    "gdn_prefill_qk4_v8_d128_k_last": [
        {"uuid": "cpu-pre-short", "axes": {"total_seq_len": 12, "num_seqs": 1, "len_cu_seqlens": 2},
         "inputs": {"cu_seqlens": {"type": "generated", "generator": "gdn_cu_seqlens", "params": {"mix": "equal"}},
                    "scale": {"type": "scalar", "value": 0.3}}},
        {"uuid": "cpu-pre-chunked", "axes": {"total_seq_len": 60, "num_seqs": 3, "len_cu_seqlens": 4},
         "inputs": {"cu_seqlens": {"type": "generated", "generator": "gdn_cu_seqlens", "params": {"mix": "skewed", "empty": 1}},
                    "scale": {"type": "scalar", "value": 1.0}}},
    ],
    # few tokens over a mixed and a long context: the split-KV path with its merge, sm_scale varied
    "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64": _small("dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64", 2),
    # rows shorter and longer than top-k (pass-through and the radix select), then only longer ones
    "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64": _small("dsa_topk_indexer_fp8_h64_d128_topk2048_ps64", 2),
    # one token at the full 7168 x 2048 sizes (the definition fixes them): the small-batch path
    "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048": [
        w["workload"] for w in _small("moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048", 2) if w["workload"]["axes"]["seq_len"] == 1],
}


def _pointer(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.parametrize("pointer", POINTERS, ids=[p.parent.name for p in POINTERS])
def test_champion_is_the_named_kernel_and_the_leaderboard_is_rendered_from_it(pointer):
    doc = _pointer(pointer)
    assert doc["definition"] == pointer.parent.name
    sol = load_solution(REPO / doc["solution_path"])
    assert sol.name == doc["solution"] and sol.definition == doc["definition"]
    assert sol.content_hash() == doc["solution_hash"], "the kernel on main is not the one that was measured"
    for src in sol.sources:  # the sources beside solution.json are the ones it embeds
        assert (REPO / doc["solution_path"]).parent.joinpath(src.path).read_text() == src.content
    assert (pointer.parent / "LEADERBOARD.md").read_text() == render_leaderboard(doc)
    assert isinstance(doc["pr"], int), "a champion on main arrives by a promoted pull request"
    assert doc["summary"]["speedup_vs_previous"] > 1.0


@pytest.mark.slow
@pytest.mark.timeout(2400)  # the Triton interpreter: minutes on a loaded 2-core machine (MoE: ~20)
@pytest.mark.parametrize("pointer", [p for p in POINTERS if p.parent.name in CPU_WORKLOADS], ids=lambda p: p.parent.name)
def test_champion_passes_kbot_eval_on_the_cpu(pointer, tmp_path):
    doc = _pointer(pointer)
    wl = tmp_path / "workloads.jsonl"
    wl.write_text("".join(json.dumps(w) + "\n" for w in CPU_WORKLOADS[doc["definition"]]))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "harness.cli", "eval", str(REPO / doc["solution_path"]), "-d", doc["definition"],
           "--device", "cpu", "-w", str(wl), "--trials", "1", "--out", str(tmp_path / "run"), "--json",
           "--timeout", "2000", "--timing", "min_iters=2", "--timing", "warmup=0", "--timing", "recheck=1",
           "--timing", "budget_s=0.01", "--timing", "chunk=1", "--timing", "rotate_sets=1"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=2300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert [w["status"] for w in report["workloads"]] == ["PASSED"] * len(CPU_WORKLOADS[doc["definition"]])


@pytest.mark.gpu
@pytest.mark.parametrize("pointer", POINTERS, ids=[p.parent.name for p in POINTERS])
def test_champion_passes_every_workload_on_the_gpu(pointer, tmp_path):
    doc = _pointer(pointer)
    cmd = [sys.executable, "-m", "harness.cli", "eval", str(REPO / doc["solution_path"]), "-d", doc["definition"],
           "--device", "cuda", "--out", str(tmp_path / "run")]
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=tmp_path, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
