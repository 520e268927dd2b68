"""What the workflow tests share: the linters of the dev extra, a workflow file read as GitHub does, and
what GitHub checks of a job that calls a reusable workflow."""

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


# Permission levels in order: a caller's job grants its called workflow at most its own levels.
_LEVELS = {"none": 0, "read": 1, "write": 2}


def call_problems(job: dict, called: dict) -> list[str]:
    """What is wrong with a job that calls a reusable workflow (``job``) given the called file
    (``called``, as ``load`` reads it), as GitHub would judge it or as least privilege wants it:
    every input and secret given is declared there and every required one is given; secrets are
    named one by one (never ``inherit``); the job's permissions are exactly the union of what the
    called jobs ask for (less fails the run, more is privilege no job uses)."""
    problems = []
    call = (called.get("on") or {}).get("workflow_call")
    if call is None:
        return [f"{job.get('uses')} is not a reusable workflow (no workflow_call trigger)"]
    declared, given = call.get("inputs") or {}, job.get("with") or {}
    problems += [f"input {k!r} is not declared" for k in sorted(set(given) - set(declared))]
    problems += [f"required input {k!r} is not given" for k, v in declared.items() if v.get("required") and k not in given]
    if job.get("secrets") == "inherit":
        problems.append("secrets: inherit hands the called workflow every secret")
    else:
        s_declared, s_given = call.get("secrets") or {}, job.get("secrets") or {}
        problems += [f"secret {k!r} is not declared" for k in sorted(set(s_given) - set(s_declared))]
        problems += [f"required secret {k!r} is not given" for k, v in s_declared.items() if v.get("required") and k not in s_given]
    needed: dict[str, str] = {}
    for called_job in called["jobs"].values():
        for scope, level in (called_job.get("permissions") or {}).items():
            if _LEVELS[level] > _LEVELS[needed.get(scope, "none")]:
                needed[scope] = level
    if (job.get("permissions") or {}) != needed:
        problems.append(f"permissions {job.get('permissions')} are not the called jobs' {needed}")
    return problems
