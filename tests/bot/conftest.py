"""Make `import bot` mean the package at the repository root.

Test directories have no __init__.py, so pytest puts tests/ on sys.path; `tests/bot/` would then be
importable as a namespace package called `bot` and shadow the real one when pytest is started as
`.venv/bin/pytest` (which, unlike `python -m pytest`, does not put the working directory first).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
_mod = sys.modules.get("bot")
if _mod is not None and getattr(_mod, "__file__", None) is None:
    del sys.modules["bot"]  # a namespace package made of tests/bot: drop it so the real one loads

from fakes.github_server import github_server  # noqa: E402,F401  (fixture for the end-to-end tests)
