"""With KBOT_META_KEY set, the bot signs its meta blocks (per head branch), records in them the head it
pushed, and trusts only blocks that verify: an edited, typed or copied block gives the PR no metadata
(no promotion, no next round). The bot tests run with a key (tests/bot/conftest.py); the tests of its
absence remove it."""

from __future__ import annotations

import pytest
from candkit import bot_candidate, candidate_meta
from memforge import MemForge
from reportkit import good

import bot.campaign.github_campaign as gc
from bot.campaign.attempts import commit_message, ensure_attempt, update_attempt
from bot.campaign.local_loop import weak_start
from bot.forge.local import LocalForge
from bot.forge.markers import decode_meta, with_meta
from bot.forge.trusted_meta import META_KEY_ENV, MetaKeyError, meta_key, pushed_head, read_meta, write_meta
from bot.promotion.candidate_gate import NO_KEY, candidate_problems
from bot.review.publish import publish_results

DEF = "gdn_decode_qk4_v8_d128_k_last"


def signed_candidate(forge, node="n1", body_meta=None, **extra):
    meta = candidate_meta(DEF, node, **extra)
    branch = f"kbot/{DEF}/{node}"
    head = forge.commit_files(branch, forge.branches["main"], {meta["solution_path"]: "{}"}, "c")
    return forge.open_pr(branch, "c", write_meta("Candidate.", body_meta or meta, branch, head_sha=head))


def first():
    return good(baseline=None, baseline_hash=None, definition=DEF)


def test_signed_candidate_is_read_and_promoted():
    forge = MemForge()
    pr = signed_candidate(forge)
    meta = read_meta(pr, forge)
    assert "sha256=" in pr.body and meta["definition"] == DEF and pushed_head(meta) == pr.head_sha
    publish_results(forge, pr.number, pr.head_sha, report=first())
    assert forge.get_pr(pr.number).merged


def test_unsigned_or_edited_block_is_not_trusted():
    forge = MemForge()
    pr = signed_candidate(forge)
    meta = decode_meta(pr.body)
    forge.update_pr(pr.number, body=with_meta("Candidate.", {**meta, "rounds": 99}))  # edited, no valid signature
    pr = forge.get_pr(pr.number)
    assert decode_meta(pr.body)["rounds"] == 99 and read_meta(pr, forge) is None
    out = publish_results(forge, pr.number, pr.head_sha, report=first())
    assert not forge.get_pr(pr.number).merged and out.decision.action == "reject"


def test_block_copied_from_another_pr_is_not_trusted():
    forge = MemForge()
    a = signed_candidate(forge, "n1")
    b = signed_candidate(forge, "n2")
    forge.update_pr(b.number, body=a.body)  # a valid signature, but for another head branch
    assert read_meta(forge.get_pr(b.number), forge) is None


def test_edited_rounds_do_not_continue_the_campaign(monkeypatch):
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


def test_attempts_sign_the_block_and_record_the_pushed_head():
    forge = MemForge()
    sol = weak_start("rmsnorm_h4096")
    att = ensure_attempt(forge, sol, node="abc123", meta={"definition": sol.definition, "node": "abc123"}, body="b")
    meta = read_meta(att.pr, forge)
    assert meta["solution_path"] == att.solution_path and pushed_head(meta) == att.pr.head_sha
    assert forge.branch_head(att.branch) == att.pr.head_sha


def test_a_leftover_branch_claiming_to_be_the_bot_s_is_made_again():
    """A branch without a PR (an interrupted run, or a person posing as the bot): its commits cannot be
    proven, so the attempt starts it over from main and records only its own commit."""
    forge = MemForge()
    sol = weak_start("rmsnorm_h4096")
    branch = "kbot/rmsnorm_h4096/abc123"
    leftover = forge.commit_files(branch, forge.branches["main"], {"kernels/rmsnorm_h4096/x/evil.py": "x"}, "kbot: looks like mine")
    att = ensure_attempt(forge, sol, node="abc123", meta={"definition": sol.definition, "node": "abc123"}, body="b")
    assert att.opened and att.pr.head_sha != leftover and pushed_head(read_meta(att.pr, forge)) == att.pr.head_sha
    assert forge.read_file("kernels/rmsnorm_h4096/x/evil.py", ref=att.pr.head_sha) is None


