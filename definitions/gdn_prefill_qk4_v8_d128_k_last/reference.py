"""kbot reference: Gated Delta Net prefill over variable-length sequences, k-last state layout.

Math: the decode step applied token by token within each sequence (cu_seqlens[i] .. cu_seqlens[i+1]),
starting from state[i] (zeros when state is None); new_state[i] is the state after the sequence's
last token (zeros for an empty sequence, as in the official definition).
Per token t and value head h (float32), S stored [V, K]:
  g = exp(-exp(A_log[h]) * softplus(a[t, h] + dt_bias[h])),  beta = sigmoid(b[t, h])
  S0 = g * S;  S = S0 + beta * (v[t, h] - S0 k[t]) k[t]^T;  output[t, h] = scale * S q[t]  (bf16)
q/k head for value head h is h // (Hv / Hq). The recurrence is exact (no chunked approximation):
time steps run in a loop, all sequences and heads advance together, finished sequences are masked.
"""

import math

import torch
import torch.nn.functional as F


@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    total, Hq, K = q.shape
    Hv, V = v.shape[1], v.shape[2]
    assert Hv % Hq == 0 and k.shape[1] == Hq
    device = q.device
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(K)
    N = cu_seqlens.numel() - 1
    starts = cu_seqlens[:-1].to(torch.int64)
    lens = cu_seqlens[1:].to(torch.int64) - starts
    rep = Hv // Hq

    g = torch.exp(-torch.exp(A_log.to(torch.float32)) * F.softplus(a.to(torch.float32) + dt_bias.to(torch.float32)))
    beta = torch.sigmoid(b.to(torch.float32))  # [total, Hv]
    qh = q.to(torch.float32).repeat_interleave(rep, dim=1)
    kh = k.to(torch.float32).repeat_interleave(rep, dim=1)
    vf = v.to(torch.float32)

    if state is None:
        S = torch.zeros(N, Hv, V, K, dtype=torch.float32, device=device)
    else:
        S = state.to(torch.float32)  # never written in place: each step makes a new tensor
    L = int(lens.max()) if N else 0
    # Outputs go to a [N, L] padded buffer (no data-dependent indexing inside the loop, so a GPU never
    # waits on the host); the valid positions are gathered back to the packed layout at the end.
    out_pad = torch.zeros(N, max(L, 1), Hv, V, dtype=torch.float32, device=device)
    for i in range(L):
        live = lens > i  # sequences that still have a token i
        t = (starts + i).clamp(max=max(total - 1, 0))  # finished sequences compute on a dummy token, then are masked
        S0 = g[t][:, :, None, None] * S
        kt = kh[t]
        u = beta[t][:, :, None] * (vf[t] - torch.einsum("nhvk,nhk->nhv", S0, kt))
        S1 = S0 + u[..., :, None] * kt[..., None, :]
        out_pad[:, i] = scale * torch.einsum("nhvk,nhk->nhv", S1, qh[t])
        S = torch.where(live[:, None, None, None], S1, S)
    pos = torch.arange(max(L, 1), device=device).unsqueeze(0)
    valid = pos < lens.unsqueeze(1)  # [N, L]
    out = torch.zeros(total, Hv, V, dtype=torch.float32, device=device)
    out[(starts.unsqueeze(1) + pos)[valid]] = out_pad[valid]
    # As the official definition: an empty sequence's new_state is zeros (not its initial state).
    S = torch.where((lens > 0)[:, None, None, None], S, torch.zeros((), dtype=S.dtype, device=device))
    return out.to(torch.bfloat16), S
