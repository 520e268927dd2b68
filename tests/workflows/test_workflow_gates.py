"""What the bench concurrency group and the job gates evaluate to for concrete events. The groups are
the callers' (bench.yml, report.yml); the gates are the called jobs' (kbot-bench.yml, kbot-report.yml),
evaluated with the inputs the caller passes for the same event, as GitHub runs them."""

from __future__ import annotations

from pathlib import Path

import yaml
from gh_expr import evaluate, interpolate

WF = Path(__file__).resolve().parents[2] / ".github" / "workflows"


def _load(name):
    data = yaml.safe_load((WF / name).read_text())
    data["on"] = data.pop(True, data.get("on"))
    return data


def _gate(caller, job, ctx):
    """The `if:` of ``job`` of the workflow ``caller`` calls, for the event ``ctx`` (with the caller's
    inputs for that event)."""
    (call,) = _load(caller)["jobs"].values()
    called = _load(call["uses"].removeprefix("./.github/workflows/"))
    inputs = {k: interpolate(v, ctx) if isinstance(v, str) else v for k, v in call["with"].items()}
    return evaluate(called["jobs"][job]["if"], {**ctx, "inputs": inputs})


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
    assert _load("kbot-bench.yml")["jobs"]["bench"]["strategy"]["fail-fast"] is False


def _report_ctx(**run):
    base = {"path": ".github/workflows/bench.yml", "conclusion": "success", "event": "pull_request",
            "head_branch": "kbot/d/n1", "head_repository": {"full_name": "o/r"}}
    base.update(run)
    return {"github": {"repository": "o/r", "event": {"workflow_run": base}}}


def test_report_gate_needs_the_bench_file_and_a_finished_run():
    def gate(ctx):
        return _gate("report.yml", "report", ctx)

    assert gate(_report_ctx()) is True
    assert gate(_report_ctx(conclusion="failure")) is True
    for bad in ({"path": ".github/workflows/evil.yml"}, {"conclusion": "cancelled"}, {"conclusion": "skipped"},
                {"conclusion": None}, {"event": "push"}, {"head_branch": "main"},
                {"head_repository": {"full_name": "evil/fork"}}):
        assert not gate(_report_ctx(**bad)), bad


def _plan_ctx(event_name="pull_request", **pr):
    base = {"head": {"repo": {"full_name": "o/r"}, "ref": "kbot/d/n1"}, "user": {"login": "kbot[bot]"}}
    base.update(pr)
    return {"github": {"repository": "o/r", "event_name": event_name,
                       "event": {"action": "opened", "pull_request": base} if event_name == "pull_request" else {}},
            "vars": {"KBOT_BOT_LOGIN": "kbot[bot]"}}


def test_bench_plan_gate_bot_branches_or_a_dispatch_never_a_fork_or_a_person_s_pr():
    def gate(ctx):
        return _gate("bench.yml", "plan", ctx)

    assert gate(_plan_ctx()) is True
    assert gate(_plan_ctx("workflow_dispatch")) is True  # only writers (the bot) can dispatch
    assert not gate(_plan_ctx(head={"repo": {"full_name": "ada/r"}, "ref": "kbot/d/n1"}))  # a fork
    assert not gate(_plan_ctx(user={"login": "ada"}))  # a person's PR waits for /evaluate
    assert not gate(_plan_ctx(head={"repo": {"full_name": "o/r"}, "ref": "feature"}))
    # the bot's login is the repository's setting, passed on as the bot-login input
    assert not gate({**_plan_ctx(), "vars": {"KBOT_BOT_LOGIN": "other-app[bot]"}})
    assert not gate({**_plan_ctx(), "vars": {}})  # unset: nobody's PR is benched until it is set


def test_a_dispatched_bench_shares_its_pr_s_cancelling_group():
    group = _load("bench.yml")["concurrency"]["group"]
    dispatch = interpolate(group, {"github": {"run_id": 9, "event": {}}, "inputs": {"pr": "7"}})
    assert dispatch == _bench_group("synchronize", run_id=4)


def test_report_gate_takes_dispatched_benches_of_this_repository():
    def gate(ctx):
        return _gate("report.yml", "report", ctx)

    assert gate(_report_ctx(event="workflow_dispatch", head_branch="main")) is True
    assert not gate(_report_ctx(event="workflow_dispatch", head_branch="main", head_repository={"full_name": "evil/fork"}))
    assert not gate(_report_ctx(event="workflow_dispatch", conclusion="cancelled"))
