"""Inputs and comparisons for the DeepSeek sparse-attention (DSA) operators.

``dsa_topk_indexer_fp8_h64_d128_topk2048_ps64``
    FP8 key cache in the deep_gemm layout: per page, first ``page_size * 128`` FP8 bytes (token-major),
    then ``page_size`` float32 scales (4 bytes each); the page is viewed as
    ``[page_size, 1, 132]`` int8, so a "row" of 132 bytes is *not* one token's data plus its scale.
    Sequence lengths fit the block table (``ceil(len / page_size) <= max_num_pages``), every sequence
    owns distinct real pages, and block-table entries past a sequence's last page hold real but
    foreign pages (a kernel reading past its sequence reads valid memory and is caught by the
    comparison, not by a crash).

``dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64``
    ``sparse_indices`` are what an indexer would return: for each query token, ``min(topk, context)``
    distinct physical token ids (``page * page_size + offset``) of pages of that token's own sequence,
    in score (here: random) order, then ``-1`` padding.

Comparators:

- ``dsa_topk_by_score``: judges a top-k index set by validity (in range, reachable through the
  block table within the sequence length, no duplicates, ``-1`` exactly where the sequence is shorter
  than k) and by the *sorted scores* at the chosen indices, recomputed from the inputs, against the
  sorted scores at the reference's indices. Ties make the indices themselves not comparable.
- ``default_optional``: the official element-wise rule, where an optional output (``lse``) that was
  not produced (``None``, or a destination buffer still entirely NaN poison) is skipped.
"""

from __future__ import annotations

from typing import Any

import torch

from ..compare import CompareResult, check_structure, comparator, compare_default, elementwise
from ..defconfig import DefinitionConfig
from ..dtypes import torch_dtype
from ..generators import GenContext, generator
from ..schema import Definition, SchemaError, Status
from .common import ceil_div, quantize_fp8_rows

SCALE_BYTES = 4


# ----------------------------------------------------------------------------- FP8 key cache layout


