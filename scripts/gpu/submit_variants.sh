#!/usr/bin/env bash
# On the GPU: hand-written variants entering kbot's loop as a person's attempts. Each SOLUTION.json goes
# through `kbot submit --approve` into one local forge (the workspace of an earlier contest campaign):
# a person's branch and PR, the harness's paired evaluation against the champion of the time, the review,
# and the promotion rules (the owner's approval recorded for the measured head). Then the PR records and
# the leaderboards, and the workspace packed (no build folders) so a promoted champion can be landed on main.
#   usage (repo root, on the device): source scripts/gpu/setup_device.sh
#     WORKSPACE_TAR=docs/measurements/h200-<date>/NN-workspace.tar.gz bash scripts/gpu/submit_variants.sh A.json [B.json ...]
#   WORKSPACE (default /tmp/kbot_contest_ws): where the workspace is unpacked; SUBMIT_TIMEOUT: seconds per
#   submission (SIGINT after it; the evaluation resumes from the run cache on a re-run); BUDGET: timing
#   budget per workload (seconds); AUTHOR (default "kbot team <team@kbot.invalid>"); SUBMIT_ARGS: more
#   `kbot submit` options (e.g. --no-baselines: skip the declared baselines, whose torch.compile one
#   compiles for every workload).
# Outputs under $OUT: submit.log (each submission's JSON outcome), records.txt, workspace.tar.gz.
# Exit 0 when every submission was evaluated (whatever the decision).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/submit_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
K=("$PY" -m harness.cli)
WS="${WORKSPACE:-/tmp/kbot_contest_ws}"
rc=0
# shellcheck source=scripts/gpu/workspace_lib.sh
source scripts/gpu/workspace_lib.sh
unpack_workspace
defs=()
for sol in "$@"; do
  echo "=== $sol ($(date -u +%FT%TZ))" | tee -a "$OUT/submit.log"
  # shellcheck disable=SC2086
  ${SUBMIT_TIMEOUT:+timeout -s INT -k 30 "$SUBMIT_TIMEOUT"} "${K[@]}" submit "$sol" --approve --device cuda \
    --author "${AUTHOR:-kbot team <team@kbot.invalid>}" ${BUDGET:+--budget "$BUDGET"} ${SUBMIT_ARGS:-} --workspace "$WS" --json \
    >> "$OUT/submit.log" 2>&1 || rc=1
  defs+=("$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["definition"])' "$sol")")
done
for def in $(printf '%s\n' "${defs[@]}" | sort -u); do
  "${K[@]}" leaderboard "$def" --workspace "$WS" >> "$OUT/records.txt" 2>&1 || true
done
write_pr_records
pack_workspace || rc=1
tail -n 40 "$OUT/submit.log"
ls -la "$OUT"
exit $rc
