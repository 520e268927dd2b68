"""Shared test fixtures.

``../shared`` (official definitions, workloads, GitHub API descriptions, payload examples) is read in
place, never copied. Tests that need it skip with a clear reason when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("KBOT_SHARED", REPO.parent / "shared"))


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


@pytest.fixture(scope="session")
def shared() -> Path:
    """Path of ../shared; skips the test when it is not there."""
    if not SHARED.is_dir():
        pytest.skip(f"../shared not found at {SHARED} (set KBOT_SHARED to point at it)")
    return SHARED


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


def pytest_collection_modifyitems(config, items):
    if _has_cuda():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU; run on the device with `pytest -m gpu`")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
