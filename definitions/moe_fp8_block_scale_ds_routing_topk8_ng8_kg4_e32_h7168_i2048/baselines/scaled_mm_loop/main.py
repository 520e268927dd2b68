"""Baseline: a host loop over the local experts, each GEMM a ``torch._scaled_mm`` with DeepSeek-style
block scales: what a user without a fused MoE kernel would write.

What the 1x128 x 128x128 recipe needs on sm_90 (torch 2.11, cuBLASLt >= 12.9; torch's sources:
aten/src/ATen/native/cuda/ScaledBlas.cpp ``get_joint_scaling`` / ``is_blockwise_1x128_scaling`` /
``is_blockwise_128x128_scaling`` / ``_check_deepseek_support`` / ``_scaled_gemm``, and its tests,
test/test_scaled_matmul_cuda.py ``test_scaled_mm_block_wise_numerics``):

- sm_90 only (other archs: NotImplementedError), cuBLASLt >= 12.9 (CUDA 12.9+; the H200 has 13.0).
- mat1 [M, K] FP8 row-major, mat2 [K, N] FP8 column-major (cuBLASLt on sm_90 multiplies only a
  row-major by a column-major matrix): mat2 = the expert's [N, K] row-major weights, transposed.
- scale_a [M, ceil(K/128)] float32, outer-dim-major: strides (1, M) (a size-1 dimension's stride is
  not checked). Our activation scales are stored [K/128, T], so ``hidden_states_scale[:, rows]``
  ([K/128, M], contiguous), transposed, is exactly that.
- scale_b [ceil(K/128), ceil(N/128)] float32 whose transpose is row-major: the [N/128, K/128]
  block scales as stored, transposed. Their row stride must be 16-byte aligned ("near-inner-dim-major
  with 16-byte aligned strides", torch's error text; its tests pad K/128 to a multiple of 4), and this
  API checks that stride equals K/128, so K/128 must be a multiple of 4 (K a multiple of 512): ours are
  56 (K = 7168) and 16 (K = 2048).
- torch checks K and N (multiples of 16) but not M, and cuBLASLt's heuristic answers
  CUBLAS_STATUS_NOT_SUPPORTED for an FP8 GEMM whose sizes are not multiples of 16 (pytorch PR
  106844: "only works for matrix sizes divisible by 16"; the H200 run of 2026-12-01 failed so at 1-5
  rows per expert). torch's own tests of this recipe use M = 256, 384, 512 only. So every expert's
  rows are padded to a multiple of M_ALIGN (zero rows, unit scales; their outputs are dropped):
  128, the granularity torch tests; scripts/gpu/moe_dev.py also measures M_ALIGN = 16.

Per expert: gather the tokens (a ``nonzero``: a host synchronization per expert, which a fused kernel
avoids), gemm1 to bf16, SwiGLU in float32 (up = the first half of gemm1's columns), requantize the
intermediate to FP8 in 1x128 blocks (scale = amax / 448), gemm2 to bf16, weight and accumulate in
float32. Routing is the reference's ``route`` (reference.py, shipped as a second source of this
solution). Runs on CUDA only (``_scaled_mm`` has no CPU kernel).
"""

import torch
from reference import BLOCK, route

FP8_MAX = 448.0
M_ALIGN = 128  # rows of every _scaled_mm padded to a multiple of this (see above)


def _padded(a, a_scale_t, m_pad):
    """Rows ``a`` [M, K] FP8 and their scales ``a_scale_t`` [K/128, M] padded to ``m_pad`` rows: FP8
    [m_pad, K] and the outer-dim-major [m_pad, K/128] scale_a (strides (1, m_pad))."""
    M, K = a.shape
    if m_pad == M:
        return a, a_scale_t.t()
    ap = torch.zeros((m_pad, K), dtype=a.dtype, device=a.device)
    ap[:M] = a
    sp = torch.ones((a_scale_t.shape[0], m_pad), dtype=torch.float32, device=a.device)
    sp[:, :M] = a_scale_t
    return ap, sp.t()


def _quant_1x128(x):
    """float32 [M, K] -> FP8 [M, K] and its scales [K/128, M] (transposed: scale_a is their .t())."""
    M, K = x.shape
    xb = x.view(M, K // BLOCK, BLOCK)
    scale = xb.abs().amax(dim=2).clamp_min(1e-30) / FP8_MAX
    q = (xb / scale.unsqueeze(2)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).view(M, K)
    return q, scale.t().contiguous()


@torch.no_grad()
def run(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights, gemm1_weights_scale,
        gemm2_weights, gemm2_weights_scale, local_expert_offset, routed_scaling_factor):
    T, H = hidden_states.shape
    inter = gemm1_weights.shape[1] // 2
    if H % (4 * BLOCK) or inter % (4 * BLOCK):
        raise ValueError(f"hidden {H} and intermediate {inter} must be multiples of 512 (128x128 scale rows 16-byte aligned)")
    experts, weights = route(routing_logits, routing_bias, float(routed_scaling_factor))
    out = torch.zeros((T, H), dtype=torch.float32, device=hidden_states.device)
    offset = int(local_expert_offset)
    for le in range(gemm1_weights.shape[0]):
        hit = experts == offset + le
        tokens = hit.any(dim=1).nonzero().squeeze(1)
        M = tokens.numel()
        if M == 0:
            continue
        m_pad = -(-M // M_ALIGN) * M_ALIGN
        a, a_scale = _padded(hidden_states.index_select(0, tokens), hidden_states_scale.index_select(1, tokens), m_pad)
        g1 = torch._scaled_mm(a, gemm1_weights[le].t(), scale_a=a_scale, scale_b=gemm1_weights_scale[le].t(),
                              out_dtype=torch.bfloat16)
        g1 = g1.float()
        c = g1[:, :inter] * torch.nn.functional.silu(g1[:, inter:])  # padded rows: zeros
        cq, c_scale = _quant_1x128(c)
        y = torch._scaled_mm(cq, gemm2_weights[le].t(), scale_a=c_scale.t(), scale_b=gemm2_weights_scale[le].t(),
                             out_dtype=torch.bfloat16)[:M]
        w_tok = (weights * hit).sum(dim=1).index_select(0, tokens)
        out.index_add_(0, tokens, y.float() * w_tok.unsqueeze(1))
    return out.to(torch.bfloat16)
