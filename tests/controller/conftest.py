from __future__ import annotations

import sys
from pathlib import Path

# Whatever the import mode (prepend puts tests/ on sys.path, importlib puts nothing), these tests need
# the repository root first (tests/bot/ must not shadow the bot package), then tests/ (the shared
# fakes) and this folder (its helper modules).
HERE = Path(__file__).resolve().parent
for _p in (str(HERE), str(HERE.parent), str(HERE.parents[1])):
    if _p in sys.path:
        sys.path.remove(_p)
    sys.path.insert(0, _p)
