"""Import paths for the bot tests, under either of pytest's import modes.

The repository root goes first, so `bot` is the real package and not tests/bot/ seen as a namespace
package (which happens when pytest puts tests/ on sys.path, e.g. `.venv/bin/pytest` in prepend mode);
then tests/ (the shared fakes) and this folder (helper modules: memforge, reportkit, eventkit, e2ekit).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = str(HERE.parents[1])
if ROOT in sys.path:
    sys.path.remove(ROOT)
sys.path.insert(0, ROOT)
for extra in (str(HERE.parent), str(HERE)):
    if extra not in sys.path:
        sys.path.append(extra)
if getattr(sys.modules.get("bot"), "__file__", "") is None:
    del sys.modules["bot"]  # a namespace package made of tests/bot: drop it so the real one loads

import pytest  # noqa: E402
from fakes.github_server import github_app_key, github_server  # noqa: E402,F401  (fixtures for the end-to-end tests)

from bot.forge.trusted_meta import META_KEY_ENV  # noqa: E402

TEST_META_KEY = "bot-tests-meta-signing-key-0123456789"


@pytest.fixture(autouse=True)
def _deployment_meta_key(monkeypatch):
    """Every bot test runs as a deployment with the meta signing key (KBOT_META_KEY), which promotion
    requires; the tests of its absence remove it."""
    monkeypatch.setenv(META_KEY_ENV, TEST_META_KEY)
