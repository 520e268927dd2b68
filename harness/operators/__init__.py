"""Generators and comparators for the contest operators (MoE, DSA indexer and attention, GDN).

Importing this package registers them in ``harness.inputs.GENERATORS`` and
``harness.compare.COMPARATORS``; the evaluation worker imports it before loading any definition.
"""

from . import dsa, gdn, moe  # noqa: F401  (imported for their registrations)

CONTEST_DEFINITIONS = (
    "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048",
    "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64",
    "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64",
    "gdn_decode_qk4_v8_d128_k_last",
    "gdn_prefill_qk4_v8_d128_k_last",
)
