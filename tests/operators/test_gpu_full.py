"""On the device: each full-size reference agrees with the official one on a small workload (CUDA).

The official MoE reference dequantizes all 32 experts (~20 GB of float32); fine on an H200.
"""

from __future__ import annotations

import math

import pytest
import torch

from opkit import ATTENTION, DECODE, INDEXER, MOE, PREFILL, clone, exec_reference, gen, judge, official, our_run, ours, scalar, workload
from harness.inputs import make_inputs

CASES = {
    MOE: workload({"seq_len": 16}, routing_logits=gen("moe_routing_logits"), local_expert_offset=scalar(96), routed_scaling_factor=scalar(2.5)),
    INDEXER: workload({"batch_size": 16, "max_num_pages": 91, "num_pages": 11923}, seq_lens=gen("dsa_seq_lens", mix="mixed")),
    ATTENTION: workload({"num_tokens": 32, "num_pages": 2048}, sparse_indices=gen("dsa_sparse_indices", mix="mixed"), sm_scale=scalar(1 / math.sqrt(192))),
    DECODE: workload({"batch_size": 64}, scale=scalar(1 / math.sqrt(128))),
    PREFILL: workload({"total_seq_len": 512, "num_seqs": 4, "len_cu_seqlens": 5}, cu_seqlens=gen("gdn_cu_seqlens", mix="skewed"), scale=scalar(0.0)),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
def test_full_size_reference_matches_official_on_cuda(shared, name):
    torch.backends.cuda.matmul.allow_tf32 = False
    defn, cfg = ours(name)
    w = CASES[name]
    x = make_inputs(defn, w, seed=0, device="cuda", config=cfg)
    mine = our_run(name)(**clone(x))
    theirs = exec_reference(official(shared, name).reference)(**clone(x))
    r = judge(defn, cfg, w, x, mine, theirs)
    assert r.ok, r.message
