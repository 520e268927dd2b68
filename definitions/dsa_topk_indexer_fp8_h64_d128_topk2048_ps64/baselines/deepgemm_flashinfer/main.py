"""Baseline: the contest's own indexer baseline, DeepGEMM's ``fp8_paged_mqa_logits`` (the scores, on
sm_90 tensor cores, straight from the paged FP8 cache) followed by FlashInfer's ``top_k_page_table_transform``
(the selection and the page-table transform). Needs ``deep_gemm`` (built on the device from the sources
scripts/gpu/pack_deepgemm.py pins: scripts/gpu/deepgemm_device.sh) and ``flashinfer`` (the carried package).

``deep_gemm.fp8_paged_mqa_logits(q, kv_cache, weights, context_lens, block_table, schedule_meta,
max_context_len, clean_logits)`` (DeepGEMM 2.6.1, csrc/apis/attention.hpp; its tests/test_attention.py):
``q`` [B, next_n, H, D] FP8 (next_n = 1: one query token per sequence), ``kv_cache`` [pages, 64, 1, D + 4]
bytes with, per page, the 64 tokens' FP8 values then their 64 float32 scales (our cache's layout as it is),
``weights`` [B * next_n, H] float32, ``context_lens`` [B] int32, ``block_table`` [B, pages] int32,
``schedule_meta`` from ``get_paged_mqa_logits_metadata(context_lens, 64, num_sms)``; returns float32
logits [B * next_n, max_context_len]; with ``clean_logits`` the positions at or past a row's length are
-inf, which the top-k needs. On sm_90 it takes 32 or 64 heads of dimension 128 and pages of 64 tokens.

``flashinfer.top_k_page_table_transform(input, src_page_table, lengths, k, page_size=64)`` (0.7.4): the
chosen positions ``j`` as ``src_page_table[i, j // 64] * 64 + j % 64``, -1 past ``lengths[i]``: our
physical token ids.
"""

import torch

TOPK = 2048
PAGE_SIZE = 64


@torch.no_grad()
def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):
    import deep_gemm  # built on the device; imported here so the module loads without it
    import flashinfer  # the device's carried package

    B, H, D = q_index_fp8.shape
    lens = seq_lens.to(torch.int32).contiguous()
    table = block_table.to(torch.int32).contiguous()
    width = table.shape[1] * PAGE_SIZE
    meta = deep_gemm.get_paged_mqa_logits_metadata(lens, PAGE_SIZE, deep_gemm.get_num_sms())
    logits = deep_gemm.fp8_paged_mqa_logits(q_index_fp8.view(B, 1, H, D), k_index_cache_fp8.view(torch.uint8),
                                            weights.to(torch.float32).contiguous(), lens, table, meta, width,
                                            clean_logits=True)
    return flashinfer.top_k_page_table_transform(logits, table, lens, TOPK, page_size=PAGE_SIZE)
