"""Repository root on sys.path (as tests/bot does) and the opt-in switch for the slow official references.

The official references loop in Python over tokens, heads or experts and, at full size, need many GB
of memory; tests that run them at full size are skipped unless asked for with ``--official-refs``
(when tests/operators is on the command line) or ``KBOT_OFFICIAL_REFS=1``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def pytest_addoption(parser):
    parser.addoption("--official-refs", action="store_true", default=False, help="also run the slow official references at full size")


@pytest.fixture(scope="session")
def official_refs(request) -> bool:
    try:
        opt = bool(request.config.getoption("--official-refs"))
    except ValueError:  # the option is only registered when this conftest is an initial one
        opt = False
    if not (opt or os.environ.get("KBOT_OFFICIAL_REFS") == "1"):
        pytest.skip("slow official reference at full size: pass --official-refs or set KBOT_OFFICIAL_REFS=1")
    return True
