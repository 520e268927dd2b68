"""The DSA baseline solutions (definitions/<def>/baselines/<name>/) are valid Solutions, their JSON carries
their main.py, and their math (without the compiler, or with FlashInfer's selection emulated in torch
from its documented semantics, or with a stand-in for FlashInfer's MLA wrapper that checks the calls as
0.7.4's FA3 path does) is right on small workloads."""

from __future__ import annotations

import json
import math
import sys
import types
from dataclasses import dataclass

import pytest
import torch

from harness.schema import load_solution, load_workloads
from opkit import ATTENTION, INDEXER, REPO, clone, judge, make, our_run, ours

BASELINES = [(INDEXER, "torch_compile"), (INDEXER, "flashinfer_topk"), (INDEXER, "deepgemm_flashinfer"), (ATTENTION, "torch_compile"),
             (ATTENTION, "flashinfer_mla")]
FLASHINFER_BASELINES = ("flashinfer_topk", "flashinfer_mla", "deepgemm_flashinfer")


def folder(name, base):
    return REPO / "definitions" / name / "baselines" / base


def module(name, base):
    ns: dict = {}
    src = (folder(name, base) / "main.py").read_text()
    exec(compile(src, f"{base}/main.py", "exec"), ns)  # noqa: S102 (our own baseline; torch.compile wraps lazily)
    return ns


@pytest.mark.parametrize("name,base", BASELINES)
def test_solution_json_is_main_py(name, base):
    sol = load_solution(folder(name, base) / "solution.json")
    assert sol.definition == name and sol.spec.entry_point == "main.py::run" and not sol.spec.destination_passing_style
    assert sol.source("main.py") == (folder(name, base) / "main.py").read_text()
    raw = json.loads((folder(name, base) / "solution.json").read_text())
    # the distribution whose 0.7.4 API main.py was written against (scripts/gpu/pack_flashinfer.py carries it)
    assert ("flashinfer-python==0.7.4" in raw["spec"]["dependencies"]) == (base in FLASHINFER_BASELINES)


def small(name):
    defn, cfg = ours(name)
    return defn, cfg, load_workloads(REPO / "definitions" / name / "workloads.small.jsonl", defn)


def passes_the_small_workloads(name, base) -> int:
    """The baseline's run() (its libraries stood in for by the caller) judged against our reference on every
    small workload; how many there were."""
    defn, cfg, ws = small(name)
    run = module(name, base)["run"]
    for w in ws:
        x = make(defn, cfg, w, 0)
        r = judge(defn, cfg, w, x, run(**clone(x)), our_run(name)(**clone(x)))
        assert r.ok, r.message
    return len(ws)


