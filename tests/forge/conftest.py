"""Fixtures: the fake GitHub server, and GitHubForge / PyGithub clients pointed at it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Work under both of pytest's import modes: the repository root first (so `bot` is the real package,
# not tests/bot/ seen as a namespace package), then tests/ (for `fakes`) and this folder (helpers).
HERE = Path(__file__).resolve().parent
ROOT = str(HERE.parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
for extra in (str(HERE.parent), str(HERE)):
    if extra not in sys.path:
        sys.path.append(extra)
if getattr(sys.modules.get("bot"), "__file__", "") is None:
    del sys.modules["bot"]

from fakes.github_server import github_app_key, github_server  # noqa: E402,F401  (fixtures)
from forge_helpers import make_forge  # noqa: E402

from bot.forge.github import GitHubForge  # noqa: E402


@pytest.fixture
def forge(github_server) -> GitHubForge:  # noqa: F811  (the fixture, by name)
    return make_forge(github_server)
