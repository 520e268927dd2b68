"""Promotion merges only the bot's own, unmodified candidate for exactly the evaluated solution."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from candkit import CAND_HASH, bot_candidate, candidate_meta
from eventkit import comment_event
from memforge import MemForge
from reportkit import good

from bot.commands.services import ForgeServices
from bot.forge.base import Permission
from bot.forge.trusted_meta import write_meta
from bot.promotion.candidate_gate import candidate_problems, solution_folder
from bot.review.publish import publish_results

DEF = "gdn_decode_qk4_v8_d128_k_last"


@pytest.fixture
def forge():
    return MemForge()


def first_champion_report(**kw):
    return good(baseline=None, baseline_hash=None, definition=DEF, **kw)


def _assert_not_promoted(forge, pr, out, why):
    assert not forge.get_pr(pr.number).merged and forge.read_file(f"kernels/{DEF}/champion.json") is None
    assert out.decision.action == "reject"
    body = forge.reviews[pr.number][-1].body
    assert "not promoted" in body and why in body


def test_a_clean_bot_candidate_is_promoted(forge):
    pr = bot_candidate(forge, DEF)
    out = publish_results(forge, pr.number, pr.head_sha, report=first_champion_report())
    assert out.decision.action == "promote" and forge.get_pr(pr.number).merged
    champ = json.loads(forge.read_file(f"kernels/{DEF}/champion.json"))
    assert champ["solution_path"] == candidate_meta(DEF, "n1")["solution_path"]


def test_a_pr_opened_by_a_person_is_not_promoted(forge):
    pr = bot_candidate(forge, DEF)
    forge.prs[pr.number] = replace(forge.prs[pr.number], author="mallory")  # same branch and meta, a person's PR
    out = publish_results(forge, pr.number, pr.head_sha, report=first_champion_report())
    _assert_not_promoted(forge, pr, out, "not by the bot")


def test_a_human_commit_on_the_branch_blocks_promotion(forge):
    pr = bot_candidate(forge, DEF)
    forge.human_push(pr.head_branch, {candidate_meta(DEF, "n1")["solution_path"]: '{"name": "evil"}'})
    pr = forge.get_pr(pr.number)
    out = publish_results(forge, pr.number, pr.head_sha, report=first_champion_report())
    _assert_not_promoted(forge, pr, out, "not made by the bot")


def test_files_outside_the_solution_folder_block_promotion(forge):
    pr = bot_candidate(forge, DEF)
    # a bot-made commit (e.g. a compromised agent) that also touches a workflow
    forge.commit_files(pr.head_branch, pr.head_sha, {".github/workflows/x.yml": "on: push"}, "more")
    pr = forge.get_pr(pr.number)
    out = publish_results(forge, pr.number, pr.head_sha, report=first_champion_report())
    _assert_not_promoted(forge, pr, out, "outside kernels/")
    assert forge.read_file(".github/workflows/x.yml") is None


@pytest.mark.parametrize("kw,why", [({"solution_hash": "d" * 64}, "solution hash differs"),
                                    ({"definition": "other_def"}, "definition differs")])
def test_report_must_match_the_meta(forge, kw, why):
    pr = bot_candidate(forge, DEF)
    report = good(baseline=None, baseline_hash=None, **{"definition": DEF, **kw})
    out = publish_results(forge, pr.number, pr.head_sha, report=report)
    _assert_not_promoted(forge, pr, out, why)


def test_meta_without_a_valid_solution_path_is_not_promoted(forge):
    meta = {"definition": DEF, "solution": "cand_v2", "solution_hash": CAND_HASH, "solution_path": "kernels/../x.json"}
    branch = f"kbot/{DEF}/n1"
    head = forge.commit_files(branch, forge.branches["main"], {f"kernels/{DEF}/cand_v2/solution.json": "{}"}, "c")
    pr = forge.open_pr(branch, "c", write_meta("b", meta, branch, head_sha=head))
    out = publish_results(forge, pr.number, pr.head_sha, report=first_champion_report())
    _assert_not_promoted(forge, pr, out, "no valid solution\\_path")


def test_promote_command_applies_the_same_gate(shared, forge):
    from bot.commands.dispatch import CommandDispatcher

    pr = bot_candidate(forge, DEF)
    publish_results(forge, pr.number, pr.head_sha, report=first_champion_report(), promote=False)
    forge.human_push(pr.head_branch, {"README.md": "hi"})
    forge.perms["maint"] = Permission.MAINTAIN
    pr = forge.get_pr(pr.number)
    # re-evaluate the new head so only the gate (not freshness) stands in the way
    publish_results(forge, pr.number, pr.head_sha, report=first_champion_report(), promote=False)
    out = CommandDispatcher(forge, ForgeServices(forge)).handle_issue_comment(
        comment_event(shared, body="/promote", number=pr.number, is_pr=True, login="maint"))
    assert out.status == "done" and not forge.get_pr(pr.number).merged
    reply = [c.body for c in forge.comments[pr.number] if "Decision" in c.body][-1]
    assert "reject" in reply and "not promoted" in reply


def test_solution_folder_validation():
    assert solution_folder(candidate_meta(DEF, "n1")) == f"kernels/{DEF}/cand_v2-n1"
    for bad in ("kernels/other/x/solution.json", f"kernels/{DEF}/solution.json", f"kernels/{DEF}/../solution.json",
                f"kernels/{DEF}/x/y/solution.json", 5, None):
        assert solution_folder({"definition": DEF, "solution_path": bad}) is None
    assert solution_folder(["not", "a", "dict"]) is None


def test_problems_are_listed_for_a_forge_that_cannot_list_files(forge):
    pr = bot_candidate(forge, DEF)

    class NoFiles:
        info = forge.info

        def branch_touched_by_humans(self, *a):
            return []

    assert candidate_problems(NoFiles(), pr, definition=DEF, solution_hash=CAND_HASH) == [
        "this forge cannot list the PR's changed files"]


def test_promote_command_refuses_a_person_s_pr_without_a_submission_record(shared, forge):
    """A person's PR is promotable only through its submission record (a maintainer's /evaluate) and an
    approval (tests/bot/test_people_prs.py); the bot's meta block in its body counts for nothing."""
    from bot.commands.dispatch import CommandDispatcher

    pr = bot_candidate(forge, DEF)
    publish_results(forge, pr.number, pr.head_sha, report=first_champion_report(), promote=False)
    forge.prs[pr.number] = replace(forge.prs[pr.number], author="mallory")
    forge.perms["maint"] = Permission.MAINTAIN
    out = CommandDispatcher(forge, ForgeServices(forge)).handle_issue_comment(
        comment_event(shared, body="/promote", number=pr.number, is_pr=True, login="maint"))
    assert out.status == "failed" and not forge.get_pr(pr.number).merged
    assert any("no submission record" in c.body for c in forge.comments[pr.number])


def test_a_person_s_kbot_pr_is_not_closed_as_a_loser(forge):
    other = bot_candidate(forge, DEF, "n5", solution_hash="5" * 64)
    publish_results(forge, other.number, other.head_sha,
                    report=good(baseline=None, baseline_hash=None, definition=DEF, solution_hash="5" * 64), promote=False)
    forge.prs[other.number] = replace(forge.prs[other.number], author="alice")
    pr = bot_candidate(forge, DEF)
    out = publish_results(forge, pr.number, pr.head_sha, report=first_champion_report())
    assert forge.get_pr(pr.number).merged and out.closed == [] and forge.get_pr(other.number).is_open
