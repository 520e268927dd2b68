"""The gated worker: start-up, build and correctness overlap the observer pass, timing waits for "go".

On the GPU the runner starts the timing worker and the CUPTI observer worker at once and opens the gate
only when the observer found nothing; these tests drive the same mechanism on the CPU."""

import time
from pathlib import Path

from harness.runner import RunConfig, Worker, evaluate, worker_env
from harness.schema import Status, load_definition, load_workloads, parse_solution

REPO = Path(__file__).resolve().parents[2]
DEF = REPO / "definitions" / "rmsnorm_h4096" / "definition.json"
SMALL = REPO / "definitions" / "rmsnorm_h4096" / "workloads.small.jsonl"
FAST = {"budget_s": 0.05, "warmup": 1, "min_iters": 5, "recheck": 2}

# Reads its stdin on every call (the static guard refuses this; these tests drive the worker directly): with the gate on the worker's own stdin it would swallow "go" (or block).
READS_STDIN = '''import sys
import torch

def run(hidden_states, weight):
    leaked = sys.stdin.read()
    if leaked:
        raise RuntimeError("candidate read the gate: " + repr(leaked))
    x = hidden_states.float()
    inv = torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-5)
    return (x * inv * weight.float()).to(hidden_states.dtype)
'''


PLAIN = '''import torch

def run(hidden_states, weight):
    x = hidden_states.float()
    inv = torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-5)
    return (x * inv * weight.float()).to(hidden_states.dtype)
'''


def _solution(code):
    return parse_solution({"name": "s", "definition": "rmsnorm_h4096", "author": "t",
                           "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run", "destination_passing_style": False},
                           "sources": [{"path": "main.py", "content": code}]})


def _job(tmp_path, n_workloads=1):
    d = load_definition(DEF)
    ws = load_workloads(SMALL, d)[:n_workloads]
    return {"definition": d.to_dict(), "definition_path": str(DEF), "solution": _solution(READS_STDIN).to_dict(), "baseline": None,
            "device": "cpu", "seed": 0, "trials": 1, "timing": FAST, "config_overrides": {}, "dataset_root": None,
            "workdir": str(tmp_path / "build"), "workloads": [w.model_dump(mode="json") for w in ws]}


def _messages_until(worker, kind, seconds):
    seen = []
    deadline = time.monotonic() + seconds
    while True:
        msg = worker.next_message(deadline)
        if msg is None:
            return seen, False
        seen.append(msg["type"])
        if msg["type"] == kind:
            return seen, True


def test_timing_waits_for_the_gate_and_the_candidate_cannot_read_it(tmp_path):
    w = Worker(_job(tmp_path), worker_env("cpu"), gated=True)
    try:
        seen, started = _messages_until(w, "start", 120)
        assert started, seen
        # Correctness runs before the gate; the result (which needs timing) must not come while it is shut.
        seen, got = _messages_until(w, "result", 4)
        assert not got, f"the worker timed before the gate opened: {seen}"
        w.open_gate()
        deadline = time.monotonic() + 120
        msg = w.next_message(deadline)
        assert msg is not None and msg["type"] == "result", msg
        assert msg["result"]["status"] == "PASSED", msg["result"].get("message")
        assert "phase_s" in msg["result"]["profile"]
        assert msg["result"]["profile"]["phase_s"]["gate_wait"] > 0  # it sat at the shut gate (how long depends on the machine's load)
    finally:
        w.kill()


def test_a_shut_gate_ends_the_worker_without_a_result(tmp_path):
    w = Worker(_job(tmp_path), worker_env("cpu"), gated=True)
    try:
        seen, started = _messages_until(w, "start", 120)
        assert started, seen
        w.proc.stdin.close()  # the parent decided against timing (an observer finding) without killing
        msg = w.next_message(time.monotonic() + 60)
        assert msg == {"type": "eof"}, msg
        assert w.proc.wait(timeout=30) == 0
    finally:
        w.kill()


def test_an_ungated_worker_ignores_its_stdin(tmp_path):
    w = Worker(_job(tmp_path), worker_env("cpu"))
    try:
        deadline = time.monotonic() + 120
        while True:
            msg = w.next_message(deadline)
            assert msg is not None and msg["type"] not in ("eof", "garbage", "fatal"), msg
            if msg["type"] == "result":
                break
        assert msg["result"]["status"] == "PASSED", msg["result"].get("message")  # stdin read as empty, no raise
    finally:
        w.kill()


def test_the_report_says_where_the_seconds_went(tmp_path):
    d = load_definition(DEF)
    ws = load_workloads(SMALL, d)[:2]
    cfg = RunConfig(device="cpu", timing=FAST, timeout_s=60, trials=1)
    rep = evaluate(d, _solution(PLAIN), ws, tmp_path / "out", cfg, definition_path=DEF)
    assert [w.status for w in rep.workloads] == [Status.PASSED, Status.PASSED]
    marks = [m[0] for m in rep.config["timeline_s"]]
    assert marks[0] == "worker_started" and marks[-2:] == ["result:1", "result:2"], marks
    assert {"env", "build", "ready"} <= set(marks)
    times = [m[1] for m in rep.config["timeline_s"]]
    assert times == sorted(times)
    assert rep.config["worker_startup_s"]["torch_import"] > 0
    for w in rep.workloads:
        assert set(w.profile["phase_s"]) == {"correctness", "gate_wait", "quiet_wait", "timing", "reference_timing"}
        assert w.profile["phase_s"]["gate_wait"] < 0.5  # no observer on the CPU: the gate is open


