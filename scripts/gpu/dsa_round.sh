#!/usr/bin/env bash
# One device call for the DSA seeds: the variant sweep (scripts/gpu/dsa_dev.py, phase B only), then for
# each op the best variant that qualifies (scripts/gpu/pick_submission.py: geomean over the seed's
# default at least PICK_MIN, no workload under PICK_WORST, every workload right) sent through kbot's
# loop as a person's PR (scripts/gpu/submit_variants.sh). Every swept variant is a candidate, written as
# a submission from the seed with that variant's tunables (pick_submission.py --write-candidates), so what
# is sent is what was measured; the one sent comes back under $OUT/candidates/.
#   usage (repo root, on the device): source scripts/gpu/setup_device.sh
#     WORKSPACE_TAR=docs/measurements/<dir>/NN-workspace.tar.gz bash scripts/gpu/dsa_round.sh attention indexer
#   DEV_BUDGET (default 240 s of sweep), PICK_MIN (1.03), PICK_WORST (0.98), SUBMIT_TIMEOUT (per submission).
# Outputs under $OUT: dsa_dev.{log,json,md}, pick-<op>.txt, candidates/<picked>.json, submit.txt and submit/
# (submit.log, records.txt, workspace.tar.gz).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/dsa_round_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
declare -A DEF=([indexer]=dsa_topk_indexer_fp8_h64_d128_topk2048_ps64 [attention]=dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64)
[ $# -gt 0 ] || { echo "usage: dsa_round.sh attention|indexer [...]" >&2; exit 2; }
only=()
for op in "$@"; do
  [ -n "${DEF[$op]:-}" ] || { echo "unknown op $op (indexer, attention)" >&2; exit 2; }
  only+=(--only "$op")
done
OUT="$OUT" "$PY" scripts/gpu/dsa_dev.py "${only[@]}" --no-eval --budget-s "${DEV_BUDGET:-240}" > "$OUT/dsa_dev.log" 2>&1 || echo "dsa_dev exit $?"
picks=()
for op in "$@"; do
  p=$("$PY" scripts/gpu/pick_submission.py "$OUT/dsa_dev.json" --op "$op" --min "${PICK_MIN:-1.03}" --worst "${PICK_WORST:-0.98}" \
      --write-candidates "$OUT/candidates-all" 2> "$OUT/pick-$op.txt")
  echo "$op: picked ${p:-nothing}" | tee -a "$OUT/pick-$op.txt"
  if [ -n "$p" ]; then
    mkdir -p "$OUT/candidates" && cp "$p" "$OUT/candidates/" && picks+=("$OUT/candidates/$(basename "$p")")
  fi
done
rm -rf "$OUT/candidates-all"  # the unpicked ones: at most 8 files come back from the device
rc=0
if [ ${#picks[@]} -gt 0 ]; then
  OUT="$OUT/submit" bash scripts/gpu/submit_variants.sh "${picks[@]}" > "$OUT/submit.txt" 2>&1 || rc=1
  grep -E "reject|promot" "$OUT/submit/submit.log"
fi
tail -n 40 "$OUT/dsa_dev.log"
exit $rc
