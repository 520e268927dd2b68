#!/usr/bin/env bash
# Stage the official files the operator GPU checks need into .kbot/shared (git-ignored), so a device run
# that only receives the repository can carry them (carry: [".kbot/shared"]) without the repository
# ever containing copies of them. Copies, with their layout: the five contest definitions and the MoE
# workload file (its safetensors blobs are not shipped anywhere; the scripts generate routing instead).
#
#   scripts/gpu/operators_stage_shared.sh [SHARED]        # default ../shared
#   then on the device:  KBOT_SHARED=.kbot/shared python scripts/gpu/operators_full.py --official-refs
#                   or:  KBOT_SHARED=.kbot/shared pytest tests/operators -m gpu
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
src="${1:-$repo/../shared}/flashinfer-trace"
dst="$repo/.kbot/shared/flashinfer-trace"
[ -d "$src/definitions" ] || { echo "no $src/definitions" >&2; exit 1; }
files=(
  definitions/moe/moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048.json
  definitions/dsa_paged/dsa_topk_indexer_fp8_h64_d128_topk2048_ps64.json
  definitions/dsa_paged/dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64.json
  definitions/gdn/gdn_decode_qk4_v8_d128_k_last.json
  definitions/gdn/gdn_prefill_qk4_v8_d128_k_last.json
  workloads/moe/moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048.jsonl
)
for f in "${files[@]}"; do
  mkdir -p "$dst/$(dirname "$f")"
  cp "$src/$f" "$dst/$f"
done
echo "staged ${#files[@]} files under $dst ($(du -sh "$dst" | cut -f1))"
