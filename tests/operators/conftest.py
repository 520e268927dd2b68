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
HERE = str(Path(__file__).resolve().parent)  # for `import opkit`, whichever test file is run alone
for p in (ROOT, HERE):
    if p not in sys.path:
        sys.path.insert(0, p)


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


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """These tests run many small tensor ops; on a shared 2-core machine extra intra-op threads only
    oversubscribe it (measured: ~20x slower under load)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
