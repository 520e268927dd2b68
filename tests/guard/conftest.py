"""Fixtures for the guard tests: the official rmsnorm_h4096 definition and a one-call static scan."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from guardkit import make_solution  # noqa: E402

from harness.guard.static import check_solution  # noqa: E402
from harness.schema import Definition, load_definition  # noqa: E402


REPO = Path(__file__).resolve().parents[2]
OUR_DEFINITION = REPO / "definitions" / "rmsnorm_h4096" / "definition.json"


@pytest.fixture(scope="session")
def rmsnorm_def_path() -> Path:
    """The official rmsnorm_h4096 JSON from ../shared; our copy in definitions/ (same names, axes and
    shapes, checked by test_our_definition_matches_official) where ../shared is absent (the device)."""
    shared = Path(os.environ.get("KBOT_SHARED", REPO.parent / "shared"))  # as tests/conftest.py
    official = shared / "flashinfer-trace" / "definitions" / "rmsnorm" / "rmsnorm_h4096.json"
    if official.exists():
        return official
    if OUR_DEFINITION.exists():
        return OUR_DEFINITION
    pytest.skip(f"neither {official} nor {OUR_DEFINITION} exists")


@pytest.fixture(scope="session")
def rmsnorm_def(rmsnorm_def_path: Path) -> Definition:
    return load_definition(rmsnorm_def_path)


@pytest.fixture
def scan(rmsnorm_def):
    """scan(code, language='triton', ...) -> set of rule ids the static guard raises."""

    def _scan(code: str, language: str = "triton", **kw) -> set[str]:
        return {f.rule for f in check_solution(make_solution(code, language, **kw), rmsnorm_def)}

    return _scan
