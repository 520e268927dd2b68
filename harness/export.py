"""Export run folders to a FlashInfer-Bench TraceSet folder that the official tool loads.

Layout (the official one): ``definitions/<op_type>/<name>.json``, ``solutions/<op_type>/<definition>/
<solution>.json``, ``workloads/<op_type>/<definition>.jsonl`` (workload traces: no solution, no
evaluation) and ``traces/<op_type>/<definition>.jsonl``.

Idempotent: every file is rewritten as the union of what the folder already held and what this export
adds, deduplicated and sorted, so exporting the same runs twice (or a run again after others) gives the
same TraceSet, byte for byte. A trace is identified by (solution, workload, run); a workload by its
uuid; a solution or definition by its name, and a name that already stands for something else in the
folder is refused rather than overwritten (the official loader would keep one of the two).

Which definition: the file the run was measured against (``report.json``'s ``config.inputs``, written
by ``harness.dataset``), else ``--definition``, else kbot's of that name. When the folder already holds
a definition of that name with other text but the same interface (an official definition and kbot's
edition of it), the folder's file is kept: the traces are of the same operator.

What the official loader keeps, and what it cannot carry:

* our REJECTED status is not in the official enum: written as RUNTIME_ERROR with the guard's reason at
  the head of the log;
* our ``generated`` workload inputs (structured generators) are not an official input type: written as
  ``random``; the generator and its parameters stay in each trace's kbot record, not in the workloads
  file (the official workload has no field for them);
* kbot's evaluation record (latency statistics, paired ratios, roofline, kernel time, findings) goes to
  ``evaluation.correctness.extra["kbot"]``, the one free-form mapping the official model keeps, for
  PASSED and INCORRECT_NUMERICAL traces. Other statuses may not carry a correctness block in the
  official model, so their record stays in ``evaluation.kbot``, which the official loader drops; the
  export's result counts those traces (``ExportResult.kbot_dropped_by_loader``) and the CLI says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .paths import definition_dir, definitions_dirs
from .schema import Definition, SchemaError, Solution, Status, Trace, load_definition, load_solution


@dataclass
class ExportResult:
    traces: int = 0  # traces written by this export (after deduplication, new or already there)
    workloads: int = 0
    kbot_dropped_by_loader: int = 0  # traces whose kbot record the official loader does not keep
    generated_inputs: int = 0  # workload inputs written as "random" for a kbot generator
    notes: list[str] = field(default_factory=list)


def official_trace(trace: Trace, run_id: str) -> tuple[dict[str, Any], bool, int]:
    """The official-shaped trace; whether its kbot record survives the official loader; how many
    generated inputs it had."""
    data = trace.to_dict()
    generated = {k: v for k, v in data["workload"]["inputs"].items() if v.get("type") == "generated"}
    for k in generated:
        data["workload"]["inputs"][k] = {"type": "random"}
    ev = data.get("evaluation")
    if ev is None:
        return data, True, len(generated)
    kbot = dict(ev.pop("kbot", None) or {})
    kbot["run_id"] = run_id
    if generated:
        kbot["generated_inputs"] = generated
    if ev["status"] == Status.REJECTED.value:
        kbot["status"] = Status.REJECTED.value
        ev["status"] = Status.RUNTIME_ERROR.value
        ev["log"] = ("[kbot REJECTED by the guard] " + ev.get("log", "")).strip()
        ev.pop("correctness", None)
        ev.pop("performance", None)
    corr = ev.get("correctness")
    if isinstance(corr, dict):
        corr["extra"] = {**(corr.get("extra") or {}), "kbot": kbot}
        return data, True, len(generated)
    ev["kbot"] = kbot
    return data, False, len(generated)


def _run_definition(run: Path, sol: Solution, definition_arg: str | None) -> Definition:
    """The definition the run was measured against (see the module docstring)."""
    if definition_arg and Path(definition_arg).is_file():
        return load_definition(definition_arg)
    try:
        inputs = (json.loads((run / "report.json").read_text()).get("config") or {}).get("inputs") or {}
    except (OSError, ValueError):
        inputs = {}
    recorded = inputs.get("definition_path") if isinstance(inputs, dict) else None
    if isinstance(recorded, str) and Path(recorded).is_file() and not definition_arg:
        d = load_definition(recorded)
        if d.name == sol.definition:
            return d
    if definition_arg and Path(definition_arg).is_file():
        return load_definition(definition_arg)
    folder = definition_dir(definition_arg or sol.definition)
    if folder is None:
        looked = " or ".join(str(d) for d in definitions_dirs())
        raise SchemaError(f"{run}: definition '{definition_arg or sol.definition}' not found in {looked}; pass --definition")
    return load_definition(folder / "definition.json")


def _run_id(run: Path) -> str:
    try:
        rid = json.loads((run / "report.json").read_text()).get("run_id")
    except (OSError, ValueError):
        rid = None
    return str(rid) if rid else run.name


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def _trace_key(t: dict[str, Any]) -> tuple[str, str, str]:
    ev = t.get("evaluation") or {}
    kbot = ev.get("kbot") or ((ev.get("correctness") or {}).get("extra") or {}).get("kbot") or {}
    return (str(t.get("solution")), str(t["workload"]["uuid"]), str(kbot.get("run_id") or ev.get("timestamp")))


def _place_definition(dest: Path, d: Definition, notes: list[str]) -> None:
    from .dataset import interface_difference

    target = dest / "definitions" / d.op_type / f"{d.name}.json"
    for other in sorted((dest / "definitions").rglob("*.json")) if (dest / "definitions").is_dir() else []:
        try:
            name = load_definition(other).name
        except SchemaError:
            continue  # not ours to judge; the official loader will say what it thinks of it
        if other != target and name == d.name:
            raise SchemaError(f"{dest} already holds definition '{d.name}' at {other}, not at {target}: "
                              "the official loader refuses two definitions of one name")
    if target.is_file():
        existing = load_definition(target)
        if existing.to_dict() == d.to_dict():
            return
        why = interface_difference(existing, d)
        if why:
            raise SchemaError(f"{target} is a different definition named '{d.name}' ({why}): refusing to overwrite it")
        notes.append(f"kept {target} (same interface as the one measured, other text)")
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(d.to_json(indent=2) + "\n")


def _place_solution(dest: Path, d: Definition, sol: Solution) -> None:
    empty = [s.path for s in sol.sources if not s.content]
    if empty:
        raise SchemaError(f"solution '{sol.name}': the official format needs non-empty source files ({', '.join(empty)})")
    target = dest / "solutions" / d.op_type / d.name / f"{sol.name}.json"
    for other in sorted((dest / "solutions").rglob(f"{sol.name}.json")) if (dest / "solutions").is_dir() else []:
        try:
            held = load_solution(other)
        except SchemaError:
            continue
        if held.name == sol.name and (other != target or held.content_hash() != sol.content_hash()):
            raise SchemaError(f"{dest} already holds a different solution named '{sol.name}' ({other}): "
                              "solution names are unique in a TraceSet")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(sol.to_json(indent=2) + "\n")


def export_runs(run_dirs: list[Path], dest: Path, definition_arg: str | None = None) -> ExportResult:
    """Export ``run_dirs`` into the TraceSet folder ``dest`` (see the module docstring)."""
    out = ExportResult()
    traces: dict[tuple[str, str], dict[tuple[str, str, str], dict[str, Any]]] = {}  # (op_type, def) -> key -> trace
    workloads: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for run in run_dirs:
        sol = load_solution(run / "solution.json")
        d = _run_definition(run, sol, definition_arg)
        if d.name != sol.definition:
            raise SchemaError(f"{run}: solution '{sol.name}' is for '{sol.definition}', the definition is '{d.name}'")
        _place_definition(dest, d, out.notes)
        _place_solution(dest, d, sol)
        key = (d.op_type, d.name)
        if key not in traces:
            traces[key] = {_trace_key(t): t for t in _jsonl(dest / "traces" / d.op_type / f"{d.name}.jsonl")}
            workloads[key] = {t["workload"]["uuid"]: t for t in _jsonl(dest / "workloads" / d.op_type / f"{d.name}.jsonl")}
        rid = _run_id(run)
        for i, line in enumerate((run / "traces.jsonl").read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                trace = Trace.model_validate_json(line)
            except ValueError as e:
                raise SchemaError(f"{run / 'traces.jsonl'}:{i}: not a valid trace ({str(e)[:200]})") from None
            if trace.definition != d.name:
                raise SchemaError(f"{run / 'traces.jsonl'}:{i}: a trace of '{trace.definition}', not of '{d.name}'")
            data, kept, n_generated = official_trace(trace, rid)
            traces[key][_trace_key(data)] = data
            workloads[key].setdefault(data["workload"]["uuid"], {"definition": d.name, "solution": None,
                                                                 "workload": data["workload"], "evaluation": None})
            out.traces += 1
            out.kbot_dropped_by_loader += 0 if kept else 1
            out.generated_inputs += n_generated
    for (op_type, name), rows in traces.items():
        _write_jsonl(dest / "traces" / op_type / f"{name}.jsonl", [rows[k] for k in sorted(rows)])
        wl = workloads[(op_type, name)]
        _write_jsonl(dest / "workloads" / op_type / f"{name}.jsonl", [wl[u] for u in sorted(wl)])
        out.workloads += len(wl)
    return out

