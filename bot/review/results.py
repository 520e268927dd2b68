"""A bench run's results folder read strictly as data (the report workflow's artifact, or what
``kbot serve`` downloaded): bounded, regular JSON files only, every report validated; and the choice of
the candidate's and the champion's report among them."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from harness.report import Report

MAX_REPORT_BYTES = 8 << 20
MAX_RESULT_FILES = 64
MAX_RESULTS_BYTES = 64 << 20


class ResultsError(ValueError):
    """The results directory cannot be used (limits exceeded, nothing valid in it)."""


def load_results(directory: str | Path) -> tuple[list[Report], list[str]]:
    """Validated Reports from an artifact directory, read strictly as data, and the problems met.

    Only regular ``*.json`` files are read (symlinks are refused: an artifact could point anywhere on
    the trusted runner); sizes and counts are bounded; every file must validate as a ``Report``.
    """
    root = Path(directory)
    if not root.is_dir():
        raise ResultsError(f"results directory {root} does not exist")
    reports: list[Report] = []
    problems: list[str] = []
    total = 0
    files = 0
    for dirpath, _dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(root)
            if path.is_symlink():
                problems.append(f"{rel}: symlink refused")
                continue
            if not name.endswith(".json") or not path.is_file():
                continue
            files += 1
            if files > MAX_RESULT_FILES:
                raise ResultsError(f"more than {MAX_RESULT_FILES} JSON files in the results")
            size = path.stat().st_size
            total += size
            if size > MAX_REPORT_BYTES:
                problems.append(f"{rel}: {size} bytes, over the {MAX_REPORT_BYTES} limit")
                continue
            if total > MAX_RESULTS_BYTES:
                raise ResultsError(f"results larger than {MAX_RESULTS_BYTES} bytes")
            try:
                data = json.loads(path.read_bytes())
            except (ValueError, RecursionError) as e:
                problems.append(f"{rel}: not JSON ({type(e).__name__})")
                continue
            if not isinstance(data, dict) or "kbot_report" not in data:
                continue  # other JSON (traces, solutions) is not a report
            data.pop("summary", None)
            try:
                reports.append(Report.model_validate(data))
            except Exception as e:  # pydantic ValidationError; message lists the fields
                problems.append(f"{rel}: not a valid report: {str(e).splitlines()[0]}")
    return reports, problems


BENCH_SIDECAR = "kbot-bench.json"
_SOLUTION_PATH = re.compile(r"^kernels/[A-Za-z0-9_.-]+/(?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_.-]+\.json$")


def bench_solution_path(directory: str | Path, solution: str) -> str | None:
    """The repository path of ``solution`` as the bench job recorded it (``kbot-bench.json``), validated.

    Informational only (the artifact is written by a job that ran candidate code): promotion records
    the ``solution_path`` of the bot-written meta block instead.
    """
    for path in sorted(Path(directory).rglob(BENCH_SIDECAR)):
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 4096:
            continue
        try:
            data = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError, RecursionError):
            continue
        if not isinstance(data, dict):
            continue
        p = data.get("solution_path")
        if data.get("solution") == solution and isinstance(p, str) and _SOLUTION_PATH.match(p) and ".." not in p:
            return p
    return None


def pick_reports(reports: list[Report], meta: dict[str, Any] | None) -> tuple[Report | None, Report | None]:
    """(candidate report, champion report) among the results of one bench run."""
    candidate = None
    want_hash = meta.get("solution_hash") if meta else None
    want_name = meta.get("solution") if meta else None
    for r in reports:
        if (want_hash and r.solution_hash == want_hash) or (want_name and r.solution == want_name):
            candidate = r
    if candidate is None:
        with_baseline = [r for r in reports if r.baseline_hash]
        pool = with_baseline or reports
        candidate = pool[0] if len(pool) == 1 else None
    champion = None
    if candidate is not None and candidate.baseline_hash:
        champion = next((r for r in reports if r is not candidate and r.solution_hash == candidate.baseline_hash), None)
    return candidate, champion


