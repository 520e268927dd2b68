"""kbot reference: FP8 block-scale MoE with DeepSeek-V3 grouped routing (one EP rank of 8).

Math (float32 throughout, bf16 only for the final output):
  A  = hidden_states * scale, scale per (token, 128-column block)   [T, H]
  s  = sigmoid(routing_logits); sb = s + routing_bias                [T, E]
  groups: E experts in 8 groups; a group's score is the sum of its two largest sb;
  keep the 4 best groups; the token's 8 experts are the top-8 sb inside the kept groups;
  weight of a chosen expert = s / (sum of s over the 8 chosen) * routed_scaling_factor
  For each local expert e (global id local_expert_offset + e) and the tokens that chose it:
    [x1 | x2] = A @ W13_e^T   (W13 dequantized in 128x128 blocks)
    y = (x1 * silu(x2)) @ W2_e^T
    out += weight * y
Only experts that received tokens are dequantized; tokens are processed together per expert.
"""

import torch

BLOCK = 128
TOP_K = 8
N_GROUP = 8
TOPK_GROUP = 4


def _dequant(w, scale):
    """[R, C] fp8 with [R/128, C/128] block scales -> float32."""
    s = scale.to(torch.float32).repeat_interleave(BLOCK, dim=0).repeat_interleave(BLOCK, dim=1)
    return w.to(torch.float32) * s


def route(routing_logits, routing_bias, routed_scaling_factor):
    """Chosen experts [T, 8] (global ids) and their combination weights [T, 8]."""
    s = torch.sigmoid(routing_logits.to(torch.float32))
    sb = s + routing_bias.to(torch.float32).reshape(1, -1)
    T, E = sb.shape
    per_group = E // N_GROUP
    group_score = sb.view(T, N_GROUP, per_group).topk(2, dim=2).values.sum(dim=2)
    kept = group_score.topk(TOPK_GROUP, dim=1).indices
    keep = torch.zeros(T, N_GROUP, dtype=torch.bool, device=sb.device).scatter_(1, kept, True)
    candidates = sb.masked_fill(~keep.repeat_interleave(per_group, dim=1), float("-inf"))
    experts = candidates.topk(TOP_K, dim=1).indices
    w = s.gather(1, experts)
    w = w / (w.sum(dim=1, keepdim=True) + 1e-20) * routed_scaling_factor
    return experts, w


@torch.no_grad()
def run(
    routing_logits,
    routing_bias,
    hidden_states,
    hidden_states_scale,
    gemm1_weights,
    gemm1_weights_scale,
    gemm2_weights,
    gemm2_weights_scale,
    local_expert_offset,
    routed_scaling_factor,
):
    T, H = hidden_states.shape
    E_local, G1, _ = gemm1_weights.shape
    I = G1 // 2
    assert routing_logits.shape[1] % N_GROUP == 0
    assert hidden_states_scale.shape == (H // BLOCK, T)
    assert gemm2_weights.shape == (E_local, H, I)

    experts, weights = route(routing_logits, routing_bias, float(routed_scaling_factor))
    a_scale = hidden_states_scale.to(torch.float32).t().repeat_interleave(BLOCK, dim=1)
    A = hidden_states.to(torch.float32) * a_scale

    out = torch.zeros(T, H, dtype=torch.float32, device=hidden_states.device)
    offset = int(local_expert_offset)
    for le in range(E_local):
        hit = experts == offset + le  # [T, 8]; a token chooses an expert at most once
        tokens = hit.any(dim=1).nonzero().squeeze(1)
        if tokens.numel() == 0:
            continue
        w_tok = (weights * hit).sum(dim=1).index_select(0, tokens)
        g1 = A.index_select(0, tokens) @ _dequant(gemm1_weights[le], gemm1_weights_scale[le]).t()
        x1, x2 = g1[:, :I], g1[:, I:]
        c = x1 * (x2 * torch.sigmoid(x2))
        y = c @ _dequant(gemm2_weights[le], gemm2_weights_scale[le]).t()
        out.index_add_(0, tokens, y * w_tok.unsqueeze(1))
    return out.to(torch.bfloat16)
