"""Our references agree with the official ones (exec'd from ../shared) on random valid inputs.

CPU-sized: variable axes are small; MoE's const axes (hidden 7168, intermediate 2048) are shrunk in
both our definition and, by exact text substitution, in the official reference, whose math does not
depend on them. Full-size checks of the official references are opt-in (see conftest.py) and are run
on the GPU by scripts/gpu/operators_full.py.
"""

from __future__ import annotations

import math
import time

import pytest
import torch

from opkit import ATTENTION, DECODE, INDEXER, MOE, PREFILL, exec_reference, gen, judge, make, official, our_run, ours, scalar, shrink, workload, clone


def close(got: torch.Tensor, exp: torch.Tensor, rel: float, what: str) -> None:
    """|got - exp| <= rel * |exp| + rel * max|exp|: a few units in the last place of the output dtype."""
    g, e = got.double(), exp.double()
    assert g.shape == e.shape, what
    assert torch.isfinite(g).all() == torch.isfinite(e).all(), what
    fin = torch.isfinite(e)
    assert torch.equal(g[~fin], e[~fin]), f"{what}: non-finite entries differ"
    bound = rel * e[fin].abs() + rel * float(e[fin].abs().max() if fin.any() else 0) + 1e-30
    diff = (g[fin] - e[fin]).abs()
    assert bool((diff <= bound).all()), f"{what}: max diff {float(diff.max()):.3g}, worst ratio {float((diff / bound).max()):.3g}"


BF16 = 2.0**-7  # two bf16 ulps relative
F32 = 1e-5


# ----------------------------------------------------------------------------- GDN


