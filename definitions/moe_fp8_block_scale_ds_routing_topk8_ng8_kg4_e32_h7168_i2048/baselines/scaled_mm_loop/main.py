"""Baseline: a host loop over the local experts, each GEMM a ``torch._scaled_mm`` with DeepSeek-style
block scales: what a user without a fused MoE kernel would write.

cuBLASLt (CUDA >= 12.9, sm_90) takes FP8 operands with 1x128 activation scales and 128x128 weight
scales and accumulates in fp32; torch (2.9+) selects that recipe from the scales' shapes and strides:

- mat1 [M, K] row-major FP8; scale_a [M, K/128] float32, outer-dim-major (stride (1, M)). Our
  activation scales are stored [K/128, T], so the rows of one expert's tokens,
  ``hidden_states_scale[:, tokens]`` ([K/128, M], contiguous), transposed, are exactly that.
- mat2 [K, N] column-major FP8 = the expert's [N, K] row-major weights transposed; scale_b
  [K/128, N/128] = the [N/128, K/128] row-major block scales transposed.

Per expert: gather the tokens (a ``nonzero``: a host synchronization per expert, which a fused kernel
avoids), gemm1 to bf16, SwiGLU in float32 (up = the first half of gemm1's columns), requantize the
intermediate to FP8 in 1x128 blocks (scale = amax / 448), gemm2 to bf16, weight and accumulate in
float32. Routing is the reference's ``route`` (reference.py, shipped as a second source of this
solution). Runs on CUDA only (``_scaled_mm`` has no CPU kernel).
"""

import torch
from reference import BLOCK, route

FP8_MAX = 448.0


def _quant_1x128(x):
    """float32 [M, K] -> FP8 [M, K] and outer-dim-major scales [M, K/128] (what scale_a wants)."""
    M, K = x.shape
    xb = x.view(M, K // BLOCK, BLOCK)
    scale = xb.abs().amax(dim=2).clamp_min(1e-30) / FP8_MAX
    q = (xb / scale.unsqueeze(2)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).view(M, K)
    return q, scale.t().contiguous().t()


@torch.no_grad()
def run(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights, gemm1_weights_scale,
        gemm2_weights, gemm2_weights_scale, local_expert_offset, routed_scaling_factor):
    T, H = hidden_states.shape
    inter = gemm1_weights.shape[1] // 2
    experts, weights = route(routing_logits, routing_bias, float(routed_scaling_factor))
    out = torch.zeros((T, H), dtype=torch.float32, device=hidden_states.device)
    offset = int(local_expert_offset)
    for le in range(gemm1_weights.shape[0]):
        hit = experts == offset + le
        tokens = hit.any(dim=1).nonzero().squeeze(1)
        if tokens.numel() == 0:
            continue
        a = hidden_states.index_select(0, tokens)
        a_scale = hidden_states_scale.index_select(1, tokens).t()
        g1 = torch._scaled_mm(a, gemm1_weights[le].t(), scale_a=a_scale, scale_b=gemm1_weights_scale[le].t(),
                              out_dtype=torch.bfloat16)
        g1 = g1.float()
        c = g1[:, :inter] * torch.nn.functional.silu(g1[:, inter:])
        cq, c_scale = _quant_1x128(c)
        y = torch._scaled_mm(cq, gemm2_weights[le].t(), scale_a=c_scale, scale_b=gemm2_weights_scale[le].t(),
                             out_dtype=torch.bfloat16)
        w_tok = (weights * hit).sum(dim=1).index_select(0, tokens)
        out.index_add_(0, tokens, y.float() * w_tok.unsqueeze(1))
    return out.to(torch.bfloat16)
