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


def test_a_rounds_prs_bench_concurrently_and_are_decided_one_at_a_time():
    """A campaign round opens one PR per candidate: each PR's bench is a run of its own group (so the
    round takes as many runners of the pool at once as there are), while every report (review and
    promotion) of the repository shares one group that is never cancelled: decisions one at a time."""
    def group(pr):
        ctx = {"github": {"run_id": pr, "event": {"action": "opened", "pull_request": {"number": pr}}}}
        return interpolate(_load("bench.yml")["concurrency"]["group"], ctx)

    assert len({group(pr) for pr in (11, 12, 13, 14)}) == 4
    report = _load("report.yml")["concurrency"]
    runs = [{"github": {"repository": "o/r", "event": {"workflow_run": {"id": i, "head_branch": f"kbot/d/n{i}"}}}} for i in range(3)]
    assert len({interpolate(report["group"], c) for c in runs}) == 1 and report["cancel-in-progress"] is False
    assert _load("bench.yml")["jobs"]["bench"]["strategy"]["fail-fast"] is False


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


def _plan_ctx(event_name="pull_request", **pr):
    base = {"head": {"repo": {"full_name": "o/r"}, "ref": "kbot/d/n1"}, "user": {"login": "kbot[bot]"}}
    base.update(pr)
    return {"github": {"repository": "o/r", "event_name": event_name,
                       "event": {"action": "opened", "pull_request": base} if event_name == "pull_request" else {}},
            "vars": {"KBOT_BOT_LOGIN": "kbot[bot]"}}


def test_bench_plan_gate_bot_branches_or_a_dispatch_never_a_fork_or_a_person_s_pr():
    gate = _load("bench.yml")["jobs"]["plan"]["if"]
    assert evaluate(gate, _plan_ctx()) is True
    assert evaluate(gate, _plan_ctx("workflow_dispatch")) is True  # only writers (the bot) can dispatch
    assert not evaluate(gate, _plan_ctx(head={"repo": {"full_name": "ada/r"}, "ref": "kbot/d/n1"}))  # a fork
    assert not evaluate(gate, _plan_ctx(user={"login": "ada"}))  # a person's PR waits for /evaluate
    assert not evaluate(gate, _plan_ctx(head={"repo": {"full_name": "o/r"}, "ref": "feature"}))


def test_a_dispatched_bench_shares_its_pr_s_cancelling_group():
    group = _load("bench.yml")["concurrency"]["group"]
    dispatch = interpolate(group, {"github": {"run_id": 9, "event": {}}, "inputs": {"pr": "7"}})
    assert dispatch == _bench_group("synchronize", run_id=4)


def test_report_gate_takes_dispatched_benches_of_this_repository():
    gate = _load("report.yml")["jobs"]["report"]["if"]
    assert evaluate(gate, _report_ctx(event="workflow_dispatch", head_branch="main")) is True
    assert not evaluate(gate, _report_ctx(event="workflow_dispatch", head_branch="main", head_repository={"full_name": "evil/fork"}))
    assert not evaluate(gate, _report_ctx(event="workflow_dispatch", conclusion="cancelled"))