@pytest.mark.parametrize("B", [1, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_gdn_decode_matches_official(shared, B, seed):
    defn, cfg = ours(DECODE)
    ref = exec_reference(official(shared, DECODE).reference)
    w = workload({"batch_size": B}, scale=scalar(1 / math.sqrt(128)))
    x = make(defn, cfg, w, seed)
    o1, s1 = our_run(DECODE)(**clone(x))
    o2, s2 = ref(**clone(x))
    close(o1.float(), o2.float(), BF16, "output")
    close(s1, s2, F32, "new_state")
    assert judge(defn, cfg, w, x, (o1, s1), (o2, s2)).ok


def test_gdn_decode_default_scale_and_missing_state(shared):
    defn, cfg = ours(DECODE)
    ref = exec_reference(official(shared, DECODE).reference)
    x = make(defn, cfg, workload({"batch_size": 2}, scale=scalar(0.0)), 3)
    x["state"] = None
    o1, s1 = our_run(DECODE)(**clone(x))
    o2, s2 = ref(**clone(x))
    close(o1.float(), o2.float(), BF16, "output")
    close(s1, s2, F32, "new_state")


@pytest.mark.parametrize("mix,n,total", [("random", 3, 40), ("skewed", 4, 37), ("equal", 1, 24)])
def test_gdn_prefill_matches_official(shared, mix, n, total):
    defn, cfg = ours(PREFILL)
    ref = exec_reference(official(shared, PREFILL).reference)
    w = workload({"total_seq_len": total, "num_seqs": n, "len_cu_seqlens": n + 1}, cu_seqlens=gen("gdn_cu_seqlens", mix=mix), scale=scalar(0.0))
    for seed in (0, 1):
        x = make(defn, cfg, w, seed)
        o1, s1 = our_run(PREFILL)(**clone(x))
        o2, s2 = ref(**clone(x))
        close(o1.float(), o2.float(), BF16, "output")
        close(s1, s2, F32, "new_state")
        assert judge(defn, cfg, w, x, (o1, s1), (o2, s2)).ok


def test_gdn_prefill_many_chunks_match_official(shared):
    """Our reference works in 64-token chunks: sequences spanning several chunks, a partial last chunk,
    an empty sequence, a non-default scale and an absent state agree with the official token-by-token loop."""
    defn, cfg = ours(PREFILL)
    ref = exec_reference(official(shared, PREFILL).reference)
    w = workload({"total_seq_len": 330, "num_seqs": 4, "len_cu_seqlens": 5}, cu_seqlens=gen("gdn_cu_seqlens", mix="random", empty=1), scale=scalar(0.7))
    for seed, drop_state in ((0, False), (1, True)):
        x = make(defn, cfg, w, seed)
        if drop_state:
            x["state"] = None
        assert int((x["cu_seqlens"][1:] - x["cu_seqlens"][:-1]).max()) > 64
        o1, s1 = our_run(PREFILL)(**clone(x))
        o2, s2 = ref(**clone(x))
        close(o1.float(), o2.float(), BF16, "output")
        close(s1, s2, F32, "new_state")
        assert judge(defn, cfg, w, x, (o1, s1), (o2, s2)).ok


def test_gdn_prefill_without_state(shared):
    defn, cfg = ours(PREFILL)
    ref = exec_reference(official(shared, PREFILL).reference)
    x = make(defn, cfg, workload({"total_seq_len": 20, "num_seqs": 2, "len_cu_seqlens": 3}, scale=scalar(0.0)), 5)
    x["state"] = None
    o1, s1 = our_run(PREFILL)(**clone(x))
    o2, s2 = ref(**clone(x))
    close(o1.float(), o2.float(), BF16, "output")
    close(s1, s2, F32, "new_state")


# ----------------------------------------------------------------------------- DSA


@pytest.mark.parametrize("mix", ["mixed", "short", "long"])
def test_indexer_matches_official(shared, mix):
    defn, cfg = ours(INDEXER)
    ref = exec_reference(official(shared, INDEXER).reference)
    w = workload({"batch_size": 3, "max_num_pages": 36, "num_pages": 150}, seq_lens=gen("dsa_seq_lens", mix=mix))
    for seed in (0, 1):
        x = make(defn, cfg, w, seed)
        mine = our_run(INDEXER)(**clone(x))
        theirs = ref(**clone(x))[0]
        assert mine.dtype == theirs.dtype == torch.int32
        # Same index *sets* per row (order within equal scores may differ), and the comparator agrees.
        for b in range(3):
            assert set(mine[b].tolist()) == set(theirs[b].tolist()), f"row {b}"
        r = judge(defn, cfg.model_copy(update={"tolerance": cfg.tolerance.model_copy(update={"atol": 0.0, "rtol": 0.0})}), w, x, mine, (theirs,))
        assert r.ok, r.message


@pytest.mark.parametrize("mix,tps", [("mixed", 1), ("short", 1), ("long", 3)])
def test_sparse_attention_matches_official(shared, mix, tps):
    defn, cfg = ours(ATTENTION)
    ref = exec_reference(official(shared, ATTENTION).reference)
    w = workload({"num_tokens": 5, "num_pages": 200}, sparse_indices=gen("dsa_sparse_indices", mix=mix, tokens_per_seq=tps, max_context=4000), sm_scale=scalar(1 / math.sqrt(192)))
    x = make(defn, cfg, w, 7)
    o1, l1 = our_run(ATTENTION)(**clone(x))
    o2, l2 = ref(**clone(x))
    close(o1.float(), o2.float(), BF16, "output")
    close(l1, l2, F32, "lse")
    assert judge(defn, cfg, w, x, (o1, l1), (o2, l2)).ok


def test_sparse_attention_all_padding_row(shared):
    """A token with no valid index: output 0 and lse -inf, as the official reference."""
    defn, cfg = ours(ATTENTION)
    ref = exec_reference(official(shared, ATTENTION).reference)
    x = make(defn, cfg, workload({"num_tokens": 2, "num_pages": 64}, sm_scale=scalar(0.07)), 1)
    x["sparse_indices"][1] = -1
    o1, l1 = our_run(ATTENTION)(**clone(x))
    o2, l2 = ref(**clone(x))
    assert torch.equal(o1[1], o2[1]) and bool((o1[1] == 0).all())
    assert torch.equal(l1[1], l2[1]) and bool(torch.isinf(l1[1]).all())
    close(o1.float(), o2.float(), BF16, "output")


# ----------------------------------------------------------------------------- MoE

SMALL = dict(hidden_size=256, intermediate_size=128, gemm1_out_size=256, num_hidden_blocks=2, num_intermediate_blocks=1, num_gemm1_out_blocks=2)
OFFICIAL_SMALL = {"7168": "256", "2048": "128"}  # the official reference hard-codes H and I


@pytest.mark.parametrize("T,offset", [(1, 0), (7, 192), (64, 96)])
def test_moe_matches_official_shrunk(shared, T, offset):
    defn, cfg = ours(MOE)
    defn = shrink(defn, **SMALL)
    ref = exec_reference(official(shared, MOE).reference, OFFICIAL_SMALL)
    w = workload({"seq_len": T}, routing_logits=gen("moe_routing_logits"), local_expert_offset=scalar(offset), routed_scaling_factor=scalar(2.5))
    for seed in (0, 1, 2):
        x = make(defn, cfg, w, seed)
        mine, theirs = our_run(MOE)(**clone(x)), ref(**clone(x))
        close(mine.float(), theirs.float(), BF16, f"output seed {seed}")
        assert judge(defn, cfg, w, x, mine, theirs).ok


@pytest.mark.slow
def test_moe_full_size_small_batch_runs_fast():
    """Our reference at the real sizes (2 tokens): quick on a CPU, sane output."""
    defn, cfg = ours(MOE)
    w = workload({"seq_len": 2}, routing_logits=gen("moe_routing_logits"), local_expert_offset=scalar(64), routed_scaling_factor=scalar(2.5))
    t0 = time.perf_counter()
    x = make(defn, cfg, w, 0)
    out = our_run(MOE)(**x)
    assert out.shape == (2, 7168) and out.dtype == torch.bfloat16
    assert bool(torch.isfinite(out.float()).all())
    assert time.perf_counter() - t0 < 60


def test_moe_full_size_matches_official(shared, official_refs):
    """Opt-in: ~20 GB of memory for the official reference (it dequantizes all 32 experts)."""
    defn, cfg = ours(MOE)
    ref = exec_reference(official(shared, MOE).reference)
    w = workload({"seq_len": 3}, routing_logits=gen("moe_routing_logits"), local_expert_offset=scalar(32), routed_scaling_factor=scalar(2.5))
    x = make(defn, cfg, w, 0)
    mine, theirs = our_run(MOE)(**clone(x)), ref(**clone(x))
    close(mine.float(), theirs.float(), BF16, "output")


def test_indexer_and_attention_full_pool_match_official(shared, official_refs):
    """Opt-in: the contest's page pool and widest tables."""
    for name, w in [
        (INDEXER, workload({"batch_size": 8, "max_num_pages": 91, "num_pages": 11923}, seq_lens=gen("dsa_seq_lens", mix="mixed"))),
        (ATTENTION, workload({"num_tokens": 16, "num_pages": 2048}, sparse_indices=gen("dsa_sparse_indices", mix="mixed"), sm_scale=scalar(1 / math.sqrt(192)))),
    ]:
        defn, cfg = ours(name)
        ref = exec_reference(official(shared, name).reference)
        x = make(defn, cfg, w, 0)
        r = judge(defn, cfg, w, x, our_run(name)(**clone(x)), ref(**clone(x)))
        assert r.ok, f"{name}: {r.message}"


def test_gdn_prefill_empty_sequence_like_official(shared):
    """cu_seqlens may repeat a value (an empty sequence): no output rows, and new_state zeros as the official."""
    defn, cfg = ours(PREFILL)
    ref = exec_reference(official(shared, PREFILL).reference)
    x = make(defn, cfg, workload({"total_seq_len": 12, "num_seqs": 3, "len_cu_seqlens": 4}, scale=scalar(0.0)), 2)
    x["cu_seqlens"] = torch.tensor([0, 5, 5, 12], dtype=torch.int64)
    o1, s1 = our_run(PREFILL)(**clone(x))
    o2, s2 = ref(**clone(x))
    close(o1.float(), o2.float(), BF16, "output")
    close(s1, s2, F32, "new_state")
    assert bool((s1[1] == 0).all())


def test_indexer_empty_sequence_like_official(shared):
    defn, cfg = ours(INDEXER)
    ref = exec_reference(official(shared, INDEXER).reference)
    w = workload({"batch_size": 3, "max_num_pages": 34, "num_pages": 120}, seq_lens=gen("dsa_seq_lens", mix="mixed"))
    x = make(defn, cfg, w, 4)
    x["seq_lens"][1] = 0
    mine, theirs = our_run(INDEXER)(**clone(x)), ref(**clone(x))[0]
    assert bool((mine[1] == -1).all()) and bool((theirs[1] == -1).all())
    assert judge(defn, cfg, w, x, mine, (theirs,)).ok
