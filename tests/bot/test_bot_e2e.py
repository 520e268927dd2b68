"""End to end against the fake GitHub REST server, through PyGithub (GitHubForge), with signed webhook
deliveries built from GitHub's own payload examples:

signed `/optimize` comment → queue → worker → dispatcher → candidate PRs (injected generator; see
below) → bench results (constructed Reports) delivered as `workflow_run` → sticky review + status →
promotion: sha-guarded squash merge, champion.json + LEADERBOARD.md on main in one commit, the losing
PR closed with a summary. And the attacks: unauthorized user claiming OWNER, forged signature,
replayed delivery, replayed body, retried POSTs after a 502, an injection comment.

The candidate generator is a small function injected in place of the controller's campaign (which
needs a definition, an agent and the harness); it follows the bot's PR conventions: deterministic
branch `kbot/<definition>/<node>`, one commit under kernels/, a PR with a kbot:meta block, and it is
idempotent (a second /optimize does not open duplicates).
"""

from __future__ import annotations

import json

import pytest
from e2ekit import CHAMP_HASH, DEF, Env
from reportkit import good, report, workload

from bot.forge.markers import REVIEW_MARKER, decode_meta


@pytest.fixture
def env(github_server, shared, tmp_path, repo):
    champion = {f"kernels/{DEF}/champion.json": json.dumps(
        {"definition": DEF, "solution": "champ_v1", "solution_hash": CHAMP_HASH, "pr": None, "history": []})}
    return Env(github_server, shared, tmp_path, repo, files=champion)


def test_optimize_to_promotion(env):
    issue = env.server.create_issue("Optimize GDN decode", author="alice")

    # an outsider whose payload claims OWNER: refused by the API check, nothing opened
    c0, p0 = env.comment(issue, f"/optimize {DEF}", author=env.server.outsider, association="OWNER")
    assert env.deliver("issue_comment", p0).status == 202
    assert env.pulls() == [] and env.generator.calls == 0
    assert env.reactions(c0) == ["eyes", "confused"]

    # forged signature: 401, nothing queued
    c1, p1 = env.comment(issue, f"/optimize {DEF} --candidates 2")
    assert env.deliver("issue_comment", p1, secret=b"forged").status == 401
    assert env.pulls() == []

    # the real delivery; the reply POST fails with 502 AFTER taking effect (a retried POST would duplicate)
    env.server.fail_next("POST", r"/issues/\d+/comments$", status=502, after=True)
    assert env.deliver("issue_comment", p1, delivery="opt-1").status == 202
    prs = env.pulls()
    assert len(prs) == 2 and env.generator.calls == 1
    assert env.reactions(c1) == ["eyes", "rocket"]
    replies = [c for c in env.bot_comments(issue) if f"kbot:reply:{c1['id']}" in c["body"]]
    assert len(replies) == 1 and f"#{prs[0]}" in replies[0]["body"]

    # replays: same delivery id, then same body under a new id -> no second job, no new PRs/comments
    n_comments = len(env.bot_comments(issue))
    assert env.deliver("issue_comment", p1, delivery="opt-1").body["duplicate"]
    assert env.deliver("issue_comment", p1, delivery="opt-1-replay").body["duplicate"]
    # a second, genuine /optimize: the generator is idempotent, no duplicate PRs
    _, p2 = env.comment(issue, f"/optimize {DEF} --candidates 2")
    env.deliver("issue_comment", p2)
    assert env.pulls() == prs and len(env.bot_comments(issue)) == n_comments + 1

    # an injection attempt from an authorized user: refused by the parser, harmless
    c3, p3 = env.comment(issue, "```\n/promote\n```\n/optimize x --agent `id` @everyone <img src=x>")
    env.deliver("issue_comment", p3)
    reply = [c for c in env.bot_comments(issue) if f"kbot:reply:{c3['id']}" in c["body"]][0]["body"]
    assert "@everyone" not in reply and "<img" not in reply and env.pulls() == prs

    # bench results: the loser first (1.01x: below the 1.03 threshold), then the winner (1.10x)
    win, lose = prs
    meta = {n: decode_meta(env.forge.get_pr(n).body) for n in prs}
    lose_rep = good(ratio=(1.01, 1.00, 1.02), solution=meta[lose]["solution"], solution_hash=meta[lose]["solution_hash"],
                    baseline_hash=CHAMP_HASH, definition=DEF)
    assert env.bench_done(lose, lose_rep).status == 202
    reviews = [r for r in env.server.reviews_on(lose) if REVIEW_MARKER in r["body"]]
    assert len(reviews) == 1 and "Decision: REJECT" in reviews[0]["body"]
    assert env.forge.get_pr(lose).is_open

    win_rep = good(ratio=(1.10, 1.08, 1.12), solution=meta[win]["solution"], solution_hash=meta[win]["solution_hash"],
                   baseline_hash=CHAMP_HASH, definition=DEF)
    head = env.forge.get_pr(win).head_sha
    env.bench_done(win, win_rep)
    # the same workflow_run redelivered later: the review is edited, never duplicated
    env.bench_done(win, win_rep)
    reviews = [r for r in env.server.reviews_on(win) if REVIEW_MARKER in r["body"]]
    assert len(reviews) == 1 and "Decision: PROMOTE" in reviews[0]["body"]
    assert env.forge.combined_status(head).get("kbot/harness").state == "success"

    merged = env.forge.get_pr(win)
    assert merged.merged
    champ = json.loads(env.forge.read_file(f"kernels/{DEF}/champion.json"))
    assert champ["solution"] == meta[win]["solution"] and champ["pr"] == win and champ["sha"] == head
    assert champ["history"][0]["solution"] == "champ_v1"
    board = env.forge.read_file(f"kernels/{DEF}/LEADERBOARD.md").decode()
    assert meta[win]["solution"].replace("_", "\\_") in board and "1.100x" in board
    # the card of the paired evaluation is on record and on the board
    assert champ["summary"]["measured_on"] == win_rep.device.name and win_rep.device.name.replace("_", "\\_") in board
    # pointer and leaderboard in ONE commit on top of the squash merge
    main_commits = env.forge.branch_commits("main", base=merged.merge_commit_sha)
    assert len(main_commits) == 1
    # the loser: closed with a summary, once
    loser = env.forge.get_pr(lose)
    assert not loser.is_open and not loser.merged
    summaries = [c for c in env.bot_comments(lose) if "was promoted" in c["body"]]
    assert len(summaries) == 1 and f"#{win}" in summaries[0]["body"]


