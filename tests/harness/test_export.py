"""``kbot export``: a TraceSet the official ``flashinfer_bench`` loads, with its workloads, the same when
exported twice, kbot's fields where the official loader keeps extra data, collisions refused."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.dataset import resolve
from harness.export import export_runs
from harness.runner import RunConfig, evaluate
from harness.schema import SchemaError, Trace, load_definition, load_workloads, parse_solution

REPO = Path(__file__).resolve().parents[2]
DEF = REPO / "definitions" / "rmsnorm_h4096" / "definition.json"
SMALL = REPO / "definitions" / "rmsnorm_h4096" / "workloads.small.jsonl"
FAST = {"budget_s": 0.05, "warmup": 1, "min_iters": 5, "recheck": 2}
GOOD = '''import torch

def run(hidden_states, weight):
    x = hidden_states.float()
    inv = torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-5)
    return (x * inv * weight.float()).to(hidden_states.dtype)
'''
BAD = "import os\n\ndef run(hidden_states, weight):\n    os.system('true')\n"


def sol(code: str, name: str):
    return parse_solution({"name": name, "definition": "rmsnorm_h4096", "author": "t",
                           "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run",
                                    "destination_passing_style": False},
                           "sources": [{"path": "main.py", "content": code}]})


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A passing run and a rejected one on two of kbot's small rmsnorm workloads."""
    root = tmp_path_factory.mktemp("runs")
    d = load_definition(DEF)
    wl = load_workloads(SMALL, d)[:2]
    cfg = RunConfig(device="cpu", timing=FAST, timeout_s=60, trials=1, provenance=resolve("rmsnorm_h4096").provenance(2))
    evaluate(d, sol(GOOD, "good"), wl, root / "good", cfg, definition_path=DEF)
    evaluate(d, sol(BAD, "bad"), wl, root / "bad", cfg, definition_path=DEF)
    return root, wl


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_export_loads_in_the_official_tool_with_its_workloads_and_is_idempotent(runs, tmp_path):
    fib = pytest.importorskip("flashinfer_bench.data", reason="the official loader (scripts/setup.sh installs it)")
    root, wl = runs
    dest = tmp_path / "ts"
    first = export_runs([root / "good", root / "bad"], dest)
    files = digest(dest)
    ts1 = fib.TraceSet.from_path(str(dest)).to_dict()
    second = export_runs([root / "good", root / "bad"], dest)  # again: nothing appended, nothing changed
    assert digest(dest) == files
    assert fib.TraceSet.from_path(str(dest)).to_dict() == ts1
    assert first.traces == second.traces == 4 and first.workloads == 2
    # Exporting one run again on its own changes nothing either (a merge, not an overwrite).
    export_runs([root / "bad"], dest)
    assert digest(dest) == files

    ts = fib.TraceSet.from_path(str(dest))
    assert set(ts.definitions) == {"rmsnorm_h4096"}
    assert sorted(t.workload.uuid for t in ts.workloads["rmsnorm_h4096"]) == sorted(w.uuid for w in wl)
    assert all(t.is_workload_trace() for t in ts.workloads["rmsnorm_h4096"])
    assert {s.name for s in ts.solutions["rmsnorm_h4096"]} == {"good", "bad"}
    by_solution: dict[str, list] = {}
    for t in ts.traces["rmsnorm_h4096"]:
        by_solution.setdefault(t.solution, []).append(t)
    for t in by_solution["good"]:
        assert t.evaluation.status.value == "PASSED"
        kbot = t.evaluation.correctness.extra["kbot"]  # kept by the official loader
        assert kbot["latency_ms"]["median"] > 0 and kbot["solution_hash"] and kbot["run_id"]
        assert kbot["correctness"]["trials"] == 1
    for t in by_solution["bad"]:
        assert t.evaluation.status.value == "RUNTIME_ERROR" and t.evaluation.log.startswith("[kbot REJECTED by the guard]")
    assert first.kbot_dropped_by_loader == 2  # the rejected traces: no correctness record in the official model
    raw = [json.loads(x) for x in (dest / "traces" / "rmsnorm" / "rmsnorm_h4096.jsonl").read_text().splitlines()]
    assert all(r["evaluation"]["kbot"]["status"] == "REJECTED" for r in raw if r["solution"] == "bad")


