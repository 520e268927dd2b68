"""A bench run's results folder read strictly as data: exactly one report per solution, at one place.

The bench workflow (``.github/workflows/bench.yml``) evaluates each changed solution in a matrix job of
its own and uploads one artifact per job; the report workflow (or ``kbot serve``) downloads every
``kbot-results-*`` artifact into a folder of its own. The layout is fixed, and nothing else is read::

    <results>/<artifact>/<slot>/kbot-bench.json          the job's note of the solution it evaluated
    <results>/<artifact>/<slot>/run/report.json          written by the harness parent
    <results>/<artifact>/<slot>/run/traces.jsonl         written by the harness parent
    <results>/<artifact>/<slot>/run/solution.json        the solution as the harness loaded it
    <results>/<artifact>/<slot>/run/baseline.json        the champion it was paired with (if any)
    <results>/<artifact>/<slot>/run/profile/<uuid>/...   profiler files (kept for people, never read)

``<slot>`` is the solution's repository path with ``/`` spelled ``_`` (``results_slot``), and the path
comes from the bot-written (signed) meta block of the PR, never from the artifact. The artifact was made
by a job that ran candidate code, so it is hostile input: any entry outside that layout (another JSON
file with a ``kbot_report`` key, a symlink, a second copy of the slot) refuses the whole results folder,
and the one report is accepted only when it agrees with its traces (one line per workload, same status,
latency, paired ratio and failed trials, same solution hash), with the solution files beside it, and
with the PR's meta (definition, solution name and hash).
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from bot.names import RESULTS_ARTIFACT_PREFIX
from harness.report import Report
from harness.schema import Solution, Status

MAX_REPORT_BYTES = 8 << 20
MAX_TRACES_BYTES = 32 << 20
MAX_SIDE_FILE_BYTES = 8 << 20      # solution.json / baseline.json / profiler files
MAX_ENTRIES = 2048                 # every file and folder of the results
MAX_RESULTS_BYTES = 256 << 20

BENCH_SIDECAR = "kbot-bench.json"
RUN_FOLDER = "run"
REPORT_FILE = "report.json"
TRACES_FILE = "traces.jsonl"
SOLUTION_FILE = "solution.json"
BASELINE_FILE = "baseline.json"
PROFILE_FOLDER = "profile"
PROFILE_FILES = frozenset({"ncu.csv", "ncu.log", "feedback.json", "feedback.md"})
RUN_FILES = frozenset({REPORT_FILE, TRACES_FILE, SOLUTION_FILE, BASELINE_FILE})

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")
_ARTIFACT = re.compile(rf"^{re.escape(RESULTS_ARTIFACT_PREFIX)}[A-Za-z0-9_.-]{{1,100}}$")
_SOLUTION_PATH = re.compile(r"^kernels/[A-Za-z0-9_.-]+/(?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_.-]+\.json$")


class ResultsError(ValueError):
    """The results directory cannot be used at all (absent, or over the size limits)."""


def results_slot(solution_path: str) -> str:
    """The folder name the bench job gives the evaluation of ``solution_path`` (``/`` becomes ``_``,
    as bench.yml's ``tr '/' '_'``)."""
    return solution_path.replace("/", "_")


def valid_solution_path(path: Any) -> bool:
    return isinstance(path, str) and bool(_SOLUTION_PATH.match(path)) and ".." not in path.split("/")


@dataclass
class BenchResults:
    """The candidate's report (None when there is no usable one) and every problem met on the way."""

    report: Report | None
    problems: list[str] = field(default_factory=list)
    where: str | None = None  # the report's path inside the results folder


def read_bench_results(directory: str | Path, meta: Mapping[str, Any] | None) -> BenchResults:
    """The one report of the PR's solution in a results folder, checked (see the module docstring).

    ``meta`` is the PR's trusted meta block (``bot.forge.trusted_meta.read_meta``); without one there
    is nothing to look for. Raises ResultsError only when the folder is absent or too large.
    """
    root = Path(directory)
    if not root.is_dir() or root.is_symlink():
        raise ResultsError(f"results directory {root} does not exist")
    problems = _layout_problems(root)
    if not isinstance(meta, Mapping):
        return BenchResults(None, problems + ["the PR has no trusted kbot metadata: no report can be matched to it"])
    path = meta.get("solution_path")
    if not valid_solution_path(path):
        return BenchResults(None, problems + ["the PR's metadata names no valid solution_path"])
    if problems:
        # Only the harness parent writes into a run folder, at fixed names: anything else means the
        # artifact was not what the harness wrote, and nothing in it is believed.
        return BenchResults(None, ["the results hold files the harness does not write; none of them was read"] + problems)
    slot = results_slot(path)
    found = sorted(p for p in root.glob(f"*/{slot}") if p.is_dir())
    if not found:
        return BenchResults(None, [f"no results for {path} (expected <artifact>/{slot}/{RUN_FOLDER}/{REPORT_FILE})"])
    if len(found) > 1:
        return BenchResults(None, [f"{len(found)} result folders for {path}: {', '.join(p.parent.name for p in found)}"])
    folder = found[0]
    where = str(folder.relative_to(root) / RUN_FOLDER / REPORT_FILE)
    problems = _check_sidecar(folder, path, meta)
    report, more = _read_report(folder / RUN_FOLDER)
    problems += more
    if report is not None:
        problems += _check_against_meta(report, meta)
        problems += _check_solution_files(folder / RUN_FOLDER, report)
        problems += _check_traces(folder / RUN_FOLDER / TRACES_FILE, report)
    if problems:
        return BenchResults(None, [f"{where}: {p}" for p in problems], where)
    return BenchResults(report, [], where)


# ------------------------------------------------------------------------------------------- layout


def _layout_problems(root: Path) -> list[str]:
    """Every entry of ``root`` that is not part of the bench layout (and the size limits)."""
    problems: list[str] = []
    entries = 0
    total = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        rel_dir = here.relative_to(root)
        for name in sorted(dirnames + filenames):
            entries += 1
            if entries > MAX_ENTRIES:
                raise ResultsError(f"more than {MAX_ENTRIES} entries in the results")
            path = here / name
            rel = rel_dir / name
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                problems.append(f"{rel}: symlink refused")
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            if not is_dir and not stat.S_ISREG(st.st_mode):
                problems.append(f"{rel}: not a regular file")
                continue
            if not is_dir:
                total += st.st_size
                if total > MAX_RESULTS_BYTES:
                    raise ResultsError(f"results larger than {MAX_RESULTS_BYTES} bytes")
            if not _allowed(rel.parts, is_dir):
                problems.append(f"{rel}: not part of the bench results layout")
        # never descend into what was refused
        dirnames[:] = [d for d in dirnames if _allowed((*rel_dir.parts, d), True) and not (here / d).is_symlink()]
    return problems[:50]


def _allowed(parts: tuple[str, ...], is_dir: bool) -> bool:
    if not all(_NAME.match(p) for p in parts):
        return False
    n = len(parts)
    if n == 1:
        return is_dir and bool(_ARTIFACT.match(parts[0]))
    if n == 2:
        return is_dir  # the slot: <artifact>/<slot>
    if n == 3:
        return (is_dir and parts[2] == RUN_FOLDER) or (not is_dir and parts[2] == BENCH_SIDECAR)
    if parts[2] != RUN_FOLDER:
        return False
    if n == 4:
        return (not is_dir and parts[3] in RUN_FILES) or (is_dir and parts[3] == PROFILE_FOLDER)
    if parts[3] != PROFILE_FOLDER:
        return False
    if n == 5:
        return is_dir  # profile/<workload uuid>
    return n == 6 and not is_dir and parts[5] in PROFILE_FILES


# ------------------------------------------------------------------------------------------- checks


def _read_json(path: Path, limit: int) -> tuple[Any, str | None]:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, f"{path.name} is missing"
    if not stat.S_ISREG(st.st_mode):
        return None, f"{path.name} is not a regular file"
    if st.st_size > limit:
        return None, f"{path.name}: {st.st_size} bytes, over the {limit} limit"
    try:
        return json.loads(path.read_bytes()), None
    except (ValueError, RecursionError) as e:
        return None, f"{path.name} is not JSON ({type(e).__name__})"


def _read_report(run: Path) -> tuple[Report | None, list[str]]:
    data, err = _read_json(run / REPORT_FILE, MAX_REPORT_BYTES)
    if err:
        return None, [err]
    if not isinstance(data, dict) or "kbot_report" not in data:
        return None, [f"{REPORT_FILE} is not a kbot report"]
    data.pop("summary", None)  # derived; recomputed from the workloads
    try:
        return Report.model_validate(data), []
    except Exception as e:  # pydantic ValidationError; its first line names the field
        return None, [f"{REPORT_FILE} is not a valid report: {str(e).splitlines()[0]}"]


def _check_sidecar(folder: Path, path: str, meta: Mapping[str, Any]) -> list[str]:
    data, err = _read_json(folder / BENCH_SIDECAR, 4096)
    if err:
        return [err]
    if not isinstance(data, dict) or data.get("solution_path") != path:
        return [f"{BENCH_SIDECAR} does not name {path}"]
    if meta.get("solution") is not None and data.get("solution") != meta.get("solution"):
        return [f"{BENCH_SIDECAR} names another solution than the PR's metadata"]
    return []


def _check_against_meta(report: Report, meta: Mapping[str, Any]) -> list[str]:
    problems = []
    if report.definition != meta.get("definition"):
        problems.append("the report is for another definition than the PR's metadata")
    if report.solution_hash != meta.get("solution_hash"):
        problems.append("the report's solution hash differs from the PR's metadata")
    if meta.get("solution") is not None and report.solution != meta.get("solution"):
        problems.append("the report's solution name differs from the PR's metadata")
    return problems


def _solution_hash(run: Path, name: str) -> tuple[str | None, str | None]:
    data, err = _read_json(run / name, MAX_SIDE_FILE_BYTES)
    if err:
        return None, err
    try:
        return Solution.model_validate(data).content_hash(), None
    except Exception:  # noqa: BLE001 - any validation failure
        return None, f"{name} is not a valid solution"


def _check_solution_files(run: Path, report: Report) -> list[str]:
    problems = []
    got, err = _solution_hash(run, SOLUTION_FILE)
    if err:
        problems.append(err)
    elif got != report.solution_hash:
        problems.append(f"{SOLUTION_FILE} is not the solution the report describes")
    has_baseline = (run / BASELINE_FILE).exists()
    if report.baseline_hash is None:
        if has_baseline:
            problems.append(f"{BASELINE_FILE} is present but the report names no baseline")
    else:
        got, err = _solution_hash(run, BASELINE_FILE)
        if err:
            problems.append(err)
        elif got != report.baseline_hash:
            problems.append(f"{BASELINE_FILE} is not the baseline the report describes")
    return problems


_NONFINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _plain(v: Any) -> Any:
    """A JSON value with the trace file's spelling of non-finite numbers ("NaN") made a float."""
    if isinstance(v, str) and v in _NONFINITE:
        return _NONFINITE[v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _same(a: Any, b: Any) -> bool:
    """JSON values equal, NaN equal to NaN."""
    return json.dumps(_plain(a), sort_keys=True, allow_nan=True) == json.dumps(_plain(b), sort_keys=True, allow_nan=True)


def _check_traces(path: Path, report: Report) -> list[str]:
    """One trace line per workload of the report, agreeing on everything the review and the promotion
    rules read: status, failed trials, latency, the paired ratio, the speedup over the reference."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return [f"{TRACES_FILE} is missing"]
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_TRACES_BYTES:
        return [f"{TRACES_FILE} is not a regular file under {MAX_TRACES_BYTES} bytes"]
    by_uuid: dict[str, dict[str, Any]] = {}
    for i, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            t = json.loads(line)
        except (ValueError, RecursionError):
            return [f"{TRACES_FILE} line {i} is not JSON"]
        uuid = ((t.get("workload") or {}).get("uuid") if isinstance(t, dict) and isinstance(t.get("workload"), dict) else None)
        if not isinstance(uuid, str):
            return [f"{TRACES_FILE} line {i} names no workload"]
        if uuid in by_uuid:
            return [f"{TRACES_FILE} has two lines for workload {uuid[:40]}"]
        by_uuid[uuid] = t
    want = [w.uuid for w in report.workloads]
    if len(set(want)) != len(want):
        return ["the report lists a workload twice"]
    if set(by_uuid) != set(want):
        return [f"{TRACES_FILE} has {len(by_uuid)} workload(s), the report {len(want)}, and they differ"]
    for w in report.workloads:
        t = by_uuid[w.uuid]
        ev = t.get("evaluation") if isinstance(t.get("evaluation"), dict) else {}
        kb = ev.get("kbot") if isinstance(ev.get("kbot"), dict) else {}
        mine = w.model_dump(mode="json")
        checks = [
            ("definition", t.get("definition") == report.definition),
            ("solution", t.get("solution") == report.solution),
            ("solution hash", kb.get("solution_hash") == report.solution_hash),
            ("status", ev.get("status") == w.status.value and kb.get("status") == w.status.value),
            ("failed trials", _same((kb.get("correctness") or {}).get("failed_trials") if isinstance(kb.get("correctness"), dict) else None,
                                    (mine.get("correctness") or {}).get("failed_trials"))),
            ("latency", _same(kb.get("latency_ms"), mine.get("latency_ms"))),
            ("paired ratio", _same(kb.get("speedup_vs_baseline"), mine.get("speedup_vs_baseline"))),
            ("speedup over the reference", _same(kb.get("speedup_vs_reference"), mine.get("speedup_vs_reference"))),
        ]
        if w.status is Status.PASSED:
            perf = ev.get("performance") if isinstance(ev.get("performance"), dict) else {}
            checks.append(("trace latency", w.latency_ms is not None and _same(perf.get("latency_ms"), w.latency_ms.mean)))
        bad = [name for name, ok in checks if not ok]
        if bad:
            return [f"the report and {TRACES_FILE} disagree for workload {w.uuid[:40]} ({', '.join(bad)})"]
    return []


LOCAL_ARTIFACT = f"{RESULTS_ARTIFACT_PREFIX}local"


def write_bench_results(dest: str | Path, run_dir: str | Path, solution_path: str, solution: str,
                        *, artifact: str = LOCAL_ARTIFACT) -> Path:
    """Lay out one harness run folder the way a bench artifact holds it (for a run made here: the local
    loop, tests): only the files the harness parent writes are copied. Returns ``dest``."""
    if not valid_solution_path(solution_path) or not _ARTIFACT.match(artifact):
        raise ValueError(f"not a solution path / artifact name: {solution_path!r} {artifact!r}")
    slot = Path(dest) / artifact / results_slot(solution_path)
    (slot / RUN_FOLDER).mkdir(parents=True, exist_ok=True)
    (slot / BENCH_SIDECAR).write_text(json.dumps({"solution": solution, "solution_path": solution_path}) + "\n")
    for name in sorted(RUN_FILES):
        src = Path(run_dir) / name
        if src.is_file() and not src.is_symlink():
            (slot / RUN_FOLDER / name).write_bytes(src.read_bytes())
    return Path(dest)
