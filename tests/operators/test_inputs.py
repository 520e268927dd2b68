"""Structured inputs are valid by construction, in the layouts the definitions specify."""

from __future__ import annotations

import pytest
import torch

from harness.operators import dsa, moe
from harness.schema import SchemaError
from opkit import ATTENTION, DECODE, INDEXER, MOE, PREFILL, REPO, gen, make, ours, scalar, shrink, workload
from test_references import SMALL


# ----------------------------------------------------------------------------- DSA indexer


@pytest.mark.parametrize("mix", ["uniform", "short", "long", "mixed"])
def test_indexer_lengths_and_block_table_are_consistent(mix):
    defn, cfg = ours(INDEXER)
    B, mp, P = 6, 40, 300
    x = make(defn, cfg, workload({"batch_size": B, "max_num_pages": mp, "num_pages": P}, seq_lens=gen("dsa_seq_lens", mix=mix, fill_max=False)), 1)
    lens, table = x["seq_lens"], x["block_table"]
    assert lens.dtype == torch.int32 and table.dtype == torch.int32 and table.shape == (B, mp)
    assert bool((lens >= 1).all()) and bool((lens <= mp * 64).all())
    if mix == "short":
        assert bool((lens < 2048).all())
    if mix == "long":
        assert bool((lens >= 2048).all())
    used = []
    for b in range(B):
        n = -(-int(lens[b]) // 64)
        used += table[b, :n].tolist()
    assert len(used) == len(set(used)), "a page belongs to two sequences"
    assert all(0 <= p < P for p in table.flatten().tolist()), "every table entry is a real page"


def test_indexer_fill_max_makes_one_full_row():
    defn, cfg = ours(INDEXER)
    x = make(defn, cfg, workload({"batch_size": 5, "max_num_pages": 33, "num_pages": 200}, seq_lens=gen("dsa_seq_lens", mix="short")), 2)
    assert max(-(-int(n) // 64) for n in x["seq_lens"]) == 33


def test_indexer_too_few_pages_is_a_clear_error():
    defn, cfg = ours(INDEXER)
    with pytest.raises(SchemaError, match="num_pages"):
        make(defn, cfg, workload({"batch_size": 8, "max_num_pages": 64, "num_pages": 40}, seq_lens=gen("dsa_seq_lens", mix="long")), 0)


def test_k_cache_layout_is_fp8_data_then_scales_per_page():
    """Bytes of page p: token t's 128 fp8 values at [t*128, t*128+128), its float32 scale at
    page_size*128 + 4t; dequantized values approximate the drawn keys to fp8 precision."""
    g = torch.Generator().manual_seed(0)
    k = torch.randn(3, 64, 128, generator=g) * torch.rand(3, 64, 1, generator=g)
    k8, sc = dsa.quantize_fp8_rows(k)
    packed = dsa.pack_k_cache(k8, sc)
    assert packed.dtype == torch.int8 and packed.shape == (3, 64, 1, 132)
    raw = packed.view(torch.uint8).reshape(3, 64 * 132)
    p, t = 2, 37
    assert torch.equal(raw[p, t * 128 : t * 128 + 128], k8[p, t].view(torch.uint8))
    assert raw[p, 64 * 128 + 4 * t : 64 * 128 + 4 * t + 4].view(torch.float32).item() == sc[p, t].item()
    d8, dsc = dsa.unpack_k_cache(packed)
    assert torch.equal(d8.view(torch.uint8), k8.view(torch.uint8)) and torch.equal(dsc, sc)
    deq = d8.float() * dsc.unsqueeze(-1)
    assert float(((deq - k).abs() / k.abs().amax(-1, keepdim=True)).max()) < 0.07  # e4m3: 3 mantissa bits


def test_generated_k_cache_scales_are_positive_and_finite():
    defn, cfg = ours(INDEXER)
    x = make(defn, cfg, workload({"batch_size": 2, "max_num_pages": 32, "num_pages": 80}), 0)
    data, scales = dsa.unpack_k_cache(x["k_index_cache_fp8"])
    assert bool(torch.isfinite(data.float()).all()) and bool((scales > 0).all()) and bool(torch.isfinite(scales).all())
    assert float(data.float().abs().amax()) == 448.0  # per-token scale uses the full fp8 range


# ----------------------------------------------------------------------------- DSA attention


@pytest.mark.parametrize("mix,tps", [("mixed", 1), ("short", 1), ("long", 1), ("mixed", 4)])
def test_sparse_indices_valid_by_construction(mix, tps):
    defn, cfg = ours(ATTENTION)
    T, P = 9, 150
    x = make(defn, cfg, workload({"num_tokens": T, "num_pages": P}, sparse_indices=gen("dsa_sparse_indices", mix=mix, tokens_per_seq=tps, max_context=5000), sm_scale=scalar(0.07)), 3)
    idx = x["sparse_indices"]
    assert idx.dtype == torch.int32 and idx.shape == (T, 2048)
    padded_rows = 0
    for t in range(T):
        row = idx[t]
        n = int((row != -1).sum())
        assert n >= 1
        assert bool((row[:n] >= 0).all()) and bool((row[:n] < P * 64).all()), "in range"
        assert bool((row[n:] == -1).all()), "-1 only as trailing padding"
        assert torch.unique(row[:n]).numel() == n, "no duplicates"
        padded_rows += n < 2048
    if mix == "short":
        assert padded_rows == T
    if mix == "long":
        assert padded_rows == 0


def test_prefill_chunk_tokens_share_their_sequence_pages():
    defn, cfg = ours(ATTENTION)
    x = make(defn, cfg, workload({"num_tokens": 4, "num_pages": 400}, sparse_indices=gen("dsa_sparse_indices", mix="short", tokens_per_seq=4), sm_scale=scalar(0.07)), 0)
    pages = [set((r[r != -1] // 64).tolist()) for r in x["sparse_indices"]]
    union = set().union(*pages)
    assert len(union) <= -(-2047 // 64) + 1  # one sequence's pages, not four sequences' worth
    counts = [int((r != -1).sum()) for r in x["sparse_indices"]]
    assert counts == sorted(counts) and counts[-1] - counts[0] == 3  # causal: contexts n-3 .. n


# ----------------------------------------------------------------------------- MoE


def test_moe_inputs_layouts_and_expert_loads():
    defn, cfg = ours(MOE)
    defn = shrink(defn, **SMALL)
    T = 256
    x = make(defn, cfg, workload({"seq_len": T}, routing_logits=gen("moe_routing_logits"), local_expert_offset=scalar(96), routed_scaling_factor=scalar(2.5)), 0)
    assert x["local_expert_offset"] == 96 and x["routed_scaling_factor"] == 2.5
    assert x["hidden_states"].dtype == torch.float8_e4m3fn and x["hidden_states_scale"].shape == (2, T)
    assert x["routing_bias"].dtype == torch.bfloat16 and bool((x["routing_bias"] != 0).any())
    for w, s in (("gemm1_weights", "gemm1_weights_scale"), ("gemm2_weights", "gemm2_weights_scale")):
        assert bool(torch.isfinite(x[w].float()).all()) and bool((x[s] > 0).all())
    # Uneven loads: the local experts receive tokens, some many, some none or few.
    import importlib.util
    spec = importlib.util.spec_from_file_location("moe_ref", REPO / "definitions" / MOE / "reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    experts, _ = mod.route(x["routing_logits"], x["routing_bias"], 2.5)
    load = torch.bincount(experts.flatten(), minlength=256)
    local = load[96:128]
    assert int(local.sum()) > 0.2 * T, "a realistic share of tokens reaches this rank"
    assert int(local.max()) >= 4 * max(1, int(local.float().median())), "some local experts are hot"
    assert int((load == 0).sum()) > 0 or int(load.min()) * 4 < int(load.max()), "some experts are cold"
    # Scales are block-major: hidden_states_scale[j, t] scales columns 128j..128j+127 of token t.
    deq = x["hidden_states"].float() * x["hidden_states_scale"].t().repeat_interleave(128, dim=1)
    assert bool(torch.isfinite(deq).all()) and float(deq.abs().amax(dim=1).min()) > 0


def test_moe_offset_must_keep_local_range_inside():
    defn, cfg = ours(MOE)
    with pytest.raises(SchemaError, match="local_expert_offset"):
        make(shrink(defn, **SMALL), cfg, workload({"seq_len": 2}, local_expert_offset=scalar(240), routed_scaling_factor=scalar(2.5)), 0)


def test_moe_unknown_generator_parameter_is_rejected():
    defn, cfg = ours(MOE)
    with pytest.raises(SchemaError, match="unknown parameters"):
        make(shrink(defn, **SMALL), cfg, workload({"seq_len": 2}, routing_logits=gen("moe_routing_logits", hot=3)), 0)


def test_random_fp8_bytes_are_finite_and_symmetric():
    g = torch.Generator().manual_seed(1)
    x = moe.random_fp8_bytes(1 << 16, g).float()
    assert bool(torch.isfinite(x).all()) and float(x.abs().min()) >= 0.5 and float(x.abs().max()) <= 1.875
    assert abs(float((x > 0).float().mean()) - 0.5) < 0.02


def test_official_moe_workloads_keep_axes_and_substitute_missing_blobs(shared):
    path = shared / "flashinfer-trace" / "workloads" / "moe" / f"{MOE}.jsonl"
    ws = moe.official_workloads(path, dataset_root=shared / "flashinfer-trace")
    assert len(ws) == 19
    assert {w.axes["seq_len"] for w in ws} >= {1, 7, 32, 80, 901, 11948, 14107}
    defn, cfg = ours(MOE)
    blobs_present = any((shared / "flashinfer-trace" / "blob").rglob("*.safetensors")) if (shared / "flashinfer-trace" / "blob").is_dir() else False
    if blobs_present:
        pytest.skip("the official blobs are present here: nothing is substituted")
    for w in ws:
        assert w.inputs["routing_logits"].type == "generated" and w.kbot_substituted == ["routing_bias", "routing_logits"]
        assert w.inputs["local_expert_offset"].type == "scalar" and w.inputs["local_expert_offset"].value % 32 == 0
        defn.resolve_axes(w.axes)
    # They generate (shrunk here) with the official offset.
    w = next(w for w in ws if w.axes["seq_len"] == 7)
    x = make(shrink(defn, **SMALL), cfg, w, 0)
    assert x["local_expert_offset"] == w.inputs["local_expert_offset"].value


# ----------------------------------------------------------------------------- GDN


def test_gdn_decode_inputs_in_realistic_ranges():
    defn, cfg = ours(DECODE)
    x = make(defn, cfg, workload({"batch_size": 64}, scale=scalar(0.0)), 0)
    for n in ("q", "k"):
        norms = x[n].float().norm(dim=-1)
        assert bool(((norms - 1).abs() < 1e-2).all()), f"{n} is L2-normalized per head"
    g = torch.exp(-torch.exp(x["A_log"]) * torch.nn.functional.softplus(x["a"].float() + x["dt_bias"]))
    assert bool((g > 0).all()) and bool((g <= 1).all())
    assert float(g.min()) < 0.2 and float(g.max()) > 0.9, "decays spread over (0, 1)"
    beta = torch.sigmoid(x["b"].float())
    assert float(beta.min()) < 0.2 and float(beta.max()) > 0.8
    assert 0.3 < float(x["state"].std()) < 0.7


def test_gdn_state_stays_bounded_over_a_long_sequence():
    """With these inputs the recurrence is a contraction plus bounded input: 2048 steps do not blow up."""
    defn, cfg = ours(PREFILL)
    x = make(defn, cfg, workload({"total_seq_len": 2048, "num_seqs": 1, "len_cu_seqlens": 2}, scale=scalar(0.0)), 0)
    import importlib.util
    spec = importlib.util.spec_from_file_location("pre_ref", REPO / "definitions" / PREFILL / "reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out, state = mod.run(**x)
    assert bool(torch.isfinite(state).all()) and float(state.abs().max()) < 50
    assert bool(torch.isfinite(out.float()).all())


@pytest.mark.parametrize("mix", ["equal", "random", "skewed"])
def test_cu_seqlens_are_prefix_sums(mix):
    defn, cfg = ours(PREFILL)
    n, total = 6, 300
    x = make(defn, cfg, workload({"total_seq_len": total, "num_seqs": n, "len_cu_seqlens": n + 1}, cu_seqlens=gen("gdn_cu_seqlens", mix=mix), scale=scalar(0.0)), 4)
    cu = x["cu_seqlens"]
    assert cu.dtype == torch.int64 and int(cu[0]) == 0 and int(cu[-1]) == total
    lens = cu[1:] - cu[:-1]
    assert bool((lens >= 1).all())
    if mix == "equal":
        assert int(lens.max()) - int(lens.min()) <= 1
    if mix == "skewed":
        assert int(lens.max()) > total // 2


def test_cu_seqlens_length_must_match_num_seqs():
    defn, cfg = ours(PREFILL)
    with pytest.raises(SchemaError):
        make(defn, cfg, workload({"total_seq_len": 10, "num_seqs": 2, "len_cu_seqlens": 4}, scale=scalar(0.0)), 0)


def test_impossible_length_mix_is_a_clear_error():
    defn, cfg = ours(ATTENTION)
    with pytest.raises(SchemaError, match="mix 'long'"):
        make(defn, cfg, workload({"num_tokens": 2, "num_pages": 100}, sparse_indices=gen("dsa_sparse_indices", mix="long", max_context=1000), sm_scale=scalar(0.07)), 0)


def test_moe_official_cli_writes_loadable_workloads(shared, tmp_path):
    from harness.operators.moe_official import main
    from harness.schema import load_workloads

    src = shared / "flashinfer-trace" / "workloads" / "moe" / f"{MOE}.jsonl"
    out = tmp_path / "moe.jsonl"
    assert main([str(src), str(out)]) == 0
    ws = load_workloads(out, ours(MOE)[0])
    assert [w.axes["seq_len"] for w in ws] == [w.axes["seq_len"] for w in moe.official_workloads(src)]
    assert all(w.inputs["routing_logits"].type in ("generated", "safetensors") for w in ws)