def test_two_runs_of_one_solution_are_two_traces_per_workload(runs, tmp_path):
    root, wl = runs
    d = load_definition(DEF)
    again = tmp_path / "again"
    evaluate(d, sol(GOOD, "good"), wl, again, RunConfig(device="cpu", timing=FAST, timeout_s=60, trials=1), definition_path=DEF)
    res = export_runs([root / "good", again, root / "good"], tmp_path / "ts")
    lines = (tmp_path / "ts" / "traces" / "rmsnorm" / "rmsnorm_h4096.jsonl").read_text().splitlines()
    assert len(lines) == 4 and res.workloads == 2


def test_the_definition_measured_is_the_one_exported(runs, tmp_path, shared):
    """A run against the official definition exports the official file; into a folder that already holds
    the official definition, kbot's edition (same interface, other text) leaves it as it is."""
    root, wl = runs
    official = resolve("rmsnorm_h4096", dataset=shared / "flashinfer-trace")
    d = official.definition
    run = tmp_path / "official-run"
    evaluate(d, sol(GOOD, "good"), wl, run, RunConfig(device="cpu", timing=FAST, timeout_s=60, trials=1,
                                                      provenance=official.provenance(2)), definition_path=official.path)
    dest = tmp_path / "ts"
    export_runs([run], dest)
    written = load_definition(dest / "definitions" / "rmsnorm" / "rmsnorm_h4096.json")
    assert written.to_dict() == d.to_dict() and written.description != load_definition(DEF).description
    res = export_runs([root / "good"], dest)  # measured against kbot's edition
    assert load_definition(dest / "definitions" / "rmsnorm" / "rmsnorm_h4096.json").to_dict() == d.to_dict()
    assert any("same interface" in n for n in res.notes)


def test_collisions_are_refused(runs, tmp_path):
    root, _ = runs
    dest = tmp_path / "ts"
    other = json.loads(DEF.read_text())
    other["axes"]["hidden_size"]["value"] = 2048
    (dest / "definitions" / "rmsnorm").mkdir(parents=True)
    (dest / "definitions" / "rmsnorm" / "rmsnorm_h4096.json").write_text(json.dumps(other))
    with pytest.raises(SchemaError, match="different definition named 'rmsnorm_h4096'"):
        export_runs([root / "good"], dest)
    dest2 = tmp_path / "ts2"
    export_runs([root / "good"], dest2)
    changed = json.loads((root / "good" / "solution.json").read_text())
    changed["sources"][0]["content"] += "\n# another kernel under the same name\n"
    (dest2 / "solutions" / "rmsnorm" / "rmsnorm_h4096" / "good.json").write_text(json.dumps(changed))
    with pytest.raises(SchemaError, match="different solution named 'good'"):
        export_runs([root / "good"], dest2)


def test_generated_inputs_are_written_as_random_and_kept_in_the_kbot_record():
    from harness.export import official_trace

    t = Trace.model_validate({
        "definition": "x", "solution": "s",
        "workload": {"uuid": "u", "axes": {}, "inputs": {"idx": {"type": "generated", "generator": "randint", "params": {"high": 4}}}},
        "evaluation": {"status": "TIMEOUT", "environment": {"hardware": "cpu"}, "timestamp": "t", "kbot": {"message": "slow"}}})
    data, kept, n = official_trace(t, "r1")
    assert data["workload"]["inputs"]["idx"] == {"type": "random"} and n == 1 and not kept
    assert data["evaluation"]["kbot"]["generated_inputs"]["idx"]["generator"] == "randint"


def test_cli_says_what_the_official_loader_cannot_carry(runs, tmp_path):
    root, _ = runs
    p = subprocess.run([sys.executable, "-m", "harness.cli", "export", str(root / "good"), str(root / "bad"), "--to", str(tmp_path / "ts")],
                       cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "exported 4 traces (2 workloads in the set)" in p.stdout
    assert "2 traces have a status the official model gives no correctness record" in p.stdout
