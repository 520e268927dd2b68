"""kbot reference: Gated Delta Net decode step, GVA heads, k-last state layout.

Math, per sequence b and value head h (float32), with q/k head h // (Hv / Hq) and S = state[b, h]
stored [V, K] (k-last):
  g     = exp(-exp(A_log[h]) * softplus(a[b, h] + dt_bias[h]))      decay in (0, 1]
  beta  = sigmoid(b[b, h])                                           update strength
  S0    = g * S
  u     = beta * (v - S0 k)                                          delta-rule correction [V]
  S'    = S0 + u k^T                                                 new_state[b, h]
  o     = scale * S' q                                               output[b, 0, h] (bf16)
scale 0 (or None) means 1 / sqrt(K). A missing state means zeros. All sequences and heads at once.
"""

import math

import torch
import torch.nn.functional as F


def gates(A_log, a, dt_bias, b):
    g = torch.exp(-torch.exp(A_log.to(torch.float32)) * F.softplus(a.to(torch.float32) + dt_bias.to(torch.float32)))
    beta = torch.sigmoid(b.to(torch.float32))
    return g, beta


def step(S, q, k, v, g, beta, scale):
    """One delta-rule step for [N, H] heads: S [N, H, V, K]; q, k [N, H, K]; v [N, H, V]; g, beta [N, H]."""
    S0 = g[..., None, None] * S
    u = beta[..., None] * (v - torch.einsum("nhvk,nhk->nhv", S0, k))
    S1 = S0 + u[..., :, None] * k[..., None, :]
    return S1, scale * torch.einsum("nhvk,nhk->nhv", S1, q)


@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, scale):
    B, T, Hq, K = q.shape
    Hv, V = v.shape[2], v.shape[3]
    assert T == 1 and Hv % Hq == 0 and k.shape[2] == Hq
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(K)
    g, beta = gates(A_log, a[:, 0], dt_bias, b[:, 0])  # [B, Hv]
    rep = Hv // Hq
    qh = q[:, 0].to(torch.float32).repeat_interleave(rep, dim=1)
    kh = k[:, 0].to(torch.float32).repeat_interleave(rep, dim=1)
    if state is None:
        S = torch.zeros(B, Hv, V, K, dtype=torch.float32, device=q.device)
    else:
        S = state.to(torch.float32)
    S1, o = step(S, qh, kh, v[:, 0].to(torch.float32), g, beta, scale)
    return o.unsqueeze(1).to(torch.bfloat16), S1
