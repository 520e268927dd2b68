"""Fixtures: the fake GitHub server, and GitHubForge / PyGithub clients pointed at it."""

from __future__ import annotations

import sys
from pathlib import Path

import github
import pytest

# `.venv/bin/pytest` does not put the repository root on sys.path, and tests/bot/ would otherwise be
# importable as a namespace package named `bot` (see tests/bot/conftest.py).
ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
if getattr(sys.modules.get("bot"), "__file__", "") is None:
    del sys.modules["bot"]

from fakes.github_server import github_app_key, github_server  # noqa: E402,F401  (fixtures)
from forge_helpers import make_client, make_forge  # noqa: E402

from bot.forge.github import GitHubForge  # noqa: E402


@pytest.fixture
def forge(github_server) -> GitHubForge:
    return make_forge(github_server)
