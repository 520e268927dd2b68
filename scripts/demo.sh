#!/usr/bin/env bash
# Set everything up, then run kbot's main job on its embedded default: a local optimization campaign
# (local git forge under .kbot/, offline agent unless an API key is in the environment, whatever
# device is here — on a CPU, small workloads through the Triton interpreter, labelled as CPU timing).
# Afterwards: .venv/bin/kbot pr list | pr show N | leaderboard rmsnorm_h4096 | report --html .kbot/report
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/kbot optimize rmsnorm_h4096 "$@"
