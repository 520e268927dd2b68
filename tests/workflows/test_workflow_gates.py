"""What the bench concurrency group and the report gate evaluate to for concrete events."""

from __future__ import annotations

from pathlib import Path

import yaml
from gh_expr import evaluate, interpolate

WF = Path(__file__).resolve().parents[2] / ".github" / "workflows"


def _load(name):
    data = yaml.safe_load((WF / name).read_text())
    data["on"] = data.pop(True, data.get("on"))
    return data


def _bench_group(action, label=None, run_id=1):
    ctx = {"github": {"run_id": run_id, "event": {"action": action, "pull_request": {"number": 7},
                                                   **({"label": {"name": label}} if label else {})}}}
    return interpolate(_load("bench.yml")["concurrency"]["group"], ctx)


def test_bot_candidate_label_cannot_cancel_the_opened_bench():
    opened = _bench_group("opened", run_id=1)
    # the bot adds kbot:candidate right after opening: that run must not share (and cancel) the group
    assert _bench_group("labeled", "kbot:candidate", run_id=2) != opened
    assert _bench_group("labeled", "kbot:candidate", run_id=2) != _bench_group("labeled", "other", run_id=3)
    # a new push or an explicit re-bench does supersede the running bench of the same PR
    assert _bench_group("synchronize", run_id=4) == opened
    assert _bench_group("labeled", "kbot:bench", run_id=5) == opened
    assert _bench_group("labeled", "kbot:profile", run_id=6) == opened


def _report_ctx(**run):
    base = {"path": ".github/workflows/bench.yml", "conclusion": "success", "event": "pull_request",
            "head_branch": "kbot/d/n1", "head_repository": {"full_name": "o/r"}}
    base.update(run)
    return {"github": {"repository": "o/r", "event": {"workflow_run": base}}}


def test_report_gate_needs_the_bench_file_and_a_finished_run():
    gate = _load("report.yml")["jobs"]["report"]["if"]
    assert evaluate(gate, _report_ctx()) is True
    assert evaluate(gate, _report_ctx(conclusion="failure")) is True
    for bad in ({"path": ".github/workflows/evil.yml"}, {"conclusion": "cancelled"}, {"conclusion": "skipped"},
                {"conclusion": None}, {"event": "push"}, {"head_branch": "main"},
                {"head_repository": {"full_name": "evil/fork"}}):
        assert not evaluate(gate, _report_ctx(**bad)), bad
