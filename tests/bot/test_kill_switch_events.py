"""The kill switch (policy `enabled: false`, `.kbot/STOP` on the default branch, the `kbot:stop` label)
and an invalid policy file stop events, promotion and campaign rounds, not only comment commands."""

from __future__ import annotations

import pytest
from candkit import bot_candidate, candidate_meta
from memforge import MemForge
from reportkit import bench_for_pr, good
from test_bot_events import DEF, pr_event, router, run_event

import bot.campaign.github_campaign as gc
from bot.forge.base import Permission
from bot.forge.trusted_meta import write_meta
from bot.review.publish import publish_results

POLICY = "skills/bot-policy.yaml"
SWITCHES = {
    "disabled": ({POLICY: "enabled: false\n"}, ()),
    "stop file": ({".kbot/STOP": "maintenance\n"}, ()),
    "stop label": ({}, ("kbot:stop",)),
    "invalid policy": ({POLICY: "enabled: maybe\nnot_a_key: 1\n"}, ()),
}


def make(switch):
    files, labels = SWITCHES[switch] if switch else ({}, ())
    forge = MemForge(files=dict(files))
    return forge, labels


@pytest.mark.parametrize("switch", list(SWITCHES))
def test_pull_request_event_is_paused(shared, switch):
    forge, labels = make(switch)
    p = pr_event(shared, forge, f"kbot/{DEF}/n1")
    p["pull_request"]["labels"] = [{"name": n} for n in labels]
    assert router(forge).handle("pull_request", p) == "paused"
    assert not forge.statuses


@pytest.mark.parametrize("switch", list(SWITCHES))
def test_workflow_run_is_paused(shared, switch):
    forge, labels = make(switch)
    pr = bot_candidate(forge, DEF, labels=labels)
    calls = []
    r = router(forge, lambda *a: calls.append(a) or True)
    assert r.handle("workflow_run", run_event(shared, forge, pr.head_branch, pr.head_sha)) == "paused"
    assert calls == [] and pr.number not in forge.reviews and not forge.get_pr(pr.number).merged


def test_workflow_run_runs_when_not_paused(shared):
    forge, _ = make(None)
    pr = bot_candidate(forge, DEF)

    def fetch(f, run, dest):
        bench_for_pr(dest, forge, pr, good(baseline=None, baseline_hash=None, definition=DEF))
        return True

    assert router(forge, fetch).handle("workflow_run", run_event(shared, forge, pr.head_branch, pr.head_sha)) == "done"
    assert forge.get_pr(pr.number).merged


@pytest.mark.parametrize("switch", list(SWITCHES))
def test_publish_results_never_promotes_while_paused(switch):
    forge, labels = make(switch)
    pr = bot_candidate(forge, DEF, labels=labels)
    out = publish_results(forge, pr.number, pr.head_sha, report=good(baseline=None, baseline_hash=None, definition=DEF))
    assert out.decision.action == "promote" and out.merged_sha is None
    assert not forge.get_pr(pr.number).merged and forge.read_file(f"kernels/{DEF}/champion.json") is None
    assert "Promotion paused" in forge.reviews[pr.number][-1].body
    assert "paused" in forge.combined_status(pr.head_sha).get("kbot/harness").description


# -- campaign rounds --------------------------------------------------------------------------------


class _Snap:
    def round_prs(self, cid, round_no):
        return []


@pytest.fixture
def rounds(monkeypatch):
    """continue_after_results with the tree and the campaign replaced by recorders."""
    calls = []
    monkeypatch.setattr(gc, "read_snapshot", lambda *a, **k: _Snap())
    monkeypatch.setattr(gc, "campaign", lambda request, **k: calls.append((request, k)) or ["opened"])
    return calls


def round_pr(forge, labels=(), **meta_over):
    issue = forge.add_issue()
    meta = candidate_meta(DEF, "n1", campaign=f"{DEF}#{issue}-c1", round=1, rounds=3, candidates=2,
                          agent="offline", requested_agent="offline", thread=issue, requested_by="alice")
    meta.update(meta_over)
    branch = f"kbot/{DEF}/n1"
    head = forge.commit_files(branch, forge.branches["main"], {meta["solution_path"]: "{}"}, "c")
    return forge.open_pr(branch, "c", write_meta("b", meta, branch, head_sha=head), labels=list(labels)), issue