def emulated_top_k_page_table_transform(scores, src_page_table, lengths, k, page_size=1):
    """flashinfer.top_k_page_table_transform as its docstring states it (flashinfer/topk.py, 0.7.4):
    ``src_page_table[i, j // page_size] * page_size + j % page_size`` for each chosen position j."""
    top = scores.topk(k, dim=1).indices
    out = src_page_table.long().gather(1, top // page_size) * page_size + top % page_size
    return torch.where(torch.arange(k).unsqueeze(0) < lengths.long().unsqueeze(1), out, torch.full_like(out, -1))


def test_indexer_baselines_math():
    defn, cfg, ws = small(INDEXER)
    tc = module(INDEXER, "torch_compile")["_indexer"]
    fi = module(INDEXER, "flashinfer_topk")
    assert (fi["TOPK"], fi["PAGE_SIZE"]) == (2048, 64)
    for w in ws:
        x = make(defn, cfg, w, 0)
        ref = our_run(INDEXER)(**clone(x))
        assert judge(defn, cfg, w, x, tc(**clone(x)), ref).ok
        score = fi["scores"](**clone(x))
        got = emulated_top_k_page_table_transform(score, x["block_table"], x["seq_lens"], 2048, page_size=64)
        got = got.to(torch.int32)
        r = judge(defn, cfg, w, x, got, ref)
        assert r.ok, r.message


def test_indexer_flashinfer_topk_calls_the_api_as_0_7_4_takes_it(monkeypatch):
    """run() itself, with flashinfer.top_k_page_table_transform replaced by a stand-in with 0.7.4's signature
    (flashinfer/topk.py: the optional arguments after k positional-or-keyword, page_size / out / out_raw_indices
    keyword-only) that checks what the real kernel requires and computes what its docstring states: the
    block table goes in as it is, with page_size 64, so a call without it (or with ids) is caught."""
    calls = []

    def top_k_page_table_transform(input, src_page_table, lengths, k, row_to_batch=None, deterministic=False,
                                   tie_break=0, dsa_graph_safe=False, row_starts=None, page_table_row_starts=None, *,
                                   page_size=1, out=None, out_raw_indices=None):
        rows, width = input.shape
        assert input.dtype == torch.float32 and src_page_table.dtype == torch.int32 and lengths.dtype == torch.int32
        assert src_page_table.is_contiguous() and lengths.is_contiguous() and lengths.shape == (rows,)
        assert page_size == 64 and src_page_table.shape == (rows, width // page_size) and k == 2048
        calls.append(page_size)
        return emulated_top_k_page_table_transform(input, src_page_table, lengths, k, page_size).to(torch.int32)

    monkeypatch.setitem(sys.modules, "flashinfer", types.SimpleNamespace(top_k_page_table_transform=top_k_page_table_transform))
    n = passes_the_small_workloads(INDEXER, "flashinfer_topk")
    assert calls == [64] * n


def test_indexer_deepgemm_flashinfer_calls_both_apis_as_they_take_them(monkeypatch):
    """run() with stand-ins for DeepGEMM 2.6.1's paged MQA logits (csrc/apis/attention.hpp, tests/test_attention.py:
    q [B, 1, 64, 128] FP8, the cache as bytes [pages, 64, 1, 132], float32 weights, int32 lengths and block
    table, the schedule from get_paged_mqa_logits_metadata at 64-token blocks; without ``clean_logits`` the
    positions past a row's length hold garbage, here +inf, so a call that forgets it selects padding) and
    FlashInfer 0.7.4's top-k transform (page_size 64)."""
    fi_scores = module(INDEXER, "flashinfer_topk")["scores"]  # the reference's math, -inf past each length
    metas = []

    def get_paged_mqa_logits_metadata(context_lens, block_kv, num_sms, indices=None):
        assert context_lens.dtype == torch.int32 and context_lens.dim() == 1 and block_kv == 64 and num_sms == 132
        metas.append(context_lens.clone())
        return torch.zeros(num_sms + 1, 2, dtype=torch.int32)

    def fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta, max_context_len,
                             clean_logits=False, indices=None):
        B, next_n, H, D = q.shape
        assert q.dtype == torch.float8_e4m3fn and next_n == 1 and H in (32, 64) and D == 128
        assert kv_cache.dtype == torch.uint8 and tuple(kv_cache.shape[1:]) == (64, 1, D + 4)
        assert weights.dtype == torch.float32 and tuple(weights.shape) == (B * next_n, H)
        assert block_table.dtype == torch.int32 and block_table.is_contiguous() and torch.equal(context_lens, metas[-1])
        assert max_context_len == block_table.shape[1] * 64
        score = fi_scores(q.view(B, H, D), kv_cache.view(torch.int8), weights, context_lens, block_table)
        return score if clean_logits else torch.where(torch.isinf(score), torch.full_like(score, float("inf")), score)

    def top_k_page_table_transform(input, src_page_table, lengths, k, *, page_size=1):
        assert input.dtype == torch.float32 and src_page_table.dtype == torch.int32 and page_size == 64 and k == 2048
        return emulated_top_k_page_table_transform(input, src_page_table, lengths, k, page_size).to(torch.int32)

    monkeypatch.setitem(sys.modules, "deep_gemm", types.SimpleNamespace(
        get_paged_mqa_logits_metadata=get_paged_mqa_logits_metadata, fp8_paged_mqa_logits=fp8_paged_mqa_logits,
        get_num_sms=lambda: 132))
    monkeypatch.setitem(sys.modules, "flashinfer", types.SimpleNamespace(top_k_page_table_transform=top_k_page_table_transform))
    n = passes_the_small_workloads(INDEXER, "deepgemm_flashinfer")
    assert len(metas) == n


def test_attention_baseline_math():
    defn, cfg, ws = small(ATTENTION)
    ns = module(ATTENTION, "torch_compile")
    ns["_compiled"] = ns["_chunk"]  # the same body, eager (inductor on a CPU would compile C++ for minutes)
    for w in ws:
        x = make(defn, cfg, w, 0)
        r = judge(defn, cfg, w, x, ns["run"](**clone(x)), our_run(ATTENTION)(**clone(x)))
        assert r.ok, r.message


# ------------------------------------------------------------------ FlashInfer's MLA wrapper, stood in for


@dataclass(frozen=True)
class FakeMLAPlanMetadata:
    """flashinfer.mla.MLAPlanMetadata (flashinfer/mla/_batch_mla/_contracts.py, 0.7.4): the same fields."""

    qo_indptr: torch.Tensor | None = None
    kv_indptr: torch.Tensor | None = None
    kv_indices: torch.Tensor | None = None
    kv_len_arr: torch.Tensor | None = None
    cum_seq_lens_q: torch.Tensor | None = None
    block_tables: torch.Tensor | None = None
    seq_lens: torch.Tensor | None = None
    max_q_len: int | None = None

    @classmethod
    def csr(cls, qo_indptr, kv_indptr, kv_indices, kv_len_arr):
        return cls(qo_indptr=qo_indptr, kv_indptr=kv_indptr, kv_indices=kv_indices, kv_len_arr=kv_len_arr)


class FakeMLAWrapper:
    """flashinfer.mla.BatchMLAPagedAttentionWrapper as 0.7.4 takes it down its FA3 path: the real
    signatures (``__init__``, the keyword-only canonical ``plan`` and structural ``run`` of
    flashinfer/mla/_batch_mla/_wrapper.py), the checks the FA3 planner and run make on what main.py passes
    (_planning.py, _contracts.py, _backends/_fa_common.py), and page-size-agnostic paged MLA attention from
    the CSR in float32 (output 0 and lse -inf for a request without keys, as mla_hopper.cuh writes it)."""

    made: list = []  # every wrapper constructed (the test resets it)
    NUM_SM, MAX_WORK_ITEMS = 132, 16384

    def __init__(self, float_workspace_buffer, use_cuda_graph=False, qo_indptr=None, kv_indptr=None, kv_indices=None, kv_len_arr=None, backend="auto"):
        assert backend == "fa3" and use_cuda_graph is False
        assert all(t is None for t in (qo_indptr, kv_indptr, kv_indices, kv_len_arr))  # graph-mode buffers only
        self.workspace = float_workspace_buffer
        self.device = float_workspace_buffer.device
        self.plans: list[dict] = []
        self.planned = None
        FakeMLAWrapper.made.append(self)

    def plan(self, *, metadata, num_heads, head_dim_ckv, head_dim_kpe, page_size, causal, sm_scale, q_data_type, kv_data_type, use_profiler=False,
             query_layout="packed", kv_cache_layout="packed", lse_mode="none", output_dtype=None, output_scale="none", scale_mode="default",
             skip_softmax=False, enable_pdl=None, use_sinks=False):
        args = dict(locals())
        del args["self"]
        self.plans.append(args)
        assert isinstance(metadata, FakeMLAPlanMetadata)
        assert metadata.cum_seq_lens_q is None and metadata.block_tables is None and metadata.seq_lens is None and metadata.max_q_len is None
        for v in (num_heads, head_dim_ckv, head_dim_kpe, page_size):
            assert type(v) is int and v > 0
        assert type(causal) is bool and type(use_profiler) is bool
        assert type(sm_scale) in (int, float) and math.isfinite(sm_scale)  # a Python number, not a tensor
        assert q_data_type in (torch.float16, torch.bfloat16) and kv_data_type == q_data_type
        assert output_dtype in (None, q_data_type) and output_scale == "none" and scale_mode == "default"
        assert head_dim_ckv in (128, 256, 512) and head_dim_kpe % 64 == 0  # FA3's widths
        assert query_layout in ("packed", "split") and kv_cache_layout in ("packed", "split")
        assert lse_mode in ("none", "base2", "basee")
        assert not skip_softmax and not use_sinks and enable_pdl is not True  # FA3 refuses these
        meta = {}
        for name in ("qo_indptr", "kv_indptr", "kv_indices", "kv_len_arr"):
            t = getattr(metadata, name)
            assert isinstance(t, torch.Tensor) and t.ndim == 1 and t.dtype == torch.int32 and t.is_contiguous(), name
            assert t.device.type == "cpu" or t.device == self.device, name
            meta[name] = t
        qo = meta["qo_indptr"].to("cpu", torch.int64)
        kv = meta["kv_indptr"].to("cpu", torch.int64)
        lens = meta["kv_len_arr"].to("cpu", torch.int64)
        B = qo.numel() - 1
        assert B >= 1 and kv.numel() == B + 1 and lens.numel() == B  # a nonempty batch, dimensions agreeing
        for indptr in (qo, kv):
            assert int(indptr[0]) == 0 and bool((indptr[1:] >= indptr[:-1]).all())
        assert bool((lens >= 0).all()) and int(kv[-1]) <= meta["kv_indices"].numel()
        assert torch.equal(kv[1:] - kv[:-1], (lens + page_size - 1) // page_size)
        q_lens = qo[1:] - qo[:-1]
        assert int(((q_lens * num_heads + 63) // 64).sum()) <= self.MAX_WORK_ITEMS
        need = 2 * self.NUM_SM * 64 * (2 * head_dim_ckv + 4)  # FA3's partial outputs and lse (at most)
        assert self.workspace.numel() * self.workspace.element_size() >= need
        live = meta["kv_indices"][: int(kv[-1])]
        self.planned = dict(args, qo=qo, kv=kv, lens=lens, kv_indices=meta["kv_indices"].to(self.device),
                            pages=(int(live.min()), int(live.max()) + 1) if live.numel() else (0, 0))

    def run(self, *, query, kv_cache, out=None, lse=None, return_lse=False, profiler_buffer=None, kv_len=None, page_table=None,
            return_lse_base_on_e=False, o_scale=None, ckv_scale=None, ckv_scale_arr=None, kpe_scale=None, sinks=None,
            skip_softmax_threshold_scale_factor=None, bmm1_scale=None, bmm2_scale=None):
        p = self.planned
        assert p is not None, "run() before plan()"
        want = "none" if not (return_lse or lse is not None or return_lse_base_on_e) else ("basee" if return_lse_base_on_e else "base2")
        assert want == p["lse_mode"], (want, p["lse_mode"])
        assert out is None and lse is None and profiler_buffer is None and kv_len is None and page_table is None and o_scale is None
        assert all(v is None for v in (ckv_scale, ckv_scale_arr, kpe_scale, sinks, skip_softmax_threshold_scale_factor, bmm1_scale, bmm2_scale))
        widths = (p["head_dim_ckv"], p["head_dim_kpe"])
        pairs = {}
        for name, value, layout, dtype in (("query", query, p["query_layout"], p["q_data_type"]),
                                           ("kv_cache", kv_cache, p["kv_cache_layout"], p["kv_data_type"])):
            # separate tensors are not one packed buffer: only a split plan takes them
            assert type(value) is tuple and len(value) == 2 and layout == "split", name
            a, b = value
            assert a.ndim == 3 and b.ndim == 3 and a.shape[:-1] == b.shape[:-1] and (a.shape[-1], b.shape[-1]) == widths, name
            assert a.dtype == b.dtype == dtype and a.device == b.device == self.device, name
            assert a.stride(-1) == 1 and b.stride(-1) == 1, name
            pairs[name] = (a, b)
        (q_nope, q_pe), (ckv, kpe) = pairs["query"], pairs["kv_cache"]
        assert tuple(q_nope.shape[:2]) == (int(p["qo"][-1]), p["num_heads"])
        assert ckv.shape[1] == p["page_size"] and p["pages"][0] >= 0 and ckv.shape[0] >= p["pages"][1]
        if p["causal"]:
            raise NotImplementedError("the stand-in computes non-causal attention only")
        output = torch.empty_like(q_nope)
        lse_out = torch.empty(q_nope.shape[:2], dtype=torch.float32, device=self.device)
        for r in range(p["lens"].numel()):
            q0, q1, n = int(p["qo"][r]), int(p["qo"][r + 1]), int(p["lens"][r])
            pages = p["kv_indices"][int(p["kv"][r]) : int(p["kv"][r + 1])].long()
            kc = ckv[pages].reshape(-1, ckv.shape[-1])[:n].float()
            kp = kpe[pages].reshape(-1, kpe.shape[-1])[:n].float()
            if n == 0:
                output[q0:q1] = 0
                lse_out[q0:q1] = float("-inf")
                continue
            s = torch.einsum("qhd,kd->qhk", q_nope[q0:q1].float(), kc) + torch.einsum("qhd,kd->qhk", q_pe[q0:q1].float(), kp)
            s = s * p["sm_scale"]
            lse_e = torch.logsumexp(s, dim=-1)
            output[q0:q1] = torch.einsum("qhk,kd->qhd", torch.exp(s - lse_e.unsqueeze(-1)), kc).to(output.dtype)
            lse_out[q0:q1] = lse_e if return_lse_base_on_e else lse_e / math.log(2.0)
        return (output, lse_out) if return_lse else output


@pytest.fixture
def fake_flashinfer(monkeypatch):
    """A ``flashinfer`` package holding only ``flashinfer.mla``'s wrapper and metadata, in sys.modules."""
    fi, mla = types.ModuleType("flashinfer"), types.ModuleType("flashinfer.mla")
    mla.BatchMLAPagedAttentionWrapper, mla.MLAPlanMetadata = FakeMLAWrapper, FakeMLAPlanMetadata
    fi.mla = mla
    monkeypatch.setitem(sys.modules, "flashinfer", fi)
    monkeypatch.setitem(sys.modules, "flashinfer.mla", mla)
    monkeypatch.setattr(FakeMLAWrapper, "made", [])
    return mla


def test_attention_flashinfer_mla_math(fake_flashinfer):
    defn, cfg, ws = small(ATTENTION)
    ns = module(ATTENTION, "flashinfer_mla")
    for w in ws:
        x = make(defn, cfg, w, 0)
        before = clone(x)
        got = ns["run"](**x)
        for k, v in before.items():  # inputs come back unchanged (the caches are only viewed)
            assert torch.equal(v, x[k]) if isinstance(v, torch.Tensor) else v == x[k], k
        assert got[1] is not None and got[1].dtype == torch.float32
        r = judge(defn, cfg, w, x, got, our_run(ATTENTION)(**clone(x)))
        assert r.ok, r.message
        (wrapper,) = FakeMLAWrapper.made  # one wrapper per device, kept across calls
        plan = wrapper.plans[-1]
        T = x["q_nope"].shape[0]
        assert (plan["page_size"], plan["causal"], plan["lse_mode"], plan["num_heads"], plan["head_dim_ckv"], plan["head_dim_kpe"]) == (1, False, "base2", 16, 512, 64)
        assert plan["sm_scale"] == float(w.inputs["sm_scale"].value)
        assert torch.equal(plan["metadata"].qo_indptr, torch.arange(T + 1, dtype=torch.int32))
    assert len(FakeMLAWrapper.made[0].plans) == len(ws)  # planned on every call
    assert FakeMLAWrapper.made[0].workspace.numel() == 128 * 1024 * 1024


def test_attention_flashinfer_mla_edges(fake_flashinfer):
    """A token with no valid index (output 0, lse -inf), padding between valid entries, sm_scale as a
    0-dim tensor, and no tokens at all."""
    defn, cfg, ws = small(ATTENTION)
    ns = module(ATTENTION, "flashinfer_mla")
    w = ws[0]
    x = make(defn, cfg, w, 0)
    idx = x["sparse_indices"]
    assert idx.shape[0] >= 2
    idx[0] = -1
    holes = torch.zeros_like(idx[1], dtype=torch.bool)
    holes[::3] = True
    idx[1] = torch.where(holes, torch.full_like(idx[1], -1), idx[1])
    x["sm_scale"] = torch.tensor(float(w.inputs["sm_scale"].value), dtype=torch.float32)
    got = ns["run"](**clone(x))
    ref = our_run(ATTENTION)(**clone(x))
    r = judge(defn, cfg, w, x, got, ref)
    assert r.ok, r.message
    assert bool((got[0][0] == 0).all()) and bool(torch.isneginf(got[1][0]).all())
    meta = FakeMLAWrapper.made[0].plans[-1]["metadata"]
    valid = idx >= 0
    assert meta.kv_len_arr.tolist() == valid.sum(1).tolist() and torch.equal(meta.kv_indices, idx[valid])
    assert type(FakeMLAWrapper.made[0].plans[-1]["sm_scale"]) is float
    empty = {k: (v[:0] if isinstance(v, torch.Tensor) and v.ndim else v) for k, v in x.items()}
    empty["ckv_cache"], empty["kpe_cache"] = x["ckv_cache"], x["kpe_cache"]
    out, lse = ns["run"](**empty)
    assert out.shape == (0, 16, 512) and out.dtype == torch.bfloat16 and lse.shape == (0, 16) and lse.dtype == torch.float32
