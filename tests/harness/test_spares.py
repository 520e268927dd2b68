"""Spare worker processes (kbot eval-many): started early, each used for one job, never reused."""

import json
import subprocess
import sys
from pathlib import Path

from harness.runner import Spares, worker_env
from harness.schema import Status, parse_solution

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "definitions" / "rmsnorm_h4096" / "workloads.small.jsonl"

GOOD = '''import torch

def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()).to(hidden_states.dtype)
'''
WRONG = '''import torch

def run(hidden_states, weight):
    return hidden_states * 2
'''


def test_a_spare_serves_one_job_for_its_own_environment_only():
    env = worker_env("cpu")
    spares = Spares()
    try:
        spares.start(env, 2)
        assert len(spares) == 2
        assert spares.take({**env, "OTHER": "1"}) is None  # another environment: not this spare
        first = spares.take(env)
        assert first is not None and first.proc.poll() is None and len(spares) == 1
        first.discard()
        assert first.proc.poll() is not None
        # A spare that died while idle is dropped, not handed out.
        _, dead = spares._idle[0]
        dead.proc.kill()
        dead.proc.wait()
        assert spares.take(env) is None and len(spares) == 0
    finally:
        spares.close()


def test_close_kills_the_idle_spares():
    spares = Spares()
    spares.start(worker_env("cpu"), 1)
    procs = [sp.proc for _, sp in spares._idle]
    spares.close()
    assert len(spares) == 0 and all(p.poll() is not None for p in procs)


def _write(tmp_path, name, code):
    p = tmp_path / f"{name}.json"
    p.write_text(parse_solution({"name": name, "definition": "rmsnorm_h4096", "author": "t",
                                 "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run", "destination_passing_style": False},
                                 "sources": [{"path": "main.py", "content": code}]}).to_json())
    return p


def test_eval_many_evaluates_each_solution_in_its_own_run_and_later_ones_start_from_spares(tmp_path):
    good, wrong = _write(tmp_path, "good", GOOD), _write(tmp_path, "wrong one", WRONG)
    out = tmp_path / "many"
    cmd = [sys.executable, "-m", "harness.cli", "eval-many", str(good), str(wrong), str(good), "-d", "rmsnorm_h4096", "-w", str(SMALL),
           "--device", "cpu", "--budget", "0.05", "--trials", "1", "--out", str(out), "--json"]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stderr[-2000:]  # one solution failed
    summary = json.loads(r.stdout)
    assert summary == json.loads((out / "summary.json").read_text())
    runs = summary["runs"]
    assert [x["solution"] for x in runs] == ["good", "wrong one", "good"]
    assert [x["all_passed"] for x in runs] == [True, False, True]
    assert Path(runs[1]["out"]).name == "02-wrong_one"
    reports = [json.loads((Path(x["out"]) / "report.json").read_text()) for x in runs]
    assert [rep["config"].get("spare_worker") for rep in reports] == [False, True, True]
    # A spare's clock starts at its job: its marks fall inside its own run, in order, not at "now".
    for rep in reports[1:]:
        marks = dict(rep["config"]["timeline_s"])
        assert 0 <= marks["env"] <= marks["build"] <= marks["result:1"], rep["config"]["timeline_s"]
        assert rep["config"]["worker_startup_s"]["spare"] is True and rep["config"]["worker_startup_s"]["to_env"] < 5
    assert all((Path(x["out"]) / "traces.jsonl").read_text().count("\n") == x["workloads"] for x in runs)
    assert {rep["run_id"] for rep in reports}.__len__() == 3


def test_eval_many_refuses_a_solution_of_another_definition(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"name": "x", "definition": "gemm_n4096_k4096", "author": "t",
                                 "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run"},
                                 "sources": [{"path": "main.py", "content": "def run(A, B):\n    return A @ B.T\n"}]}))
    r = subprocess.run([sys.executable, "-m", "harness.cli", "eval-many", str(_write(tmp_path, "good", GOOD)), str(other), "-d", "rmsnorm_h4096",
                        "--device", "cpu", "--out", str(tmp_path / "o")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "is for definition 'gemm_n4096_k4096'" in r.stderr
    assert not (tmp_path / "o").exists()  # refused before anything ran


def test_a_spare_that_waited_counts_its_time_from_its_job(tmp_path):
    import time

    from harness.runner import RunConfig, evaluate
    from harness.schema import load_definition, load_workloads

    d = load_definition(REPO / "definitions" / "rmsnorm_h4096" / "definition.json")
    ws = load_workloads(SMALL, d)[:1]
    spares = Spares()
    try:
        spares.start(worker_env("cpu"), 1)
        time.sleep(4)  # idle, torch imported, waiting for a job
        rep = evaluate(d, parse_solution(json.loads(_write(tmp_path, "good", GOOD).read_text())), ws, tmp_path / "run",
                       RunConfig(device="cpu", trials=1, timing={"budget_s": 0.02}), spares=spares)
    finally:
        spares.close()
    assert rep.config["spare_worker"] is True and rep.workloads[0].status is Status.PASSED
    startup = rep.config["worker_startup_s"]
    assert startup["spare"] is True and startup["to_env"] < 3  # not the 4 s it sat idle
