#!/usr/bin/env bash
# On the H200 (about 3-5 minutes): the embedded default loop on a real GPU. `kbot optimize` with the
# offline agent, starting from the deliberately weak kernel (first rmsnorm seed, BLOCK=256, 1 warp),
# on the full rmsnorm_h4096 workloads (8 batch sizes up to 16384): every candidate is a branch + PR in
# a local forge, evaluated with CUDA-event timing paired against the champion, reviewed, and merged
# when the promotion policy (skills/promotion.yaml) says so.
# Outputs under $OUT:
#   summary.json        the campaign summary (candidates, speedups, decisions, champion)
#   optimize.log        progress lines
#   prs.json, pr-<N>.txt, leaderboard.md   the records, as `kbot pr list/show` and `kbot leaderboard` print them
#   site/               the static HTML report (open site/index.html)
# Success = summary.json shows at least one candidate with "decision": "promote" on device "cuda".
# Record the table from optimize.log and the champion's speedup in docs/local.md ("GPU record").
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/optimize_campaign_out}"
mkdir -p "$OUT"
[ -f scripts/gpu/setup_device.sh ] && [ -d .whl ] && source scripts/gpu/setup_device.sh
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] && .venv/bin/python -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null && PY=.venv/bin/python
command -v git >/dev/null || { echo "git is needed (the local forge is a git repository)" >&2; exit 3; }
"$PY" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.cuda.is_available())"
"$PY" -c "import yaml, pydantic, click, rich, jinja2" || { echo "missing dependencies for $PY" >&2; exit 3; }
WS="$OUT/workspace"
rm -rf "$WS"
K=("$PY" -m harness.cli)
# DEVICE=cpu only for a dry run of this script on a machine without a GPU (small workloads, CPU timing)
DEVICE="${DEVICE:-cuda}"
"${K[@]}" optimize rmsnorm_h4096 --agent offline --device "$DEVICE" --rounds "${ROUNDS:-3}" --candidates "${CANDIDATES:-2}" \
  --budget "${BUDGET:-0.5}" --workspace "$WS" --json > "$OUT/summary.json" 2> "$OUT/optimize.log"
rc=$?
tail -n 40 "$OUT/optimize.log"
"${K[@]}" pr list --workspace "$WS" --json > "$OUT/prs.json" || true
for n in $("$PY" -c "import json,sys; print(' '.join(str(p['number']) for p in json.load(open(sys.argv[1]))))" "$OUT/prs.json" 2>/dev/null); do
  "${K[@]}" pr show "$n" --workspace "$WS" > "$OUT/pr-$n.txt" || true
done
"${K[@]}" leaderboard rmsnorm_h4096 --workspace "$WS" > "$OUT/leaderboard.md" || true
"${K[@]}" report --html "$OUT/site" --workspace "$WS" || true
"$PY" - "$OUT/summary.json" "$DEVICE" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
for r in s["candidates"]:
    print(f"{r['node']} PR {r['pr']} {r['status']} vs champion {r['speedup_vs_champion']} vs start {r['speedup_vs_start']} -> {r['decision']}: {r['headline']}")
print("champion:", s["champion"], "device:", s["device"])
ok = s["device"] == sys.argv[2] and any(r["decision"] == "promote" for r in s["candidates"])
print(f"PROMOTED A REAL {s['device'].upper()} SPEEDUP" if ok else "NO PROMOTION")
sys.exit(0 if ok else 1)
PYEOF
check=$?
# the workspace's git objects are small; keep only the records, not the run folders' build dirs
rm -rf "$WS/runs"/*/*/*/build 2>/dev/null
[ $rc -ne 0 ] && exit $rc
exit $check
