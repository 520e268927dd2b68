from __future__ import annotations

import sys
from pathlib import Path

# `.venv/bin/pytest` puts tests/ (not the repository root) on sys.path, where tests/bot/ would shadow
# the bot package: the root goes first.
ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path or sys.path[0] != ROOT:
    sys.path.insert(0, ROOT)
