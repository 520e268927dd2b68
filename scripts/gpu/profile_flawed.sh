#!/usr/bin/env bash
# On the H200 (about 3-5 minutes): measure ceilings, profile four flawed Triton kernels (strided loads,
# tiny grid, matmul without tl.dot, heavy spills) and two good ones (vector add, tl.dot matmul) with ncu
# (--clock-control none, curated metrics), and run the rule engine on each.
# Outputs under $OUT: <case>.csv x6, ceilings.json, feedback.json (8 files).
# Afterwards commit $OUT/*.csv, ceilings.json and feedback.json to tests/fixtures/ncu/ (tests/profile reads them).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/profile_out}"
mkdir -p "$OUT"
# Interpreter: $PYTHON, else the first of .venv/bin/python, python3 whose torch sees a GPU, else any
# that has torch at all (then the script reports that there is no GPU instead of crashing).
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in .venv/bin/python python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
      PY="$cand"; break
    fi
  done
fi
if [ -z "$PY" ]; then
  for cand in .venv/bin/python python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c "import torch" 2>/dev/null; then PY="$cand"; break; fi
  done
fi
[ -n "$PY" ] || { echo "no python with torch found; set PYTHON=" >&2; exit 3; }
export PATH="$PATH:/usr/local/cuda/bin"
"$PY" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.cuda.is_available())"
# The harness needs pyyaml, pydantic and click (the device has no network: install them beforehand).
"$PY" -c "import yaml, pydantic, click" || { echo "missing harness dependencies for $PY" >&2; exit 3; }
exec "$PY" scripts/gpu/profile_flawed.py --out "$OUT" "$@"
