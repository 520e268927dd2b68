#!/usr/bin/env bash
# On the H200 (about 5-8 minutes): the guard's GPU-only checks and its corpus on a real GPU.
#   - tests/guard -m gpu: CUPTI launch counting (own vs library kernels), the side-stream runtime check,
#     the Triton launch counter on the compiled path, and the whole hostile corpus through
#     `kbot eval --device cuda` (static guard on) and through the runner with the static guard off
#     (runtime layer alone: patched synchronize/timers, lazy subclasses, views, threads, wild stores ->
#     illegal address and a fresh worker, uninitialized outputs).
# Outputs under $OUT: guard_gpu.xml (JUnit), guard_gpu.log (pytest -rA output). Commit the log's summary
# to docs/guard.md ("GPU record") with the date and this command.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-$PWD/guard_gpu_out}"
mkdir -p "$OUT"
[ -f scripts/gpu/setup_device.sh ] && [ -d .whl ] && source scripts/gpu/setup_device.sh
PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] && .venv/bin/python -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null && PY=.venv/bin/python
"$PY" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.cuda.is_available())"
"$PY" -c "import yaml, pydantic, click" || { echo "missing harness dependencies for $PY" >&2; exit 3; }
"$PY" -m pytest tests/guard -m gpu -rA -q -p no:cacheprovider --junitxml="$OUT/guard_gpu.xml" 2>&1 | tee "$OUT/guard_gpu.log"
exit "${PIPESTATUS[0]}"
