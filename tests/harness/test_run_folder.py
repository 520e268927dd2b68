"""The run folder (``--out``) and bad input: one place the harness parent writes, nothing else in it, no
symlink ever followed; inputs that do not load end with exit 2 and a clear message, not a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.runner import RunConfig, evaluate
from harness.schema import SchemaError, Status, load_definition, load_workloads, parse_solution

REPO = Path(__file__).resolve().parents[2]
DEF = REPO / "definitions" / "rmsnorm_h4096" / "definition.json"
SMALL = REPO / "definitions" / "rmsnorm_h4096" / "workloads.small.jsonl"
FAST = {"budget_s": 0.05, "warmup": 1, "min_iters": 5, "recheck": 2}
GOOD = '''import torch

def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
'''
# Refused by the static guard: no worker starts, the parent still writes every file of the run folder.
REFUSED = "import os\n\ndef run(hidden_states, weight):\n    os.system('true')\n    return hidden_states\n"


def _sol(code: str, name: str = "s"):
    return parse_solution({"name": name, "definition": "rmsnorm_h4096", "author": "t",
                           "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run", "destination_passing_style": False},
                           "sources": [{"path": "main.py", "content": code}]})


def _write_solution(path: Path, code: str = GOOD) -> Path:
    path.write_text(_sol(code).to_json(indent=2))
    return path


def _eval(args: list[str]):
    return CliRunner().invoke(cli, ["eval", *args])


@pytest.fixture(scope="module")
def definition():
    return load_definition(DEF)


@pytest.fixture(scope="module")
def workloads(definition):
    return load_workloads(SMALL, definition)[:2]


def test_an_honest_run_folder_holds_only_the_parents_files(definition, workloads, tmp_path):
    out = tmp_path / "out"
    cfg = RunConfig(device="cpu", timing=FAST, timeout_s=60, trials=1)
    rep = evaluate(definition, _sol(GOOD), workloads, out, cfg, definition_path=DEF)
    assert rep.all_passed, [w.message for w in rep.workloads]
    assert sorted(os.listdir(out)) == ["report.json", "solution.json", "traces.jsonl"]
    assert all(p.is_file() and not p.is_symlink() for p in out.iterdir())


def test_symlinks_already_in_the_run_folder_are_replaced_never_followed(definition, workloads, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victims = {}
    for name in ("report.json", "traces.jsonl", "solution.json", "baseline.json"):
        v = tmp_path / f"victim-{name}"
        v.write_text("do not touch\n")
        victims[name] = v
        (out / name).symlink_to(v)
    (out / "build").symlink_to(tmp_path)  # the old build folder's name: never used any more
    cfg = RunConfig(device="cpu", timing=FAST, timeout_s=60, trials=1)
    rep = evaluate(definition, _sol(REFUSED), workloads, out, cfg, definition_path=DEF, baseline=_sol(GOOD, "b"))
    assert {w.status for w in rep.workloads} == {Status.REJECTED}
    for name, v in victims.items():
        assert v.read_text() == "do not touch\n", name
        assert (out / name).is_file() and not (out / name).is_symlink(), name
    assert json.loads((out / "report.json").read_text())["solution"] == "s"
    assert len((out / "traces.jsonl").read_text().splitlines()) == len(workloads)


def test_resume_refuses_a_symlinked_trace_file(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.jsonl"
    victim.write_text("")
    (out / "traces.jsonl").symlink_to(victim)
    sol = _write_solution(tmp_path / "s.json", REFUSED)
    r = _eval([str(sol), "-d", str(DEF), "-w", str(SMALL), "--device", "cpu", "--out", str(out), "--resume"])
    assert r.exit_code == 2, r.output
    assert "symlink" in r.output and "Traceback" not in r.output
    assert victim.read_text() == ""


def test_a_run_folder_that_is_a_file_is_bad_input(tmp_path):
    f = tmp_path / "out"
    f.write_text("x")
    sol = _write_solution(tmp_path / "s.json", REFUSED)
    r = _eval([str(sol), "-d", str(DEF), "-w", str(SMALL), "--device", "cpu", "--out", str(f)])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output


def test_a_solution_that_is_not_utf8_is_bad_input(tmp_path):
    bad = tmp_path / "s.json"
    bad.write_bytes(b'{"name": "\xff\xfe", "definition": "rmsnorm_h4096"}')
    r = _eval([str(bad), "-d", str(DEF), "-w", str(SMALL), "--device", "cpu", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2, r.output
    assert "UTF-8" in r.output and "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_a_definition_that_is_a_directory_is_bad_input(tmp_path):
    sol = _write_solution(tmp_path / "s.json")
    for d in (DEF.parent, tmp_path):
        r = _eval([str(sol), "-d", str(d), "-w", str(SMALL), "--device", "cpu", "--out", str(tmp_path / "o")])
        assert r.exit_code == 2, r.output
        assert "directory" in r.output and "Traceback" not in r.output


def test_a_non_utf8_workloads_file_is_bad_input(tmp_path):
    w = tmp_path / "w.jsonl"
    w.write_bytes(b"\xff\n")
    sol = _write_solution(tmp_path / "s.json")
    r = _eval([str(sol), "-d", str(DEF), "-w", str(w), "--device", "cpu", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "UTF-8" in r.output, r.output


def test_duplicate_workload_uuids_are_refused(definition, tmp_path):
    lines = SMALL.read_text().splitlines()
    w = tmp_path / "w.jsonl"
    w.write_text("\n".join([lines[0], lines[1], lines[0]]) + "\n")
    with pytest.raises(SchemaError, match="duplicate"):
        load_workloads(w, definition)
    sol = _write_solution(tmp_path / "s.json")
    r = _eval([str(sol), "-d", str(DEF), "-w", str(w), "--device", "cpu", "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "duplicate" in r.output, r.output
    assert not (tmp_path / "o").exists()


def test_the_cli_itself_gives_no_traceback_for_a_binary_solution(tmp_path):
    bad = tmp_path / "s.json"
    bad.write_bytes(os.urandom(64) + b"\xff")
    p = subprocess.run([sys.executable, "-m", "harness.cli", "eval", str(bad), "-d", str(DEF), "-w", str(SMALL), "--device", "cpu",
                        "--out", str(tmp_path / "o")], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and "error:" in p.stderr