def pack_k_cache(k_fp8: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """``[P, ps, D]`` fp8 and ``[P, ps]`` float32 scales -> ``[P, ps, 1, D + 4]`` int8 (deep_gemm)."""
    P, ps, D = k_fp8.shape
    data = k_fp8.contiguous().view(torch.uint8).reshape(P, ps * D)
    sc = scales.to(torch.float32).contiguous().view(torch.uint8).reshape(P, ps * SCALE_BYTES)
    return torch.cat([data, sc], dim=1).view(torch.int8).reshape(P, ps, 1, D + SCALE_BYTES)


def unpack_k_cache(cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Inverse of :func:`pack_k_cache`: (fp8 ``[P, ps, D]``, float32 scales ``[P, ps]``)."""
    P, ps, _, Dw = cache.shape
    D = Dw - SCALE_BYTES
    flat = cache.view(torch.uint8).reshape(P, ps * Dw)
    data = flat[:, : ps * D].contiguous().view(torch.float8_e4m3fn).reshape(P, ps, D)
    scales = flat[:, ps * D :].contiguous().view(torch.float32).reshape(P, ps)
    return data, scales


@generator("dsa_index_k_cache")
def gen_index_k_cache(ctx: GenContext, std: float = 1.0) -> torch.Tensor:
    """Keys ~ N(0, std) with per-token loudness, quantized per token and packed in the deep_gemm layout."""
    P, ps, nh, Dw = ctx.shape
    if nh != 1:
        raise SchemaError(f"{ctx.name}: kv_cache_num_heads must be 1, got {nh}")
    # Draw on the CPU (seeded), quantize on the target device: the quantization is exactly rounded
    # arithmetic, so every device gets the same bytes, and a GPU does it in milliseconds, not seconds.
    k = torch.randn(P, ps, Dw - SCALE_BYTES, generator=ctx.gen).to(ctx.device)
    loud = (torch.exp(torch.randn(P, ps, 1, generator=ctx.gen) * 0.3) * std).to(ctx.device)
    k_fp8, scales = quantize_fp8_rows(k * loud)
    return pack_k_cache(k_fp8, scales)


# ----------------------------------------------------------------------------- sequence lengths


def _lengths(n: int, low: int, high: int, mix: str, threshold: int, gen: torch.Generator, short_fraction: float = 0.5) -> torch.Tensor:
    """``n`` lengths in ``[low, high]``; ``threshold`` (top-k) splits "short" from "long"; in the
    ``mixed`` mix each length is short with probability ``short_fraction``."""
    if high < low:
        raise SchemaError(f"no length fits in [{low}, {high}]")
    def uni(lo: int, hi: int, m: int) -> torch.Tensor:
        lo, hi = max(lo, low), min(hi, high)
        if hi < lo:
            raise SchemaError(f"length mix '{mix}' needs lengths in [{lo}, {hi}]: empty (bounds [{low}, {high}], top-k {threshold})")
        return torch.randint(lo, hi + 1, (m,), generator=gen)
    if mix == "uniform":
        return uni(low, high, n)
    if mix == "short":  # all shorter than top-k: every row is padded
        return uni(low, threshold - 1, n)
    if mix == "long":  # all at least top-k: no padding
        return uni(threshold, high, n)
    if mix == "mixed":  # both, in random order
        if not 0.0 <= short_fraction <= 1.0:
            raise SchemaError(f"short_fraction must be in [0, 1], got {short_fraction}")
        m = torch.rand(n, generator=gen) < short_fraction
        return torch.where(m, uni(low, threshold - 1, n), uni(threshold, high, n))
    raise SchemaError(f"unknown length mix '{mix}' (known: uniform, short, long, mixed)")


@generator("dsa_seq_lens")
def gen_seq_lens(ctx: GenContext, mix: str = "uniform", low: int = 1, fill_max: bool = True, short_fraction: float = 0.5) -> torch.Tensor:
    """Indexer sequence lengths that fit ``max_num_pages`` pages and, together, ``num_pages`` pages.

    With ``fill_max`` one sequence needs exactly ``max_num_pages`` pages (the block table is as wide
    as its longest row, as a serving engine builds it). ``low`` raises the shortest length (a band
    ``[low, max_num_pages * page_size]`` keeps the rows close to the table's width, so the roofline's
    full-row byte count stays a lower bound); ``short_fraction`` weights the ``mixed`` mix.
    """
    (B,) = ctx.shape
    ps, mp, P, topk = ctx.axes["page_size"], ctx.axes["max_num_pages"], ctx.axes["num_pages"], ctx.axes["topk"]
    lens = _lengths(B, low, mp * ps, mix, topk, ctx.gen, short_fraction)
    if fill_max and B:
        i = int(torch.randint(0, B, (1,), generator=ctx.gen))
        lens[i] = int(torch.randint((mp - 1) * ps + 1, mp * ps + 1, (1,), generator=ctx.gen))
    need = int(sum(ceil_div(int(n), ps) for n in lens))
    if need > P:
        raise SchemaError(f"{ctx.name}: sequences need {need} pages but num_pages is {P}; raise num_pages")
    return lens.to(ctx.device, ctx.dtype)


@generator("dsa_block_table")
def gen_block_table(ctx: GenContext, unused: str = "foreign") -> torch.Tensor:
    """Distinct real pages per sequence (from ``seq_lens``); entries past a sequence's pages are
    ``foreign`` (real pages of other sequences or free ones) or ``zero``."""
    B, mp = ctx.shape
    P, ps = ctx.axes["num_pages"], ctx.axes["page_size"]
    lens = ctx.made.get("seq_lens")
    if lens is None:
        raise SchemaError(f"{ctx.name}: needs seq_lens to be generated first")
    npages = [ceil_div(int(n), ps) for n in lens.cpu()]
    if max(npages, default=0) > mp or sum(npages) > P:
        raise SchemaError(f"{ctx.name}: seq_lens need {sum(npages)} pages (max {max(npages)}) but the table has {mp} columns and the cache {P} pages")
    perm = torch.randperm(P, generator=ctx.gen)
    if unused == "foreign":
        table = torch.randint(0, P, (B, mp), generator=ctx.gen)
    elif unused == "zero":
        table = torch.zeros(B, mp, dtype=torch.int64)
    else:
        raise SchemaError(f"{ctx.name}: unused must be 'foreign' or 'zero'")
    at = 0
    for b, n in enumerate(npages):
        table[b, :n] = perm[at : at + n]
        at += n
    return table.to(ctx.device, ctx.dtype)


# ----------------------------------------------------------------------------- sparse indices


@generator("dsa_sparse_indices")
def gen_sparse_indices(ctx: GenContext, mix: str = "mixed", max_context: int = 8192, tokens_per_seq: int = 1, min_context: int = 1) -> torch.Tensor:
    """Top-k-like indices for each query token, valid by construction.

    Query tokens come in sequences of ``tokens_per_seq`` (1 = decode; more = a prefill chunk whose
    tokens see a causally growing context). Each sequence gets its own random pages; a token with
    context ``n`` gets ``min(topk, n)`` distinct physical ids from its sequence, then ``-1``. A
    sequence's context is drawn from ``[max(min_context, tokens_per_seq), max_context]`` by ``mix``.
    """
    T, K = ctx.shape
    P, ps = ctx.axes["num_pages"], ctx.axes["page_size"]
    max_context = min(max_context, P * ps)
    if tokens_per_seq < 1:
        raise SchemaError(f"{ctx.name}: tokens_per_seq must be >= 1")
    out = torch.full((T, K), -1, dtype=torch.int64)
    t = 0
    while t < T:
        m = min(tokens_per_seq, T - t)
        last = int(_lengths(1, max(m, min_context), max_context, mix, K, ctx.gen)[0])
        pages = torch.randperm(P, generator=ctx.gen)[: ceil_div(last, ps)]
        for j in range(m):
            n = last - (m - 1 - j)  # causal: the j-th token of the chunk sees n tokens
            pos = torch.randperm(n, generator=ctx.gen)[: min(K, n)]
            out[t + j, : pos.numel()] = pages[pos // ps] * ps + pos % ps
        t += m
    return out.to(ctx.device, ctx.dtype)


# ----------------------------------------------------------------------------- indexer comparison


def index_scores(q_index_fp8: torch.Tensor, k_index_cache_fp8: torch.Tensor, weights: torch.Tensor, seq_lens: torch.Tensor, block_table: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sequence position: (scores ``[B, L]``, physical token ids ``[B, L]``), with L the longest
    sequence; positions at or past a sequence's length have score -inf and id -1."""
    B = q_index_fp8.shape[0]
    ps = k_index_cache_fp8.shape[1]
    lens = seq_lens.to(torch.int64)
    L = int(lens.max()) if B else 0
    mp = ceil_div(L, ps)
    pos = torch.arange(mp * ps, device=lens.device)
    valid = pos.unsqueeze(0) < lens.unsqueeze(1)
    pages = block_table[:, :mp].to(torch.int64)
    pages = torch.where(pos[::ps].unsqueeze(0) < lens.unsqueeze(1), pages, torch.zeros_like(pages))
    data, scales = unpack_k_cache(k_index_cache_fp8)
    k = data[pages].to(torch.float32) * scales[pages].unsqueeze(-1)  # [B, mp, ps, D]
    k = k.reshape(B, mp * ps, -1)
    s = torch.einsum("bhd,btd->bht", q_index_fp8.to(torch.float32), k).clamp_min(0)
    s = (s * weights.to(torch.float32).unsqueeze(-1)).sum(dim=1)
    ids = (pages.unsqueeze(-1) * ps + torch.arange(ps, device=pages.device)).reshape(B, mp * ps)
    return s.masked_fill(~valid, float("-inf"))[:, :L], ids.masked_fill(~valid, -1)[:, :L]


def _scores_of(row: torch.Tensor, seq_ids: torch.Tensor, seq_scores: torch.Tensor, ps: int) -> tuple[torch.Tensor | None, str]:
    """Scores of the physical ids in ``row`` (no -1 in it), or None and why some are unreachable."""
    order = torch.argsort(seq_ids)
    sorted_ids = seq_ids[order]
    where = torch.searchsorted(sorted_ids, row).clamp_max(max(sorted_ids.numel() - 1, 0))
    if sorted_ids.numel() == 0:
        return None, f"index {int(row[0])} but the sequence is empty"
    found = sorted_ids[where] == row
    if not bool(found.all()):
        bad = int(row[~found][0])
        return None, f"index {bad} (page {bad // ps}, offset {bad % ps}) is not reachable through this row's block table within seq_len"
    return seq_scores[order[where]], ""


@comparator("dsa_topk_by_score")
def compare_topk_by_score(
    outputs: dict[str, Any],
    reference: dict[str, Any],
    *,
    definition: Definition,
    axes: dict[str, int],
    config: DefinitionConfig,
    inputs: dict[str, Any] | None = None,
    output: str = "topk_indices",
    **_: Any,
) -> CompareResult:
    spec = definition.outputs[output]
    out = outputs.get(output)
    bad = check_structure(output, out, definition.shape_of(spec, axes), torch_dtype(spec.dtype))
    if bad is not None:
        return bad
    if inputs is None:
        raise ValueError("dsa_topk_by_score needs the inputs to recompute scores")
    ps = int(inputs["k_index_cache_fp8"].shape[1])
    scores, ids = index_scores(
        inputs["q_index_fp8"], inputs["k_index_cache_fp8"], inputs["weights"], inputs["seq_lens"], inputs["block_table"]
    )
    scores, ids = scores.cpu(), ids.cpu()
    cand = out.detach().cpu().to(torch.int64)
    ref = reference[output].detach().cpu().to(torch.int64)
    lens = inputs["seq_lens"].cpu().to(torch.int64)
    K = cand.shape[1]
    worst_abs = worst_rel = 0.0
    matched_rows = 0
    for b in range(cand.shape[0]):
        n = int(lens[b])
        want = min(K, n)
        row = cand[b]

        def fail(msg: str) -> CompareResult:
            return CompareResult(Status.INCORRECT_NUMERICAL, worst_abs, worst_rel, matched_rows / cand.shape[0], f"{output} row {b} (seq_len {n}): {msg}", {"row": b})

        if bool((row < -1).any()):
            return fail(f"index {int(row[row < -1][0])} is out of range")
        chosen = row[row != -1]
        if chosen.numel() != want:
            return fail(f"{chosen.numel()} indices, expected {want} (-1 only pads sequences shorter than {K})")
        if want == 0:
            matched_rows += 1
            continue
        if torch.unique(chosen).numel() != chosen.numel():
            return fail(f"{chosen.numel() - torch.unique(chosen).numel()} duplicated indices")
        seq_ids, seq_scores = ids[b, :n], scores[b, :n]
        got, why = _scores_of(chosen, seq_ids, seq_scores, ps)
        if got is None:
            return fail(why)
        exp, why = _scores_of(ref[b][ref[b] != -1], seq_ids, seq_scores, ps)
        if exp is None:
            raise ValueError(f"the reference's own indices are invalid in row {b}: {why}")
        r = elementwise(f"{output} sorted scores", torch.sort(got, descending=True).values, torch.sort(exp, descending=True).values, config.tolerance)
        worst_abs, worst_rel = max(worst_abs, r.max_absolute_error), max(worst_rel, r.max_relative_error)
        if not r.ok:
            return fail(r.message)
        matched_rows += 1
    return CompareResult(Status.PASSED, worst_abs, worst_rel, 1.0, extra={"page_size": ps})


# ----------------------------------------------------------------------------- optional outputs


def _untouched(t: Any) -> bool:
    """True for an optional output that was not produced: None, or a float buffer still all NaN."""
    if t is None:
        return True
    return isinstance(t, torch.Tensor) and t.dtype.is_floating_point and t.numel() > 0 and bool(torch.isnan(t).all())


@comparator("default_optional")
def compare_default_optional(outputs: dict[str, Any], reference: dict[str, Any], *, definition: Definition, axes: dict[str, int], config: DefinitionConfig, inputs: dict[str, Any] | None = None, **_: Any) -> CompareResult:
    kept = {k: v for k, v in outputs.items() if not (k in config.optional_outputs and _untouched(v))}
    skipped = sorted(set(outputs) - set(kept))
    r = compare_default({**{k: None for k in skipped}, **kept}, reference, definition=definition, axes=axes, config=config, inputs=inputs)
    if skipped:
        r.extra["optional_not_produced"] = skipped
    return r
