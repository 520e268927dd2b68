#!/usr/bin/env bash
# Set up everything kbot needs in .venv, on a fresh machine. Safe to re-run (it only adds what is missing).
#   bash scripts/setup.sh            # harness + bot + dev tools
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)
"${PIP[@]}" install --upgrade pip >/dev/null
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  if [ -e /dev/nvidiactl ]; then
    "${PIP[@]}" install torch            # a GPU machine: the CUDA build
  else
    # No GPU: the CPU build. A plain `torch` would pull a multi-GB CUDA build.
    "${PIP[@]}" install torch==2.13.0
  fi
fi
"${PIP[@]}" install -e ".[bot,dev]"
# The official FlashInfer-Bench loader, used by tests to prove our exports load in the official tool.
# --no-deps: only its pydantic data model is used; its GPU dependencies are not needed to load files.
.venv/bin/python -c "import flashinfer_bench" 2>/dev/null || "${PIP[@]}" install --no-deps flashinfer-bench==0.1.2 docstring-parser
# Headless Chromium for the static-report browser test (Debian's package; root only, skipped otherwise).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "setup: could not install chromium; the browser test will skip" >&2
fi
echo "setup: ready (.venv/bin/kbot)"
