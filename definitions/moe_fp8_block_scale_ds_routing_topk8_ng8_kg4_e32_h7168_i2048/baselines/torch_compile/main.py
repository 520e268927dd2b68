"""Baseline: the reference under torch.compile, what a user would try first.

The definition's reference (reference.py, shipped as a second source of this solution) is compiled
where it is not data-dependent, each part once per process with dynamic shapes (no recompilation per
token count):

- ``_prologue``: the reference's routing (``route``: sigmoid, grouped top-k, normalized weights) and
  the activations dequantized to float32, dynamic in the token count;
- ``_expert``: one expert's weights dequantized to float32 (the reference's ``_dequant``), gemm1,
  SwiGLU (up * silu(gate), up = the first half of gemm1's rows), gemm2, times the routing weights;
  dynamic in the expert's token count.

The loop over the 32 local experts and each expert's token list (``nonzero``) stay in Python as in
the reference: every expert costs a host synchronization, and the float32 GEMMs (TF32 off, torch's
default) are what the reference computes.
"""

import torch
from reference import BLOCK, _dequant, route


@torch.compile(dynamic=True)
def _prologue(routing_logits, routing_bias, hidden_states, hidden_states_scale, routed_scaling_factor):
    experts, w = route(routing_logits, routing_bias, routed_scaling_factor)
    a_scale = hidden_states_scale.to(torch.float32).t().repeat_interleave(BLOCK, dim=1)
    return experts, w, hidden_states.to(torch.float32) * a_scale


@torch.compile(dynamic=True)
def _expert(a, w13, s13, w2, s2, w_tok):
    g1 = a @ _dequant(w13, s13).t()
    inter = g1.shape[1] // 2
    c = g1[:, :inter] * torch.nn.functional.silu(g1[:, inter:])
    return (c @ _dequant(w2, s2).t()) * w_tok.unsqueeze(1)


@torch.no_grad()
def run(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights, gemm1_weights_scale,
        gemm2_weights, gemm2_weights_scale, local_expert_offset, routed_scaling_factor):
    experts, weights, A = _prologue(routing_logits, routing_bias, hidden_states, hidden_states_scale, float(routed_scaling_factor))
    out = torch.zeros(A.shape, dtype=torch.float32, device=A.device)
    offset = int(local_expert_offset)
    for le in range(gemm1_weights.shape[0]):
        hit = experts == offset + le
        tokens = hit.any(dim=1).nonzero().squeeze(1)
        if tokens.numel() == 0:
            continue
        w_tok = (weights * hit).sum(dim=1).index_select(0, tokens)
        y = _expert(A.index_select(0, tokens), gemm1_weights[le], gemm1_weights_scale[le], gemm2_weights[le],
                    gemm2_weights_scale[le], w_tok)
        out.index_add_(0, tokens, y)
    return out.to(torch.bfloat16)