def test_the_local_forge_keeps_its_own_key_and_records_its_own_updates(tmp_path, monkeypatch):
    """The local workspace forge is its own host: without KBOT_META_KEY it signs with a key in its store;
    merging main into a candidate (update_attempt) records the new head, a person's push is not recorded."""
    monkeypatch.delenv(META_KEY_ENV)
    forge = LocalForge(tmp_path / "forge")
    forge.commit_files("main", None, {"README.md": "x"}, "init")
    key = meta_key(forge)
    assert key and (tmp_path / "forge" / "meta.key").stat().st_mode & 0o077 == 0 and meta_key(forge) == key
    sol = weak_start("rmsnorm_h4096")
    att = ensure_attempt(forge, sol, node="abc123", body="b",
                         meta={"definition": sol.definition, "node": "abc123", "solution_hash": sol.content_hash()})
    assert "sha256=" in att.pr.body
    _, main = forge.default_head()
    forge.commit_files("main", main, {"other.md": "y"}, "main moves")
    head = update_attempt(forge, att.pr.number)
    pr = forge.get_pr(att.pr.number)
    assert head == pr.head_sha != att.pr.head_sha and pushed_head(read_meta(pr, forge)) == head
    assert not candidate_problems(forge, pr, definition=sol.definition, solution_hash=sol.content_hash())
    # a person's commit on top: not recorded, not updated, not promotable
    forge.git("update-ref", f"refs/heads/{pr.head_branch}", forge.git.out(
        "commit-tree", f"{head}^{{tree}}", "-p", head, "-m", "person",
        env={"GIT_AUTHOR_EMAIL": "kbot@kbot.invalid", "GIT_COMMITTER_EMAIL": "kbot@kbot.invalid"}))
    person = forge.get_pr(pr.number).head_sha
    assert update_attempt(forge, pr.number) == person and pushed_head(read_meta(forge.get_pr(pr.number), forge)) == head
    assert any("not the commit the bot pushed" in p for p in candidate_problems(
        forge, forge.get_pr(pr.number), definition=sol.definition, solution_hash=sol.content_hash()))


def test_no_key_means_unsigned_no_promotion_and_short_keys_are_refused(monkeypatch):
    monkeypatch.delenv(META_KEY_ENV)
    assert meta_key() is None
    assert "sha256=" not in write_meta("b", {"a": 1}, "kbot/x/y", head_sha="0" * 40)
    forge = MemForge()
    pr = bot_candidate(forge, DEF)
    assert read_meta(pr, forge) is not None  # still read: reviews and campaigns go on
    out = publish_results(forge, pr.number, pr.head_sha, report=first())
    assert out.decision.action == "reject" and not forge.get_pr(pr.number).merged
    assert NO_KEY in out.decision.headline
    assert "KBOT_META_KEY is not configured" in forge.combined_status(pr.head_sha).get("kbot/harness").description
    monkeypatch.setenv(META_KEY_ENV, "short")
    with pytest.raises(MetaKeyError):
        meta_key()


@pytest.mark.parametrize("text", [
    "faster\n\nSigned-off-by: Alice <alice@example.com>",
    "x\nCo-authored-by: Mallory <m@example.com>",
    "Fixes #12 and closes org/repo#3; see https://evil.example/x @everyone",
    "tune\r\n\r\nChange-Id: I0123\nReviewed-by: Bob <b@x>",
])
def test_model_text_in_commit_messages_carries_no_trailers(text):
    import subprocess

    msg = commit_message("kbot: cand for d", text)
    title, _, body = msg.partition("\n\n")
    assert title == "kbot: cand for d" and "\n" not in body
    trailers = subprocess.run(["git", "interpret-trailers", "--parse"], input=msg, capture_output=True, text=True, check=True).stdout
    assert trailers.strip() == ""
    assert "#12" not in body and "@everyone" not in body and "https://" not in body