def test_rounds_continue_when_not_paused(rounds):
    forge, _ = make(None)
    pr, _ = round_pr(forge)
    assert gc.continue_after_results(forge, pr.number) == ["opened"] and len(rounds) == 1


@pytest.mark.parametrize("switch", list(SWITCHES))
def test_rounds_stop_on_the_kill_switch(rounds, switch):
    forge, labels = make(switch)
    pr, _ = round_pr(forge, labels=labels)
    assert gc.continue_after_results(forge, pr.number) == [] and rounds == []


def test_rounds_stop_on_the_stopped_label_of_the_candidate_pr(rounds):
    forge, _ = make(None)
    pr, _ = round_pr(forge, labels=("kbot:stopped",))
    assert gc.continue_after_results(forge, pr.number) == [] and rounds == []


# -- later rounds are bounded by today's policy, not by the (editable, unsigned) meta block -------------


def test_round_request_is_clamped_to_the_policy(rounds):
    policy = ("optimize:\n  max_candidates: 3\n  default_candidates: 2\n  max_rounds: 4\n"
              "  agents: [offline]\n  default_agent: offline\n")
    forge = MemForge(files={"skills/bot-policy.yaml": policy})
    pr, issue = round_pr(forge, candidates=500, rounds=10_000, requested_agent="anthropic", agent="anthropic")
    assert gc.continue_after_results(forge, pr.number) == ["opened"]
    (request, kw), = rounds
    assert (request.candidates, request.rounds, request.agent) == (3, 4, "offline")
    assert kw["round_no"] == 2


def test_rounds_past_the_policy_bound_end_the_campaign(rounds):
    forge = MemForge(files={"skills/bot-policy.yaml": "optimize:\n  max_rounds: 2\n"})
    pr, _ = round_pr(forge, round=2, rounds=50)  # someone raised `rounds` in the PR body
    assert gc.continue_after_results(forge, pr.number) == [] and rounds == []


@pytest.mark.parametrize("over", [{"rounds": True}, {"rounds": "9"}, {"round": True}, {"round": 0}, {"thread": "1"}])
def test_malformed_round_fields_stop(rounds, over):
    forge, _ = make(None)
    pr, _ = round_pr(forge, **over)
    assert gc.continue_after_results(forge, pr.number) == [] and rounds == []


def test_clamp_bools_and_missing_candidates():
    from bot.commands.bot_policy import BotPolicy

    p = BotPolicy()
    assert gc.clamp_to_policy({"rounds": 3, "candidates": True}, p, 0) == (p.optimize.default_candidates, 3, "offline")
    assert gc.clamp_to_policy({"rounds": 3}, p, 2) == (2, 3, "offline")
    assert gc.clamp_to_policy({"rounds": 0, "candidates": -4, "agent": "evil"}, p, 0) == (1, 1, "offline")


def test_optimize_on_a_person_s_kbot_pr_ignores_its_meta(shared):
    from dataclasses import replace

    from eventkit import comment_event

    from bot.commands.dispatch import CommandDispatcher
    from bot.commands.services import ForgeServices

    forge, _ = make(None)
    calls = []
    pr = bot_candidate(forge, DEF, "n7")
    forge.prs[pr.number] = replace(forge.prs[pr.number], author="mallory")
    forge.perms["alice"] = Permission.WRITE
    d = CommandDispatcher(forge, ForgeServices(forge, lambda req: calls.append(req) or []))
    out = d.handle_issue_comment(comment_event(shared, body="/optimize --candidates 1", number=pr.number, is_pr=True))
    assert out.status == "failed" and calls == []  # no trusted metadata: the definition must be named
    assert "which definition" in forge.comments[pr.number][-1].body
    out = d.handle_issue_comment(comment_event(shared, body=f"/optimize {DEF} --candidates 1", number=pr.number,
                                               is_pr=True, comment_id=557))
    assert out.status == "done" and calls[-1].parent_pr is None and calls[-1].parent_meta is None
