"""kbot reference: DSA top-k indexer (FP8 keys in the deep_gemm paged layout, page size 64).

Math, per sequence b of length n (float32):
  K[t]     = fp8 key of token t * its float32 scale; a page holds page_size tokens' fp8 bytes
             first, then their page_size float32 scales;
  score[t] = sum_h weights[b, h] * relu(q[b, h] . K[t])            for t < n
  out[b]   = physical ids (block_table[b, t // page_size] * page_size + t % page_size) of the
             min(topk, n) highest scores, in descending score order, then -1.
All sequences are scored in one batched contraction over pages gathered through the block table.
"""

import torch

TOPK = 2048
SCALE_BYTES = 4


@torch.no_grad()
def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):
    B, _, D = q_index_fp8.shape
    _, ps, _, Dw = k_index_cache_fp8.shape
    assert Dw == D + SCALE_BYTES
    device = q_index_fp8.device
    out = torch.full((B, TOPK), -1, dtype=torch.int32, device=device)
    lens = seq_lens.to(torch.int64)
    L = int(lens.max()) if B else 0
    if L == 0:
        return out
    mp = (L + ps - 1) // ps
    page_start = torch.arange(mp, device=device) * ps
    used = page_start.unsqueeze(0) < lens.unsqueeze(1)  # pages inside each sequence
    pages = torch.where(used, block_table[:, :mp].to(torch.int64), torch.zeros((), dtype=torch.int64, device=device))

    # Gather only the pages the sequences use, then split each page into fp8 data and scales.
    raw = k_index_cache_fp8.view(torch.uint8).reshape(-1, ps * Dw)[pages.reshape(-1)]  # [B*mp, ps*Dw]
    data = raw[:, : ps * D].contiguous().view(torch.float8_e4m3fn).reshape(B, mp * ps, D)
    scale = raw[:, ps * D :].contiguous().view(torch.float32).reshape(B, mp * ps, 1)
    keys = data.to(torch.float32) * scale

    logits = torch.einsum("bhd,btd->bht", q_index_fp8.to(torch.float32), keys)
    score = (torch.relu(logits) * weights.to(torch.float32).unsqueeze(-1)).sum(dim=1)  # [B, mp*ps]
    pos = torch.arange(mp * ps, device=device)
    score = score.masked_fill(pos.unsqueeze(0) >= lens.unsqueeze(1), float("-inf"))

    k = min(TOPK, mp * ps)
    top = score.topk(k, dim=1).indices  # descending; -inf (past the end) last
    ids = pages.gather(1, top // ps) * ps + top % ps
    keep = torch.arange(k, device=device).unsqueeze(0) < lens.clamp_max(TOPK).unsqueeze(1)
    out[:, :k] = torch.where(keep, ids, torch.full_like(ids, -1)).to(torch.int32)
    return out
