"""A promotion interrupted after its merge (the champion pointer commit failed) is finished later, and
losing candidates are closed only once the pointer is written."""

from __future__ import annotations

import json

import pytest
from candkit import bot_candidate
from eventkit import comment_event
from memforge import MemForge
from reportkit import good

from bot.commands.dispatch import CommandDispatcher
from bot.commands.services import ForgeServices
from bot.forge.base import ForgeError, Permission
from bot.promotion.execute import resume_pointer
from bot.review.publish import publish_results

DEF = "gdn_decode_qk4_v8_d128_k_last"
CHAMP = f"kernels/{DEF}/champion.json"


def first(**kw):
    return good(baseline=None, baseline_hash=None, definition=DEF, **kw)


@pytest.fixture
def interrupted():
    """A loser (evaluated, open) and a winner merged whose pointer commit failed."""
    forge = MemForge()
    loser = bot_candidate(forge, DEF, "n1")
    publish_results(forge, loser.number, loser.head_sha, report=first(), promote=False)
    winner = bot_candidate(forge, DEF, "n2", solution_hash="e" * 64)
    real_commit = forge.commit_files

    def pointer_fails(branch, base, files, message):
        if branch == "main":
            raise ForgeError("server error")
        return real_commit(branch, base, files, message)

    forge.commit_files = pointer_fails
    out = publish_results(forge, winner.number, winner.head_sha, report=first(solution_hash="e" * 64))
    forge.commit_files = real_commit
    return forge, loser, winner, out


def test_losers_stay_open_when_the_pointer_was_not_written(interrupted):
    forge, loser, winner, out = interrupted
    assert forge.get_pr(winner.number).merged and out.merged_sha
    assert forge.read_file(CHAMP) is None
    assert out.closed == [] and forge.get_pr(loser.number).is_open


def test_a_rerun_report_resumes_the_pointer(interrupted):
    forge, loser, winner, _ = interrupted
    out = publish_results(forge, winner.number, winner.head_sha, report=first(solution_hash="e" * 64))
    assert out.state == "resumed"
    champ = json.loads(forge.read_file(CHAMP))
    assert champ["pr"] == winner.number and champ["merge_sha"] == forge.get_pr(winner.number).merge_commit_sha
    assert champ["sha"] == winner.head_sha
    assert out.closed == [loser.number] and not forge.get_pr(loser.number).is_open
    # done once: nothing more to resume
    assert resume_pointer(forge, forge.get_pr(winner.number)) is None
    assert publish_results(forge, winner.number, winner.head_sha, report=first(solution_hash="e" * 64)).state == "skipped"


def test_promote_command_resumes_the_pointer(shared, interrupted):
    forge, loser, winner, _ = interrupted
    forge.perms["maint"] = Permission.MAINTAIN
    out = CommandDispatcher(forge, ForgeServices(forge)).handle_issue_comment(
        comment_event(shared, body="/promote", number=winner.number, is_pr=True, login="maint"))
    assert out.status == "done"
    assert json.loads(forge.read_file(CHAMP))["pr"] == winner.number
    assert any("Resumed the interrupted promotion" in c.body for c in forge.comments[winner.number])


def test_no_resume_when_another_champion_landed_meanwhile(interrupted):
    forge, loser, winner, _ = interrupted
    other = {"definition": DEF, "solution": "x", "solution_hash": "f" * 64, "pr": None, "history": []}
    forge.commit_files("main", forge.branches["main"], {CHAMP: json.dumps(other)}, "someone else's champion")
    out = resume_pointer(forge, forge.get_pr(winner.number))
    assert out is not None and out.pointer_sha is None and out.decision.action != "promote"
    assert json.loads(forge.read_file(CHAMP))["solution_hash"] == "f" * 64
    assert forge.get_pr(loser.number).is_open


def test_a_rerun_of_the_report_workflow_resumes_the_pointer(interrupted, tmp_path, monkeypatch):
    """report.yml re-run: `bot report --head-branch B --head-sha S` for a PR that is merged (no open PR
    any more) finishes the interrupted promotion; before, it said "no open PR" and only /promote could."""
    from click.testing import CliRunner
    from test_bot_app_mode import cli

    import bot.cli.github_bot as gb

    forge, loser, winner, _ = interrupted
    monkeypatch.setattr(gb, "_github_forge", lambda repo, installation_id=None: forge)
    r = CliRunner().invoke(cli(), ["bot", "report", "--results", str(tmp_path), "--head-branch", winner.head_branch,
                                   "--head-sha", winner.head_sha, "--repo", "o/r", "--no-rounds"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output.strip().splitlines()[-1])["state"] == "resumed"
    assert json.loads(forge.read_file(CHAMP))["pr"] == winner.number and not forge.get_pr(loser.number).is_open


def test_a_redelivered_workflow_run_resumes_the_pointer(shared, interrupted, tmp_path):
    """App mode: the same, from a workflow_run delivery for the merged PR's head."""
    from test_bot_events import router, run_event

    forge, loser, winner, _ = interrupted
    fetched = []
    r = router(forge, lambda f, run, dest: fetched.append(run) or True)
    assert r.handle("workflow_run", run_event(shared, forge, winner.head_branch, winner.head_sha)) == "done"
    assert json.loads(forge.read_file(CHAMP))["pr"] == winner.number
    # a run for another head of that branch is not this PR's
    assert r.handle("workflow_run", run_event(shared, forge, winner.head_branch, "f" * 40)) == "ignored"