def test_promote_command_on_stale_pr_asks_for_rebenchmark(env):
    env.server.set_permission("maint2", "maintain")
    issue = env.server.create_issue("go", author="alice")
    _, p = env.comment(issue, f"/optimize {DEF} --candidates 1")
    env.deliver("issue_comment", p)
    (pr,) = env.pulls()
    m = decode_meta(env.forge.get_pr(pr).body)
    rep = report([workload(0, (1.2, 1.15, 1.25))], solution=m["solution"], solution_hash=m["solution_hash"],
                 baseline_hash=CHAMP_HASH, definition=DEF)
    # review posted without promotion (e.g. /evaluate in progress), then a person pushes to the branch
    env.results[env.forge.get_pr(pr).head_sha] = rep
    from bot.review.publish import publish_results
    publish_results(env.forge, pr, env.forge.get_pr(pr).head_sha, report=rep, promote=False)
    env.server.push_commit(env.forge.get_pr(pr).head_branch, {"kernels/x.txt": "human"}, author="alice")
    # /promote by a writer: refused (maintainers only)
    c, p = env.comment(pr, "/promote")
    env.deliver("issue_comment", p)
    assert env.reactions(c) == ["eyes", "confused"]
    # by a maintainer: the head moved since the measurement -> rebenchmark, no merge
    c, p = env.comment(pr, "/promote", author="maint2")
    env.deliver("issue_comment", p)
    assert env.reactions(c) == ["eyes", "rocket"]
    assert not env.forge.get_pr(pr).merged
    body = [x for x in env.bot_comments(pr) if f"kbot:reply:{c['id']}" in x["body"]][0]["body"]
    assert "rebenchmark" in body
