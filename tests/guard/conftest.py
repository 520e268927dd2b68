"""Fixtures for the guard tests: the official rmsnorm_h4096 definition and a one-call static scan."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from guardkit import make_solution  # noqa: E402

from harness.guard.static import check_solution  # noqa: E402
from harness.schema import Definition, load_definition  # noqa: E402


@pytest.fixture(scope="session")
def rmsnorm_def(shared: Path) -> Definition:
    return load_definition(shared / "flashinfer-trace" / "definitions" / "rmsnorm" / "rmsnorm_h4096.json")


@pytest.fixture
def scan(rmsnorm_def):
    """scan(code, language='triton', ...) -> set of rule ids the static guard raises."""

    def _scan(code: str, language: str = "triton", **kw) -> set[str]:
        return {f.rule for f in check_solution(make_solution(code, language, **kw), rmsnorm_def)}

    return _scan