def test_the_runner_times_only_after_the_observer_and_not_at_all_when_it_objects(tmp_path, monkeypatch):
    """The runner's side of the gate, with the GPU-only observer replaced by a slow stand-in."""
    import harness.runner as runner
    from harness.report import Finding

    d = load_definition(DEF)
    ws = load_workloads(SMALL, d)[:2]
    cfg = RunConfig(device="cpu", timing=FAST, timeout_s=60, trials=1)
    verdict: list = []

    def slow_observer(job, environ, cfg, report, timeline=None, total_deadline=None, spares=None):
        assert job["mode"] == "observe" and len(job["workloads"]) == 1
        # No build folder in the job: every worker builds in a scratch folder of its own, made when it
        # is spawned (test_every_worker_gets_a_private_scratch_folder_of_the_same_shape).
        assert "workdir" not in job
        time.sleep(3)
        return list(verdict)

    monkeypatch.setattr(runner, "needs_observer", lambda cfg: True)
    monkeypatch.setattr(runner, "observe_kernels", slow_observer)
    rep = evaluate(d, _solution(PLAIN), ws, tmp_path / "ok", cfg, definition_path=DEF)
    assert [w.status for w in rep.workloads] == [Status.PASSED, Status.PASSED]
    marks = dict(rep.config["timeline_s"])
    assert marks["gate_opened"] >= marks["observed"] >= 3
    assert marks["result:1"] > marks["gate_opened"]  # nothing timed before the gate (the worker-level test holds it shut)
    assert sorted(p.name for p in (tmp_path / "ok").iterdir()) == ["report.json", "solution.json", "traces.jsonl"]

    verdict.append(Finding(rule="side-stream", message="GPU work on a stream the timer does not see"))
    t0 = time.monotonic()
    rep = evaluate(d, _solution(PLAIN), ws, tmp_path / "rejected", cfg, definition_path=DEF)
    assert [w.status for w in rep.workloads] == [Status.REJECTED, Status.REJECTED]
    assert all(w.latency_ms is None for w in rep.workloads)
    assert time.monotonic() - t0 < 30


def test_every_worker_gets_a_private_scratch_folder_of_the_same_shape(tmp_path):
    """Observer and timing worker alike: a fresh folder each, outside any run folder, random names of
    one length under one parent (a candidate reading its own path learns nothing about its role),
    private to its owner, and gone once the worker is."""
    from harness.runner import Spawned

    a, b = Spawned.start(worker_env("cpu")), Spawned.start(worker_env("cpu"), spare=True)
    try:
        pa, pb = Path(a.scratch), Path(b.scratch)
        assert pa != pb and pa.parent == pb.parent and len(pa.name) == len(pb.name) and pa.name.startswith("kbot-w-")
        assert pa.is_dir() and (pa.stat().st_mode & 0o077) == 0
        assert REPO not in pa.parents
    finally:
        a.discard()
        b.discard()
    assert not pa.exists() and not pb.exists()


def test_the_table_ends_with_where_the_time_went(tmp_path):
    from io import StringIO

    from rich.console import Console

    from harness.report_table import print_report, time_breakdown

    d = load_definition(DEF)
    ws = load_workloads(SMALL, d)[:1]
    rep = evaluate(d, _solution(PLAIN), ws, tmp_path / "out", RunConfig(device="cpu", timing=FAST, timeout_s=60, trials=1), definition_path=DEF)
    line = time_breakdown(rep)
    assert line and line.startswith("time: ") and "torch import" in line and "workloads: " in line, line
    rep.workloads[0].message = "the GPU was busy with other work when timing began"
    buf = StringIO()
    print_report(rep, tmp_path / "out", Console(file=buf, width=200))
    text = buf.getvalue()
    assert "note: the GPU was busy" in text and "time: " in text


def test_a_gate_opened_before_the_worker_read_its_job_is_not_lost(tmp_path):
    """"go" right behind the job on the same pipe: the worker must not read it into a buffer with the job."""
    w = Worker(_job(tmp_path), worker_env("cpu"), gated=True)
    try:
        w.open_gate()
        seen, got = _messages_until(w, "result", 120)
        assert got, seen
    finally:
        w.kill()


def test_the_job_line_is_read_without_losing_what_follows():
    import os

    from harness.worker import read_line_keeping_rest

    r, w = os.pipe()
    try:
        os.write(w, b'{"job": 1}\ngo\n')
        assert read_line_keeping_rest(r) == b'{"job": 1}\n'
        os.close(w)
        assert read_line_keeping_rest(r) == b"go\n"  # kept for the gate, although it came in one read
        assert read_line_keeping_rest(r) == b""
    finally:
        os.close(r)


