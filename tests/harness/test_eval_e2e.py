"""kbot eval end to end on the CPU: statuses, fault isolation, resume, baseline, export, exit codes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.runner import RunConfig, evaluate
from harness.schema import Status, Trace, load_definition, load_workloads, parse_solution

REPO = Path(__file__).resolve().parents[2]
DEF = REPO / "definitions" / "rmsnorm_h4096" / "definition.json"
SMALL = REPO / "definitions" / "rmsnorm_h4096" / "workloads.small.jsonl"
FAST = {"budget_s": 0.05, "warmup": 1, "min_iters": 5, "recheck": 2}

GOOD_DPS = '''import torch

def run(hidden_states, weight, output):
    x = hidden_states.float()
    inv = torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-5)
    output.copy_((x * inv * weight.float()).to(output.dtype))
'''
GOOD_RET = '''import torch

def run(hidden_states, weight):
    x = hidden_states.float()
    inv = torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-5)
    return (x * inv * weight.float()).to(hidden_states.dtype)
'''


def sol(code, dps=False, name="s", lang="python", path="main.py"):
    return parse_solution({"name": name, "definition": "rmsnorm_h4096", "author": "t",
                           "spec": {"language": lang, "target_hardware": ["cpu"], "entry_point": f"{path}::run", "destination_passing_style": dps},
                           "sources": [{"path": path, "content": code}]})


@pytest.fixture(scope="module")
def definition():
    return load_definition(DEF)


@pytest.fixture(scope="module")
def workloads(definition):
    return load_workloads(SMALL, definition)


def run(definition, workloads, solution, tmp_path, guard=True, **kw):
    cfg = RunConfig(device="cpu", timing=FAST, guard=guard, timeout_s=kw.pop("timeout_s", 60), trials=2)
    return evaluate(definition, solution, workloads, tmp_path / "out", cfg, definition_path=DEF, **kw)


def traces(tmp_path):
    return [Trace.model_validate_json(x) for x in (tmp_path / "out" / "traces.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("code, dps", [(GOOD_DPS, True), (GOOD_RET, False)])
def test_both_calling_styles_pass(definition, workloads, tmp_path, code, dps):
    rep = run(definition, workloads, sol(code, dps), tmp_path)
    assert rep.all_passed, [w.message for w in rep.workloads]
    w = rep.workloads[0]
    assert w.latency_ms.n >= 5 and w.reference_latency_ms is not None and w.speedup_vs_reference > 0
    assert w.correctness.trials == 2 and w.correctness.max_absolute_error < 0.05
    ts = traces(tmp_path)
    assert len(ts) == len(workloads) and all(t.evaluation.status is Status.PASSED for t in ts)
    assert rep.device.timer == "cpu_monotonic" and "CPU" in rep.device.note
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["summary"]["all_passed"] is True


def test_wrong_answer_is_incorrect_numerical(definition, workloads, tmp_path):
    rep = run(definition, workloads, sol(GOOD_RET.replace("1e-5)", "1e-5) * 1.1")), tmp_path)
    assert {w.status for w in rep.workloads} == {Status.INCORRECT_NUMERICAL}
    assert "elements outside" in rep.workloads[0].message


def test_wrong_shape_and_dtype(definition, workloads, tmp_path):
    rep = run(definition, workloads, sol(GOOD_RET.replace(".to(hidden_states.dtype)", "[:, :-1].to(hidden_states.dtype)")), tmp_path)
    assert rep.workloads[0].status is Status.INCORRECT_SHAPE
    rep = run(definition, workloads, sol(GOOD_RET.replace(".to(hidden_states.dtype)", "")), tmp_path / "b")
    assert rep.workloads[0].status is Status.INCORRECT_DTYPE


def test_skipped_work_is_caught_by_poisoned_outputs(definition, workloads, tmp_path):
    lazy = GOOD_DPS.replace("    output.copy_(", "    if hidden_states.shape[0] > 1:\n        output.copy_(")
    rep = run(definition, workloads, sol(lazy, dps=True), tmp_path)
    assert rep.workloads[0].status is Status.INCORRECT_NUMERICAL  # batch 1: output left poisoned (NaN)


def test_compile_errors_are_structured(definition, workloads, tmp_path):
    rep = run(definition, workloads, sol("import torch\nimport no_such_module_kbot\n"), tmp_path, guard=False)
    assert {w.status for w in rep.workloads} == {Status.COMPILE_ERROR}
    assert rep.build.errors[0].line == 2 and rep.build.errors[0].file == "main.py"
    assert "no_such_module_kbot" in rep.build.errors[0].message


def test_triton_compile_error_points_at_the_kernel_line(definition, workloads, tmp_path):
    code = '''import triton
import triton.language as tl

@triton.jit
def k(x_ptr, y_ptr):
    i = tl.arange(0, 4096)
    v = tl.load(x_ptr + i)
    tl.store(y_ptr + i, v + undefined_thing)

def run(hidden_states, weight, output):
    k[(1,)](hidden_states, output)
'''
    rep = run(definition, workloads[:1], sol(code, dps=True, lang="triton"), tmp_path, guard=False)
    w = rep.workloads[0]
    assert w.status in (Status.COMPILE_ERROR, Status.RUNTIME_ERROR)
    assert "undefined_thing" in w.message


HOSTILE = {
    "crash": ("import os\n\ndef run(hidden_states, weight):\n    os._exit(3)\n", Status.RUNTIME_ERROR),
    "segfault": ("import ctypes\n\ndef run(hidden_states, weight):\n    ctypes.string_at(0)\n", Status.RUNTIME_ERROR),
    "raise": ("def run(hidden_states, weight):\n    raise MemoryError('CUDA out of memory (simulated)')\n", Status.RUNTIME_ERROR),
    "hang": ("def run(hidden_states, weight):\n    while True:\n        pass\n", Status.TIMEOUT),
    "flood": (
        "import sys\n\ndef run(hidden_states, weight):\n    for _ in range(20000):\n"
        "        sys.stdout.write('x' * 1000 + '\\n')\n    raise RuntimeError('after the flood')\n",
        Status.RUNTIME_ERROR,
    ),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_solutions_do_not_take_the_harness_down(definition, workloads, tmp_path, kind):
    code, expected = HOSTILE[kind]
    # guard=False: the static guard would refuse most of these before they run; this tests the second wall.
    rep = run(definition, workloads, sol(code), tmp_path, guard=False, timeout_s=8)
    assert [w.uuid for w in rep.workloads] == [w.uuid for w in workloads]  # every workload has a result...
    assert len(traces(tmp_path)) == len(workloads)  # ...and a trace line
    assert all(w.status is expected for w in rep.workloads), [(w.status, w.message) for w in rep.workloads]
    if kind == "flood":
        assert "bytes of output dropped" in rep.workloads[0].log and len(rep.workloads[0].log) < 100_000


def test_the_static_guard_rejects_before_running(definition, workloads, tmp_path):
    rep = run(definition, workloads, sol(HOSTILE["crash"][0]), tmp_path)
    assert {w.status for w in rep.workloads} == {Status.REJECTED}
    assert rep.findings and rep.findings[0].line


def test_resume_keeps_finished_workloads(definition, workloads, tmp_path):
    run(definition, workloads, sol(GOOD_RET), tmp_path)
    path = tmp_path / "out" / "traces.jsonl"
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + lines[1][:40])  # a crash after one workload, mid-write of the next
    rep = run(definition, workloads, sol(GOOD_RET), tmp_path, resume=True)
    new = path.read_text().splitlines()
    assert new[0] == lines[0]  # the finished workload was not measured again
    assert rep.all_passed and len(rep.workloads) == len(workloads)
    assert len([x for x in new if x.startswith("{") and x.endswith("}")]) == len(workloads) + 0  # torn line skipped


def test_baseline_is_measured_interleaved(definition, workloads, tmp_path):
    slow = GOOD_RET.replace(
        "def run(hidden_states, weight):", "def run(hidden_states, weight):\n    for _ in range(400):\n        (hidden_states.float() * 2).sum()"
    )
    rep = run(definition, workloads[-1:], sol(GOOD_RET), tmp_path, baseline=sol(slow, name="slow"))
    w = rep.workloads[0]
    assert w.speedup_vs_baseline is not None and w.speedup_vs_baseline.median > 1.5
    assert w.speedup_vs_baseline.ci95[0] <= w.speedup_vs_baseline.median <= w.speedup_vs_baseline.ci95[1]


def test_cli_exit_codes_and_official_export(tmp_path):
    pytest.importorskip("flashinfer_bench", reason="the official loader (scripts/setup.sh installs it)")
    good = tmp_path / "good.json"
    good.write_text(sol(GOOD_RET, name="good").to_json())
    bad = tmp_path / "bad.json"
    bad.write_text(sol("import os\n\ndef run(hidden_states, weight):\n    os.system('true')\n", name="bad").to_json())
    base = [sys.executable, "-m", "harness.cli", "eval", "-d", "rmsnorm_h4096", "-w", str(SMALL), "--device", "cpu", "--budget", "0.05", "--trials", "1"]
    r = subprocess.run(base + [str(good), "--out", str(tmp_path / "r1"), "--json"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["summary"]["all_passed"] is True
    r = subprocess.run(base + [str(bad), "--out", str(tmp_path / "r2")], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 1
    r = subprocess.run(base + [str(tmp_path / "missing.json")], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 2 and "no such file" in r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "export", str(tmp_path / "r1"), str(tmp_path / "r2"), "--to", str(tmp_path / "ts")],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    from flashinfer_bench.data import TraceSet

    ts = TraceSet.from_path(str(tmp_path / "ts"))
    assert "rmsnorm_h4096" in ts.definitions
    assert {s.name for s in ts.solutions["rmsnorm_h4096"]} == {"good", "bad"}
    statuses = sorted(t.evaluation.status.value for t in ts.traces["rmsnorm_h4096"])
    assert statuses.count("PASSED") == 3 and statuses.count("RUNTIME_ERROR") == 3  # REJECTED exported as RUNTIME_ERROR


LATE_CHEAT = """import torch

