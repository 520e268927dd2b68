"""Export run folders to a FlashInfer-Bench TraceSet folder that the official tool loads.

Layout: definitions/<op_type>/<name>.json, solutions/<op_type>/<definition>/<solution>.json,
traces/<op_type>/<definition>.jsonl. Our REJECTED status is not in the official enum: it is written
as RUNTIME_ERROR with the guard's reason at the head of the log, and our full status stays in
evaluation.kbot (extra fields are ignored by the official loader).
"""

from __future__ import annotations

import json
from pathlib import Path

from .schema import SchemaError, Status, Trace, load_definition, load_solution

REPO_ROOT = Path(__file__).resolve().parents[1]


def _official(trace: Trace) -> dict:
    data = trace.to_dict()
    # Our ``generated`` inputs are not an official input type: exported as ``random``, with the
    # generator kept under evaluation.kbot so nothing is lost.
    generated = {k: v for k, v in data["workload"]["inputs"].items() if v.get("type") == "generated"}
    for k in generated:
        data["workload"]["inputs"][k] = {"type": "random"}
    ev = data.get("evaluation")
    if ev is not None and generated:
        ev.setdefault("kbot", {})["generated_inputs"] = generated
    if ev and ev["status"] == Status.REJECTED.value:
        ev["status"] = Status.RUNTIME_ERROR.value
        ev["log"] = ("[kbot REJECTED by the guard] " + ev.get("log", "")).strip()
        ev.pop("correctness", None)
        ev.pop("performance", None)
    return data


def export_runs(run_dirs: list[Path], dest: Path, definition_arg: str | None = None) -> int:
    count = 0
    for run in run_dirs:
        sol = load_solution(run / "solution.json")
        dpath = (
            Path(definition_arg)
            if definition_arg and Path(definition_arg).exists()
            else REPO_ROOT / "definitions" / (definition_arg or sol.definition) / "definition.json"
        )
        if not dpath.exists():
            raise SchemaError(f"definition '{sol.definition}' not found; pass --definition")
        d = load_definition(dpath)
        (dest / "definitions" / d.op_type).mkdir(parents=True, exist_ok=True)
        (dest / "definitions" / d.op_type / f"{d.name}.json").write_text(d.to_json(indent=2))
        sdir = dest / "solutions" / d.op_type / d.name
        sdir.mkdir(parents=True, exist_ok=True)
        (sdir / f"{sol.name}.json").write_text(sol.to_json(indent=2))
        tdir = dest / "traces" / d.op_type
        tdir.mkdir(parents=True, exist_ok=True)
        with (tdir / f"{d.name}.jsonl").open("a") as f:
            for i, line in enumerate((run / "traces.jsonl").read_text().splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    trace = Trace.model_validate_json(line)
                except ValueError as e:
                    raise SchemaError(f"{run / 'traces.jsonl'}:{i}: not a valid trace ({str(e)[:200]})") from None
                f.write(json.dumps(_official(trace)) + "\n")
                count += 1
    return count
