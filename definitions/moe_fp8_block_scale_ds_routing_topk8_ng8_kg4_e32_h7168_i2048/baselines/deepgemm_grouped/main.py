"""Baseline: DeepGEMM's grouped FP8 GEMMs (sm_90, 1x128 activation and 128x128 weight scales) with the
routing, the permutation, SwiGLU with FP8 requantization and the weighted combine in torch: what a user
with DeepGEMM writes (vLLM's DeepGEMM MoE path has this shape), with no host synchronization.

``deep_gemm.m_grouped_fp8_gemm_nt_contiguous((a, sfa), (b, sfb), d, layout, use_psum_layout=True)``
(DeepGEMM 2.6.1, csrc/apis/gemm.hpp; its tests/test_fp8_fp4.py): ``a`` [M, K] FP8 row-major with ``sfa``
[M, K/128] float32 (any layout: DeepGEMM transforms it into its TMA-aligned one), ``b`` [G, N, K] FP8 with
``sfb`` [G, N/128, K/128] float32 (our weights and scales as stored), ``d`` [M, N] bf16. In the psum layout
``layout`` [G] int32 is each group's end row; group g's rows start at its predecessor's end rounded up to
``get_mk_alignment_for_contiguous_layout()``, and rows in the gaps (and past the last end) are neither
read nor written. DeepGEMM compiles its kernels at first use (its JIT).

The host does not know how many (token, local expert) pairs a call has, so the buffers hold an upper bound
of rows (every token's 8 experts local, plus one alignment of padding per expert) and the element-wise
steps run over all of them; only the GEMMs see the real row counts (from the layout, on the GPU). Routing
is the reference's ``route`` (reference.py, shipped as a second source). Needs the ``deep_gemm`` package
(built on the device from the sources scripts/gpu/pack_deepgemm.py pins: scripts/gpu/deepgemm_device.sh).
"""

import torch
from reference import BLOCK, TOP_K, route

FP8_MAX = 448.0


def _quant_1x128(x):
    """float32 [M, K] -> FP8 [M, K] and its scales [M, K/128] (amax / 448 per 128 columns)."""
    M, K = x.shape
    xb = x.view(M, K // BLOCK, BLOCK)
    scale = xb.abs().amax(dim=2).clamp_min(1e-30) / FP8_MAX
    q = (xb / scale.unsqueeze(2)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).view(M, K)
    return q, scale


def layout_rows(experts, local_offset, num_local, align):
    """Where each (token, slot) pair goes: its row in the expert-major buffer (-1 for a non-local expert),
    DeepGEMM's psum layout [num_local] int32, and the buffer's row count (a bound from the shapes only)."""
    T = experts.shape[0]
    le = experts - local_offset
    local = (le >= 0) & (le < num_local)
    key = torch.where(local, le, torch.full_like(le, num_local)).flatten()  # num_local: not on this rank
    per_key = torch.bincount(key, minlength=num_local + 1)
    counts = per_key[:num_local]
    aligned = (counts + align - 1) // align * align
    starts = torch.cumsum(aligned, 0) - aligned
    order = torch.argsort(key, stable=True)
    first = torch.cumsum(per_key, 0) - per_key  # each key's first place in `order`
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), device=order.device) - first[key[order]]
    row = torch.where(key < num_local, starts[key.clamp_max(num_local - 1)] + rank, torch.full_like(rank, -1))
    rows = T * TOP_K + num_local * align  # at most T * 8 pairs, each expert's start padded by < align
    return row.view(T, TOP_K), (starts + counts).to(torch.int32), rows


@torch.no_grad()
def run(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights, gemm1_weights_scale,
        gemm2_weights, gemm2_weights_scale, local_expert_offset, routed_scaling_factor):
    import deep_gemm  # built on the device (scripts/gpu/deepgemm_device.sh); imported here so the module loads without it

    T, H = hidden_states.shape
    num_local, n1, _ = gemm1_weights.shape
    inter = n1 // 2
    dev = hidden_states.device
    experts, weights = route(routing_logits, routing_bias, float(routed_scaling_factor))
    row, psum, rows = layout_rows(experts, int(local_expert_offset), num_local,
                                  deep_gemm.get_mk_alignment_for_contiguous_layout())
    pair_row = row.flatten()
    local = pair_row >= 0
    dest = torch.where(local, pair_row, torch.full_like(pair_row, rows))  # row `rows`: a scratch row for the rest
    tok = torch.arange(T, device=dev).repeat_interleave(TOP_K)
    a = torch.empty((rows + 1, H), dtype=hidden_states.dtype, device=dev)
    sfa = torch.ones((rows + 1, H // BLOCK), dtype=torch.float32, device=dev)
    a[dest] = hidden_states[tok]
    sfa[dest] = hidden_states_scale.t()[tok].to(torch.float32)
    g1 = torch.empty((rows, n1), dtype=torch.bfloat16, device=dev)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous((a[:rows], sfa[:rows]), (gemm1_weights, gemm1_weights_scale.to(torch.float32)),
                                               g1, psum, disable_ue8m0_cast=True, use_psum_layout=True)
    g1 = g1.float()
    c = g1[:, :inter] * torch.nn.functional.silu(g1[:, inter:])  # rows outside the layout: garbage, never gathered
    cq, c_scale = _quant_1x128(c)
    y = torch.empty((rows, H), dtype=torch.bfloat16, device=dev)
    deep_gemm.m_grouped_fp8_gemm_nt_contiguous((cq, c_scale), (gemm2_weights, gemm2_weights_scale.to(torch.float32)),
                                               y, psum, disable_ue8m0_cast=True, use_psum_layout=True)
    w = torch.where(local, weights.flatten(), torch.zeros((), device=dev))
    picked = y[pair_row.clamp_min(0)].float() * w.unsqueeze(1)  # non-local pairs weigh 0
    picked = torch.where(local.unsqueeze(1), picked, torch.zeros((), device=dev))  # and never carry garbage (NaN * 0)
    return picked.view(T, TOP_K, H).sum(dim=1).to(torch.bfloat16)
