"""kbot reference: DSA sparse attention over a paged MLA cache (page size 64).

Math, per query token t and head h (float32):
  J        = the valid entries of sparse_indices[t] (-1 is padding); an index is a physical token
             id page * page_size + offset into the flattened caches;
  logit[j] = sm_scale * (q_nope[t, h] . ckv[j] + q_pe[t, h] . kpe[j])     for j in J
  p        = softmax(logit);  output[t, h] = sum_j p[j] * ckv[j]   (bf16)
  lse[t, h] = log2(sum_j exp(logit[j]))  (the base-2 log-sum-exp of the scaled logits)
A token with no valid index gets output 0 and lse -inf. Tokens are processed in chunks with all
heads and all selected entries at once.
"""

import math

import torch

CHUNK_BYTES = 1 << 28  # bound on the gathered float32 keys per chunk


@torch.no_grad()
def run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale):
    T, H, Dc = q_nope.shape
    Dp = q_pe.shape[-1]
    K = sparse_indices.shape[-1]
    device = q_nope.device
    kc_all = ckv_cache.reshape(-1, Dc)
    kp_all = kpe_cache.reshape(-1, Dp)
    output = torch.empty(T, H, Dc, dtype=torch.bfloat16, device=device)
    lse = torch.empty(T, H, dtype=torch.float32, device=device)
    step = max(1, CHUNK_BYTES // (K * (Dc + Dp) * 4))
    for s in range(0, T, step):
        e = min(T, s + step)
        idx = sparse_indices[s:e].to(torch.int64)
        valid = idx != -1
        safe = torch.where(valid, idx, torch.zeros_like(idx))
        kc = kc_all[safe].to(torch.float32)  # [c, K, Dc]
        kp = kp_all[safe].to(torch.float32)
        logits = torch.einsum("thd,tkd->thk", q_nope[s:e].to(torch.float32), kc)
        logits = logits + torch.einsum("thd,tkd->thk", q_pe[s:e].to(torch.float32), kp)
        logits = (logits * sm_scale).masked_fill(~valid.unsqueeze(1), float("-inf"))
        lse_e = torch.logsumexp(logits, dim=-1)  # natural log; -inf for empty rows
        p = torch.exp(logits - lse_e.unsqueeze(-1))
        p = torch.where(valid.unsqueeze(1), p, torch.zeros_like(p))  # also clears NaN of empty rows
        output[s:e] = torch.einsum("thk,tkd->thd", p, kc).to(torch.bfloat16)
        lse[s:e] = lse_e / math.log(2.0)
    return output, lse