_calls = torch.zeros(1)

def run(hidden_states, weight):
    _calls.add_(1)
    if _calls.item() > 80:  # honest while the harness looks, empty once it is timing
        return torch.empty_like(hidden_states)
    x = hidden_states.float()
    inv = torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-5)
    return (x * inv * weight.float()).to(hidden_states.dtype)
"""

FORGER = """import json, os

def run(hidden_states, weight):
    fake = {"type": "result", "result": {"uuid": "x", "axes": {}, "status": "PASSED"}}
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("pipe:"):
                os.write(int(name), (json.dumps(fake) + "\\n").encode())
        except OSError:
            pass
    return hidden_states * 0
"""


def test_timed_outputs_are_rechecked_over_all_timed_calls(definition, workloads, tmp_path):
    # Timed long enough that most timed calls come after the honest ones: a re-check sampled only from
    # the first calls would miss it.
    cfg = RunConfig(device="cpu", timing={"budget_s": 5.0, "warmup": 1, "min_iters": 250, "target_rsem": 0.0, "resolution_ms": 0.0}, guard=False, trials=1)
    rep = evaluate(definition, sol(LATE_CHEAT), workloads[:1], tmp_path / "out", cfg, definition_path=DEF)
    assert rep.workloads[0].status is Status.REJECTED, rep.workloads[0].message
    assert rep.workloads[0].findings[0].rule == "timed-output-mismatch"


def test_forged_messages_on_the_result_channel_are_refused(definition, workloads, tmp_path):
    rep = run(definition, workloads, sol(FORGER), tmp_path, guard=False)
    assert all(w.status is not Status.PASSED for w in rep.workloads), [(w.status, w.message) for w in rep.workloads]
    assert len(traces(tmp_path)) == len(workloads)


def test_a_workload_cut_by_the_total_timeout_says_so_and_not_its_own_timeout(definition, workloads, tmp_path):
    """The run's total timeout ending a workload is not that workload hanging for its own timeout: the
    message names the limit that was reached and how long the workload ran (a MoE run on the H200 once
    read "did not finish within 300 s" for a workload the total timeout had cut after 2 s)."""
    cfg = RunConfig(device="cpu", timing=FAST, guard=False, timeout_s=300, total_timeout_s=20, trials=1)
    rep = evaluate(definition, sol(HOSTILE["hang"][0]), workloads, tmp_path / "out", cfg, definition_path=DEF)
    first, *rest = rep.workloads
    assert first.status is Status.TIMEOUT and "total timeout (20 s) was reached" in first.message and "300 s" not in first.message, first.message
    assert 0 < first.seconds < 20
    assert rest and all(w.status is Status.TIMEOUT and w.never_started for w in rest)
