#!/usr/bin/env bash
# Set everything up, then run kbot's main job on its embedded default: on whatever device is here,
# evaluate the shipped Triton rmsnorm kernel (CPU: small workloads through the Triton interpreter).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -e /dev/nvidiactl ]; then WL=(); else WL=(--workloads definitions/rmsnorm_h4096/workloads.small.jsonl); fi
exec .venv/bin/kbot eval kernels/rmsnorm_h4096/triton_rows/solution.json --definition rmsnorm_h4096 "${WL[@]}" --out .kbot/demo-eval "$@"
