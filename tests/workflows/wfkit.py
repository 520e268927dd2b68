"""What the workflow tests share: the linters of the dev extra and a workflow file read as GitHub does."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    """The path of a linter installed beside this Python (actionlint, zizmor), or a skip that says how."""
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed in {BIN} (pip install -e '.[dev]')")
    return str(path)


def load(path: Path) -> dict:
    """A workflow file as a dict, with the key ``on`` as GitHub reads it (YAML 1.1 reads it as True)."""
    data = yaml.safe_load(path.read_text())
    data["on"] = data.pop(True, data.get("on"))
    return data
