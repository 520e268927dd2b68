"""kbot reference: Gated Delta Net prefill over variable-length sequences, k-last state layout.

Math: the decode step applied token by token within each sequence (cu_seqlens[i] .. cu_seqlens[i+1]),
starting from state[i] (zeros when state is None); new_state[i] is the state after the sequence's
last token (zeros for an empty sequence, as in the official definition).
Per token t and value head h (float32), S stored [V, K]:
  g = exp(-exp(A_log[h]) * softplus(a[t, h] + dt_bias[h])),  beta = sigmoid(b[t, h])
  S0 = g * S;  S = S0 + beta * (v[t, h] - S0 k[t]) k[t]^T;  output[t, h] = scale * S q[t]  (bf16)
q/k head for value head h is h // (Hv / Hq).

Computed in float32 in the equivalent chunked form (exact in exact arithmetic; the tests check it
against the token-by-token recurrence of the official definition and of an independent solution), so
that one call costs a few hundred batched tensor operations instead of one Python step per token
(0.03 s instead of 2.3 s at 8192 tokens on an H200, which is what lets every evaluation run every
workload). With H = S^T and, inside a chunk of C tokens, gamma_i = sum_{j<=i} log g_j:
  A  = strictly lower [beta_i (k_i . k_j) exp(gamma_i - gamma_j)],  T = (I + A)^{-1}  (triangular solve)
  W  = T diag(beta exp(gamma)) K,  U = T diag(beta) V,  Vn = U - W H
  O  = scale (diag(exp(gamma)) Q H + [lower incl. diagonal (q_i . k_j) exp(gamma_i - gamma_j)] Vn)
  H' = exp(gamma_C) H + (diag(exp(gamma_C - gamma)) K)^T Vn
Sequences are padded to whole chunks and advance together, one chunk per step; a sequence that has no
chunk at a step keeps its state.
"""

import math

import torch
import torch.nn.functional as F

CHUNK = 64


@torch.no_grad()
def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    total, Hq, K = q.shape
    Hv, V = v.shape[1], v.shape[2]
    assert Hv % Hq == 0 and k.shape[1] == Hq
    device = q.device
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(K)
    N = cu_seqlens.numel() - 1
    C = CHUNK
    rep = Hv // Hq
    starts = cu_seqlens[:-1].to(torch.int64)
    lens = cu_seqlens[1:].to(torch.int64) - starts
    S = torch.zeros(N, Hv, V, K, dtype=torch.float32, device=device) if state is None else state.to(torch.float32)
    out = torch.zeros(total, Hv, V, dtype=torch.float32, device=device)
    if N == 0 or total == 0:
        return out.to(torch.bfloat16), torch.zeros_like(S)

    glog = -torch.exp(A_log.to(torch.float32)) * F.softplus(a.to(torch.float32) + dt_bias.to(torch.float32))  # [T, Hv]
    beta = torch.sigmoid(b.to(torch.float32))
    qh = q.to(torch.float32).repeat_interleave(rep, dim=1)  # [T, Hv, K]
    kh = k.to(torch.float32).repeat_interleave(rep, dim=1)
    vf = v.to(torch.float32)

    chunks = (lens + C - 1) // C
    M = int(chunks.max())
    pos = torch.arange(M * C, device=device).view(M, C)
    valid = pos[None] < lens[:, None, None]  # [N, M, C]
    idx = torch.where(valid, starts[:, None, None] + pos[None], 0)

    def gather(x):  # [T, Hv, ...] -> [N, M, Hv, C, ...], zero where there is no token
        y = x[idx] * valid.view(N, M, C, *([1] * (x.dim() - 1)))
        return y.transpose(2, 3)

    kc, qc, vc = gather(kh), gather(qh), gather(vf)  # [N, M, Hv, C, K]
    bc = gather(beta)  # [N, M, Hv, C]
    gam = torch.cumsum(gather(glog), dim=-1)
    diff = gam[..., :, None] - gam[..., None, :]
    strict = torch.tril(torch.ones(C, C, dtype=torch.bool, device=device), -1)
    causal = torch.tril(torch.ones(C, C, dtype=torch.bool, device=device))
    A = torch.where(strict, bc[..., :, None] * (kc @ kc.transpose(-1, -2)) * torch.exp(torch.where(strict, diff, 0.0)), 0.0)
    eye = torch.eye(C, dtype=torch.float32, device=device)
    Tm = torch.linalg.solve_triangular(eye + A, eye.expand_as(A), upper=False, unitriangular=True)
    W = Tm @ (kc * (bc * torch.exp(gam))[..., None])
    U = Tm @ (vc * bc[..., None])
    Aqk = torch.where(causal, (qc @ kc.transpose(-1, -2)) * torch.exp(torch.where(causal, diff, 0.0)), 0.0)
    glast = gam[..., -1]  # [N, M, Hv]: the decay to the chunk's last token (padding adds log 1 = 0)
    KD = kc * torch.exp(glast[..., None] - gam)[..., None]

    H = S.transpose(-1, -2)  # [N, Hv, K, V]
    out_c = torch.empty(N, M, Hv, C, V, dtype=torch.float32, device=device)
    for m in range(M):
        Vn = U[:, m] - W[:, m] @ H
        out_c[:, m] = scale * (torch.exp(gam[:, m])[..., None] * (qc[:, m] @ H) + Aqk[:, m] @ Vn)
        Hn = torch.exp(glast[:, m])[..., None, None] * H + KD[:, m].transpose(-1, -2) @ Vn
        H = torch.where((chunks > m)[:, None, None, None], Hn, H)
    out[idx[valid]] = out_c.transpose(2, 3)[valid]
    S = H.transpose(-1, -2)
    # As the official definition: an empty sequence's new_state is zeros (not its initial state).
    S = torch.where((lens > 0)[:, None, None, None], S, torch.zeros((), dtype=S.dtype, device=device))
    return out.to(torch.bfloat16), S.contiguous()
