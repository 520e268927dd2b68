#!/usr/bin/env bash
# One device call for a contest seed's variants: the sweep (scripts/gpu/dsa_dev.py phase B for the DSA
# ops, scripts/gpu/moe_dev.py phase A for the MoE, scripts/gpu/gdn_dev.py for the Gated DeltaNet ones), then for each op the best variant that qualifies
# (scripts/gpu/pick_submission.py: geomean over the champion (GDN, DSA) or the seed's default (MoE) at least PICK_MIN, no workload under
# PICK_WORST, every workload right) sent through kbot's loop as a person's PR
# (scripts/gpu/submit_variants.sh). Every swept variant is a candidate, written as a submission from the
# seed with that variant's tunables (pick_submission.py --write-candidates), so what is sent is what was
# measured; the one sent comes back under $OUT/candidates/.
#   usage (repo root, on the device): source scripts/gpu/setup_device.sh
#     WORKSPACE_TAR=docs/measurements/<dir>/NN-workspace.tar.gz bash scripts/gpu/dev_round.sh attention indexer
#     WORKSPACE_TAR=… MOE_VARIANTS="tma small_tma" MOE_SEQ_LENS=1,16,62,80,901,14107 bash scripts/gpu/dev_round.sh moe
#     WORKSPACE_TAR=… GDN_TUNABLES="REC_PARALLEL_O REC_WARPS" SUBMIT_ARGS=--no-baselines bash scripts/gpu/dev_round.sh gdn_prefill
#   DEV_BUDGET (default 240 s of sweep), PICK_MIN (1.03), PICK_WORST (0.98), SUBMIT_TIMEOUT (per submission),
#   MOE_VARIANTS (moe_dev.py variant names beside its default; default all), MOE_SEQ_LENS (moe_dev.py's default),
#   DSA_VARIANTS (dsa_dev.py variant names beside the default and the champion; default all),
#   GDN_TUNABLES (gdn_dev.py sweeps the variants that set one of these; default all of the op's variants),
#   PICK_BASELINE (GDN and DSA: the sweep's row the ratios are over, default champion, which gdn_dev.py and
#   dsa_dev.py time beside the seed: the seed's default is not always the champion's code, docs/measurements.md
#   recording 37; the MoE sweep has no champion row and picks over the seed's default).
#   NO_SUBMIT=1 sweeps and picks only.
# Outputs under $OUT: round.tar.gz (dsa_dev.* or moe_dev.*, pick-<op>.txt, submit.txt), candidates/<picked>.json
# and submit/ (submit.log, records.txt, workspace.tar.gz).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/dev_round_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
[ $# -gt 0 ] || { echo "usage: dev_round.sh attention|indexer|moe|gdn_decode|gdn_prefill [...]" >&2; exit 2; }
dsa=()
moe=0
gdn=()
for op in "$@"; do
  case "$op" in
    indexer|attention) dsa+=(--only "$op") ;;
    moe) moe=1 ;;
    gdn_decode|gdn_prefill) gdn+=("${op#gdn_}") ;;
    *) echo "unknown op $op (indexer, attention, moe, gdn_decode, gdn_prefill)" >&2; exit 2 ;;
  esac
done
[ ${#gdn[@]} -le 1 ] || { echo "one GDN op per round (gdn_dev.py writes one sweep)" >&2; exit 2; }
if [ ${#dsa[@]} -gt 0 ]; then
  for v in ${DSA_VARIANTS:-}; do dsa+=(--variant "$v"); done
  OUT="$OUT" "$PY" scripts/gpu/dsa_dev.py "${dsa[@]}" --no-eval --budget-s "${DEV_BUDGET:-240}" > "$OUT/dsa_dev.log" 2>&1 \
    || echo "dsa_dev exit $?"
fi
if [ $moe = 1 ]; then
  only=()
  if [ -n "${MOE_VARIANTS:-}" ]; then
    only=(--only default)
    for v in $MOE_VARIANTS; do only+=(--only "$v"); done
  fi
  OUT="$OUT" "$PY" scripts/gpu/moe_dev.py --skip-eval "${only[@]}" ${MOE_SEQ_LENS:+--seq-lens "$MOE_SEQ_LENS"} \
    --budget-s "${DEV_BUDGET:-240}" > "$OUT/moe_dev.log" 2>&1 || echo "moe_dev exit $?"
fi
if [ ${#gdn[@]} -gt 0 ]; then
  with=()
  for t in ${GDN_TUNABLES:-}; do with+=(--with-tunable "$t"); done
  # the sweep stops starting workloads at DEV_BUDGET and writes as it goes; the timeout only backs that up
  OUT="$OUT" timeout "$(( ${DEV_BUDGET:-240} + 120 ))" "$PY" scripts/gpu/gdn_dev.py --only "${gdn[0]}" "${with[@]}" \
    --budget-s "${DEV_BUDGET:-240}" > "$OUT/gdn_dev.log" 2>&1 \
    || echo "gdn_dev exit $?"
fi
picks=()
for op in "$@"; do
  case "$op" in
    moe) sweep=("$OUT/moe_dev.json") ;;
    # gdn_dev.py runs the champion on main beside the seed: pick against what the loop will pair with
    gdn_decode) sweep=("$OUT/gdn_dev.json" --definition gdn_decode_qk4_v8_d128_k_last --baseline "${PICK_BASELINE:-champion}") ;;
    gdn_prefill) sweep=("$OUT/gdn_dev.json" --definition gdn_prefill_qk4_v8_d128_k_last --baseline "${PICK_BASELINE:-champion}") ;;
    *) sweep=("$OUT/dsa_dev.json" --op "$op" --baseline "${PICK_BASELINE:-champion}") ;;  # dsa_dev.py runs it too
  esac
  p=$("$PY" scripts/gpu/pick_submission.py "${sweep[@]}" --min "${PICK_MIN:-1.03}" --worst "${PICK_WORST:-0.98}" \
      --write-candidates "$OUT/candidates-all" 2> "$OUT/pick-$op.txt")
  echo "$op: picked ${p:-nothing}" | tee -a "$OUT/pick-$op.txt"
  if [ -n "$p" ]; then
    mkdir -p "$OUT/candidates" && cp "$p" "$OUT/candidates/" && picks+=("$OUT/candidates/$(basename "$p")")
  fi
done
rm -rf "$OUT/candidates-all"  # the unpicked ones: at most 8 files come back from the device
rc=0
if [ ${#picks[@]} -gt 0 ] && [ -z "${NO_SUBMIT:-}" ]; then
  OUT="$OUT/submit" bash scripts/gpu/submit_variants.sh "${picks[@]}" > "$OUT/submit.txt" 2>&1 || rc=1
  grep -E "reject|promot" "$OUT/submit/submit.log"
fi
for log in "$OUT/dsa_dev.log" "$OUT/moe_dev.log" "$OUT/gdn_dev.log"; do
  [ -f "$log" ] && tail -n 40 "$log"
done
# the device tool brings back at most 8 files: the sweep's and the pick's text in one archive
(cd "$OUT" && tar -czf round.tar.gz --remove-files -- *_dev.* pick-*.txt submit.txt 2>/dev/null)
exit $rc
