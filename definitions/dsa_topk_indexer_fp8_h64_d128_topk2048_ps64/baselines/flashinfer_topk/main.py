"""Baseline: scores in plain torch, then FlashInfer's fused top-k + page-table transform.

The contest's baseline was DeepGEMM's ``fp8_paged_mqa_logits`` followed by FlashInfer's
``top_k_page_table_transform``; DeepGEMM does not load on the H200's torch 2.11, so the scores come
from torch here (the reference's math over the block table's full width, no host synchronization), and
only the selection is FlashInfer's. Needs the ``flashinfer`` package (a carried wheel on the device).

``flashinfer.top_k_page_table_transform(input, src_page_table, lengths, k, page_size=64)``
(flashinfer/topk.py, 0.7.4): ``input [rows, max_len]`` scores, ``src_page_table [rows, pages]`` int32,
``lengths [rows]`` int32; returns ``[rows, k]`` int32 with ``src_page_table[i, j // 64] * 64 + j % 64``
for each chosen position ``j`` and -1 past ``lengths[i]`` (rows no longer than k pass through in
order): exactly our physical token id, so the block table goes in as it is.
"""

import torch

TOPK = 2048
PAGE_SIZE = 64


def scores(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):
    """Scores [B, mp*ps] float32, -inf past each row's length."""
    B, _, D = q_index_fp8.shape
    P, ps, _, Dw = k_index_cache_fp8.shape
    mp = block_table.shape[1]
    dev = q_index_fp8.device
    lens = seq_lens.to(torch.int64)
    used = torch.arange(mp, device=dev).unsqueeze(0) * ps < lens.unsqueeze(1)
    pages = torch.where(used, block_table.to(torch.int64), torch.zeros((), dtype=torch.int64, device=dev))
    raw = k_index_cache_fp8.view(torch.uint8).reshape(P, ps * Dw)[pages.reshape(-1)]
    data = raw[:, : ps * D].contiguous().view(torch.float8_e4m3fn).reshape(B, mp * ps, D)
    scale = raw[:, ps * D :].contiguous().view(torch.float32).reshape(B, mp * ps, 1)
    logits = torch.einsum("bhd,btd->bht", q_index_fp8.to(torch.float32), data.to(torch.float32) * scale)
    score = (torch.relu(logits) * weights.to(torch.float32).unsqueeze(-1)).sum(dim=1)
    pos = torch.arange(mp * ps, device=dev)
    return score.masked_fill(pos.unsqueeze(0) >= lens.unsqueeze(1), float("-inf"))


@torch.no_grad()
def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):
    import flashinfer  # the device's carried wheel; imported here so the module loads without it

    score = scores(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table)
    return flashinfer.top_k_page_table_transform(score, block_table.to(torch.int32).contiguous(),
                                                 seq_lens.to(torch.int32).contiguous(), TOPK, page_size=PAGE_SIZE)
