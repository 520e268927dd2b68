"""Helpers shared by the guard tests (imported as a plain module; fixtures live in conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

# `pytest tests/guard` (the venv's script, not `python -m pytest`) does not put the repo root on sys.path.
_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from harness.schema import parse_solution  # noqa: E402

CORPUS = Path(__file__).resolve().parent / "corpus"
WORKLOADS = Path(__file__).resolve().parent / "workloads.jsonl"


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
