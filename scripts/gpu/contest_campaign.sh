#!/usr/bin/env bash
# On the GPU: kbot's own loop on contest definitions. For each DEFINITION: `kbot optimize` with the
# offline agent (seeds from skills/seeds/<definition>/, tunable moves), every candidate a branch + PR in
# one local forge, evaluated by the harness paired against the champion of the time, reviewed, merged
# when the promotion policy says so. Then the records as `kbot pr list/show` and `kbot leaderboard`
# print them, and the workspace (forge repository, PR store, campaign stores, reports; no build folders)
# packed so the champions can be landed on main with their lineage.
#   usage (repo root, on the device): source scripts/gpu/setup_device.sh
#          ROUNDS=3 CANDIDATES=2 bash scripts/gpu/contest_campaign.sh DEFINITION [DEFINITION ...]
#   OPTIMIZE_ARGS: more `kbot optimize` options (e.g. "--profile-budget 20"); OPT_TIMEOUT: seconds per
#   definition, after which the campaign gets SIGINT (it stops between steps and can be resumed with the
#   same WORKSPACE); the records and the workspace are written either way. WORKSPACE_TAR: a
#   workspace.tar.gz of an earlier run (e.g. docs/measurements/h200-<date>/NN-workspace.tar.gz), unpacked
#   into WORKSPACE (default /tmp/kbot_contest_ws, the path the earlier run used) before anything runs:
#   finished evaluations are reused from its run cache, half-done ones resume at the next workload, and
#   an interrupted campaign continues (NEW=1 starts a fresh one from today's champion instead).
#   h200-2026-12-02/04-workspace.tar.gz was made at WORKSPACE=/tmp/ws and its campaigns name their
#   memory by that absolute path: unpack it there (later workspaces name it relative to the store).
# Outputs under $OUT: campaign.log, <definition>.summary.json, records.txt (PRs, reviews, leaderboards),
# workspace.tar.gz; with PACK=1 the first three go into one records.tar.gz (the device returns at most 8
# files: two runs in one call then return four). Exit 0 when every campaign ran (whether or not
# anything was promoted).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/contest_campaign_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
K=("$PY" -m harness.cli)
WS="${WORKSPACE:-/tmp/kbot_contest_ws}"
DEVICE="${DEVICE:-cuda}"
rc=0
# shellcheck source=scripts/gpu/workspace_lib.sh
source scripts/gpu/workspace_lib.sh
unpack_workspace
for def in "$@"; do
  echo "=== $def ($(date -u +%FT%TZ))" | tee -a "$OUT/campaign.log"
  # shellcheck disable=SC2086  # OPTIMIZE_ARGS is a list of options
  ${OPT_TIMEOUT:+timeout -s INT -k 30 "$OPT_TIMEOUT"} "${K[@]}" optimize "$def" --agent offline --device "$DEVICE" --rounds "${ROUNDS:-3}" --candidates "${CANDIDATES:-2}" \
    ${BUDGET:+--budget "$BUDGET"} ${NEW:+--new} ${OPTIMIZE_ARGS:-} --workspace "$WS" --json > "$OUT/$def.summary.json" 2>> "$OUT/campaign.log" || rc=1
  "$PY" - "$OUT/$def.summary.json" <<'PYEOF' | tee -a "$OUT/campaign.log"
import json, sys
try:
    s = json.load(open(sys.argv[1]))
except Exception as e:
    print("no summary:", e); sys.exit(0)
for r in s["candidates"]:
    print(f"{r['node']:>10} PR {r['pr']} {r['status']:<10} mean {r['mean_latency_ms']} ms  vs champion {r['speedup_vs_champion']}  vs start {r['speedup_vs_start']}  -> {r['decision']}: {(r['headline'] or '')[:120]}")
print("champion:", s["champion"], "device:", s["device"], "stop:", s["stop_reason"])
PYEOF
  "${K[@]}" leaderboard "$def" --workspace "$WS" >> "$OUT/records.txt" 2>&1 || true
done
write_pr_records
pack_workspace || rc=1
if [ -n "${PACK:-}" ]; then
  tail -n 60 "$OUT/campaign.log"
  (cd "$OUT" && tar -czf records.tar.gz campaign.log records.txt ./*.summary.json && rm -f campaign.log records.txt ./*.summary.json) || rc=1
fi
ls -la "$OUT"
exit $rc
