#!/usr/bin/env bash
# Set everything up, lint, then run the whole test suite (GPU tests are skipped without a GPU).
#   bash scripts/test.sh [extra pytest args]
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
# The lint rules are in pyproject.toml ([tool.ruff]); any finding fails the run before the tests.
.venv/bin/ruff check . || { echo "test.sh: ruff check found problems (fix them, or see [tool.ruff] in pyproject.toml)" >&2; exit 1; }
.venv/bin/python -m pytest -m "not gpu" -q "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests — that is a failure, not a pass" >&2
  exit 1
fi
exit "$rc"
