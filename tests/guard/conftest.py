"""Helpers for the guard tests: build a Solution from source text and scan it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# `pytest tests/guard` (the venv's script, not `python -m pytest`) does not put the repo root on sys.path.
_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from harness.guard.static import check_solution
from harness.schema import Definition, load_definition, parse_solution

CORPUS = Path(__file__).resolve().parent / "corpus"
WORKLOADS = Path(__file__).resolve().parent / "workloads.jsonl"


@pytest.fixture(scope="session")
def rmsnorm_def(shared: Path) -> Definition:
    return load_definition(shared / "flashinfer-trace" / "definitions" / "rmsnorm" / "rmsnorm_h4096.json")


def make_solution(code: str, language: str = "triton", extra: dict[str, str] | None = None, dps: bool = False,
                  entry: str = "main.py::run"):
    sources = [{"path": entry.split("::")[0], "content": code}]
    sources += [{"path": p, "content": c} for p, c in (extra or {}).items()]
    return parse_solution({
        "name": "unit", "definition": "rmsnorm_h4096", "author": "tests",
        "spec": {"language": language, "target_hardware": ["cpu"], "entry_point": entry,
                 "destination_passing_style": dps},
        "sources": sources,
    })


@pytest.fixture
def scan(rmsnorm_def):
    """scan(code, language='triton', ...) -> set of rule ids the static guard raises."""

    def _scan(code: str, language: str = "triton", **kw) -> set[str]:
        return {f.rule for f in check_solution(make_solution(code, language, **kw), rmsnorm_def)}

    return _scan