WRONG = PLAIN.replace("* weight.float()", "* weight.float() * 1.5")
# Wrong on the first (observed) workload only (x + 1: rmsnorm ignores a scale): a plain bug there, right elsewhere.
WRONG_ON_FIRST = PLAIN.replace("    x = hidden_states.float()", "    x = hidden_states.float()\n    if hidden_states.shape[0] == FIRST:\n        x = x + 1")


def test_a_call_that_cannot_be_observed_does_not_pass_unobserved(tmp_path, monkeypatch):
    """An observer with no verdict (a crash) is retried once; when it fails again, results that pass
    anyway are REJECTED, while failing ones keep their own status."""
    import harness.runner as runner

    d = load_definition(DEF)
    ws = load_workloads(SMALL, d)[:2]
    cfg = RunConfig(device="cpu", timing=FAST, timeout_s=60, trials=1)
    calls = []

    def crashing_observer(job, environ, cfg, report, timeline=None, total_deadline=None, spares=None):
        calls.append(job["mode"])
        report.config["observe"] = "no result"
        return None

    monkeypatch.setattr(runner, "needs_observer", lambda cfg: True)
    monkeypatch.setattr(runner, "observe_kernels", crashing_observer)
    rep = evaluate(d, _solution(PLAIN), ws, tmp_path / "honest", cfg, definition_path=DEF)
    assert len(calls) == 2
    assert [w.status for w in rep.workloads] == [Status.REJECTED, Status.REJECTED]
    assert all(f.rule == "observer-failed" for w in rep.workloads for f in w.findings)
    assert rep.config["observe"].startswith("failed")

    calls.clear()
    rep = evaluate(d, _solution(WRONG), ws, tmp_path / "wrong", cfg, definition_path=DEF)
    assert [w.status for w in rep.workloads] == [Status.INCORRECT_NUMERICAL, Status.INCORRECT_NUMERICAL]

    # The observed workload fails in the normal run too: a bug, not a dodge; the other result stands.
    first_rows = ws[0].axes["batch_size"]
    assert ws[1].axes["batch_size"] != first_rows
    rep = evaluate(d, _solution(WRONG_ON_FIRST.replace("FIRST", str(first_rows))), ws, tmp_path / "bug", cfg, definition_path=DEF)
    assert [w.status for w in rep.workloads] == [Status.INCORRECT_NUMERICAL, Status.PASSED]

    def timed_out_observer(job, environ, cfg, report, timeline=None, total_deadline=None, spares=None):
        calls.append(job["mode"])
        report.config["observe"] = "no result: timed out"
        return None

    calls.clear()
    monkeypatch.setattr(runner, "observe_kernels", timed_out_observer)
    rep = evaluate(d, _solution(PLAIN), ws, tmp_path / "hang", cfg, definition_path=DEF)
    assert len(calls) == 1  # a hang is not retried
    assert {w.status for w in rep.workloads} == {Status.REJECTED}


def test_timeline_places_a_message_when_the_worker_sent_it():
    from types import SimpleNamespace

    from harness.runner import Timeline

    tl = Timeline()
    tl.t0 -= 10.0  # the run began 10 s ago; the worker 1 s after that
    w = SimpleNamespace(started_at=tl.t0 + 1.0)
    assert abs(tl.sent_at(w, {"t": 2.5}) - 3.5) < 1e-9
    assert 9.9 < tl.sent_at(w, {"t": 10_000}) <= time.monotonic() - tl.t0  # never in the future
    for bad in ({}, {"t": -1}, {"t": float("nan")}, {"t": "3"}):
        assert tl.sent_at(w, bad) is None
    tl.mark("late")
    tl.mark("early", 0.0)
    assert [m for m, _ in tl.marks] == ["early", "late"]  # kept in time order


def test_what_the_observer_says_it_saw_is_cut_to_bounded_plain_values():
    from harness.runner import _observer_seen

    assert _observer_seen("garbage") == {} and _observer_seen(None) == {}
    got = _observer_seen({"backend": "cupti-callbacks" * 10, "kernels": 3, "streams": True, "unparsed": ["x" * 500] * 50, "extra": "dropped"})
    assert got["backend"] == ("cupti-callbacks" * 10)[:40] and got["kernels"] == 3
    assert "streams" not in got and "extra" not in got  # a bool is not a count
    assert len(got["unparsed"]) == 20 and all(len(x) == 80 for x in got["unparsed"])


def test_the_observer_reports_and_exits_at_once(tmp_path):
    job = {**_job(tmp_path), "mode": "observe"}
    w = Worker(job, worker_env("cpu"))
    try:
        seen, ok = _messages_until(w, "done", 120)
        assert ok and "observed" in seen and "env" not in seen, seen  # an observer sends no environment
        assert w.proc.wait(timeout=30) == 0  # out through os._exit, with status 0
    finally:
        w.kill()
