"""With KBOT_META_KEY set, the bot signs its meta blocks (per head branch) and trusts only blocks that
verify: an edited, typed or copied block gives the PR no metadata (no promotion, no next round)."""

from __future__ import annotations

import pytest
from candkit import candidate_meta
from memforge import MemForge
from reportkit import good

import bot.campaign.github_campaign as gc
from bot.campaign.attempts import ensure_attempt
from bot.campaign.local_loop import weak_start
from bot.forge.markers import decode_meta, with_meta
from bot.forge.trusted_meta import META_KEY_ENV, MetaKeyError, meta_key, read_meta, write_meta
from bot.review.publish import publish_results

DEF = "gdn_decode_qk4_v8_d128_k_last"
KEY = "s3cret-" * 6


@pytest.fixture
def signed(monkeypatch):
    monkeypatch.setenv(META_KEY_ENV, KEY)


def signed_candidate(forge, node="n1", body_meta=None, **extra):
    meta = candidate_meta(DEF, node, **extra)
    branch = f"kbot/{DEF}/{node}"
    forge.commit_files(branch, forge.branches["main"], {meta["solution_path"]: "{}"}, "c")
    return forge.open_pr(branch, "c", write_meta("Candidate.", body_meta or meta, branch))


def first():
    return good(baseline=None, baseline_hash=None, definition=DEF)


def test_signed_candidate_is_read_and_promoted(signed):
    forge = MemForge()
    pr = signed_candidate(forge)
    assert "sha256=" in pr.body and read_meta(pr, forge.info.bot_login)["definition"] == DEF
    publish_results(forge, pr.number, pr.head_sha, report=first())
    assert forge.get_pr(pr.number).merged


def test_unsigned_or_edited_block_is_not_trusted(signed):
    forge = MemForge()
    pr = signed_candidate(forge)
    meta = decode_meta(pr.body)
    forge.update_pr(pr.number, body=with_meta("Candidate.", {**meta, "rounds": 99}))  # edited, no valid signature
    pr = forge.get_pr(pr.number)
    assert decode_meta(pr.body)["rounds"] == 99 and read_meta(pr, forge.info.bot_login) is None
    out = publish_results(forge, pr.number, pr.head_sha, report=first())
    assert not forge.get_pr(pr.number).merged and out.decision.action == "reject"


def test_block_copied_from_another_pr_is_not_trusted(signed):
    forge = MemForge()
    a = signed_candidate(forge, "n1")
    b = signed_candidate(forge, "n2")
    forge.update_pr(b.number, body=a.body)  # a valid signature, but for another head branch
    assert read_meta(forge.get_pr(b.number), forge.info.bot_login) is None


def test_edited_rounds_do_not_continue_the_campaign(signed, monkeypatch):
    calls = []
    monkeypatch.setattr(gc, "read_snapshot", lambda *a, **k: type("S", (), {"round_prs": lambda self, c, r: []})())
    monkeypatch.setattr(gc, "campaign", lambda request, **k: calls.append(request) or ["opened"])
    forge = MemForge()
    issue = forge.add_issue()
    round_meta = dict(campaign="c", round=1, rounds=1, candidates=1, thread=issue)
    pr = signed_candidate(forge, body_meta=candidate_meta(DEF, "n1", **round_meta))
    assert gc.continue_after_results(forge, pr.number) == []  # 1 of 1 rounds: done
    forge.update_pr(pr.number, body=with_meta("x", candidate_meta(DEF, "n1", **{**round_meta, "rounds": 3})))
    assert gc.continue_after_results(forge, pr.number) == [] and calls == []


def test_attempts_sign_the_block(signed):
    forge = MemForge()
    sol = weak_start("rmsnorm_h4096")
    att = ensure_attempt(forge, sol, node="abc123", meta={"definition": sol.definition, "node": "abc123"}, body="b")
    assert read_meta(att.pr, forge.info.bot_login)["solution_path"] == att.solution_path


def test_no_key_means_unsigned_and_short_keys_are_refused(monkeypatch):
    monkeypatch.delenv(META_KEY_ENV, raising=False)
    assert meta_key() is None
    assert "sha256=" not in write_meta("b", {"a": 1}, "kbot/x/y")
    monkeypatch.setenv(META_KEY_ENV, "short")
    with pytest.raises(MetaKeyError):
        meta_key()
