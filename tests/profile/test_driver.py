"""The ncu driver program on CPU: builds a solution with the harness builder and calls it on a workload."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.profile.pipeline import profile_workload
from harness.schema import Workload, load_definition, parse_solution

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures" / "ncu" / "definitions"

SOLUTION = {
    "name": "torch_add", "definition": "kbot_vector_add_f32", "author": "test",
    "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run",
             "destination_passing_style": True},
    "sources": [{"path": "main.py", "content": "def run(x, y, out):\n    out.copy_(x + y)\n"}],
}


def _job(tmp_path: Path, solution: dict) -> Path:
    d = load_definition(FIX / "kbot_vector_add_f32.json")
    job = {"solution": solution, "definition": d.to_dict(), "workload": {"uuid": "w", "axes": {"N": 4096}, "inputs": {}},
           "definition_path": None, "workdir": str(tmp_path / "wd"), "seed": 1, "warmup": 1, "calls": 3,
           "energy": False, "result": str(tmp_path / "result.json")}
    p = tmp_path / "job.json"
    p.write_text(json.dumps(job))
    return p


def _run(job: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.profile.driver", str(job)], capture_output=True, text=True,
                          cwd=str(REPO), timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_driver_runs_a_solution(tmp_path):
    p = _run(_job(tmp_path, SOLUTION))
    res = json.loads((tmp_path / "result.json").read_text())
    assert p.returncode == 0 and res["ok"], (p.stderr, res)
    assert res["calls"] == 3 and res["wall_ms_per_call"] > 0 and res["device"] == "cpu"


def test_driver_reports_a_build_failure(tmp_path):
    bad = json.loads(json.dumps(SOLUTION))
    bad["sources"][0]["content"] = "import no_such_module_here\n\ndef run(x, y, out):\n    pass\n"
    p = _run(_job(tmp_path, bad))
    res = json.loads((tmp_path / "result.json").read_text())
    assert p.returncode == 1 and not res["ok"] and "build failed" in res["error"]


def test_profile_workload_without_ncu_reports_missing(tmp_path, monkeypatch):
    import harness.profile.pipeline as pl

    monkeypatch.setattr(pl, "find_ncu", lambda: None)
    d = load_definition(FIX / "kbot_vector_add_f32.json")
    collected, files = profile_workload(parse_solution(SOLUTION), d, Workload(uuid="w", axes={"N": 4096}, inputs={}),
                                        tmp_path, energy=False)
    by = {c.source: c for c in collected}
    assert not by["ncu"].ok and "not found" in by["ncu"].missing
    assert not by["sass"].ok  # a python solution compiles no device code
