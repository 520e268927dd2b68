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
from eventkit import comment_event, example
from reportkit import good, report, workload

from bot.app import WebhookApp, Worker, sign
from bot.auth import RateLimiter
from bot.commands.events import EventRouter
from bot.commands.services import ForgeServices
from bot.forge.github import GitHubForge
from bot.forge.markers import REVIEW_MARKER, decode_meta, with_meta
from bot.policy import POLICY_PATH
from bot.promotion import PROMOTION_PATH
from bot.queue import JobQueue

DEF = "gdn_decode_qk4_v8_d128_k_last"
SECRET = b"e2e-secret"
CHAMP_HASH = "b" * 64


class Generator:
    """Candidate PRs the way the controller opens them (idempotent by branch name)."""

    def __init__(self, forge):
        self.forge = forge
        self.calls = 0

    def __call__(self, req):
        self.calls += 1
        prs = []
        for i in range(req.candidates):
            branch = f"kbot/{req.definition}/n{i}"
            pr = self.forge.find_open_pr(branch)
            if pr is None:
                if self.forge.branch_head(branch) is None:
                    _, base = self.forge.default_head()
                    sol = {"name": f"cand_{i}", "definition": req.definition}
                    self.forge.commit_files(branch, base, {f"kernels/{req.definition}/solutions/cand_{i}.json":
                                                           json.dumps(sol)}, f"kbot: candidate n{i}")
                meta = {"definition": req.definition, "node": f"n{i}", "solution": f"cand_{i}",
                        "solution_hash": f"{i}" * 64, "agent": req.agent}
                pr = self.forge.open_pr(branch, f"kbot: {req.definition} candidate n{i}",
                                        with_meta(f"Candidate n{i} for `{req.definition}`.", meta))
            prs.append(pr.number)
        return prs


class Env:
    def __init__(self, server, shared, tmp_path, repo_root):
        self.server, self.shared = server, shared
        server.set_permission("alice", "write")
        server.add_user("alice")
        server.push_commit("main", {POLICY_PATH: (repo_root / POLICY_PATH).read_text(),
                                    PROMOTION_PATH: (repo_root / PROMOTION_PATH).read_text(),
                                    f"kernels/{DEF}/champion.json": json.dumps(
                                        {"definition": DEF, "solution": "champ_v1", "solution_hash": CHAMP_HASH,
                                         "pr": None, "history": []})},
                           author=server.maintainer, message="policy and first champion")
        self.forge = GitHubForge(server.full_name, token=server.bot_token, base_url=server.base_url,
                                 seconds_between_requests=None, seconds_between_writes=None, sleep=lambda s: None,
                                 backoff=0.0)
        self.generator = Generator(self.forge)
        self.queue = JobQueue(tmp_path / "queue.sqlite3")
        self.app = WebhookApp(self.queue, [SECRET])
        self.results: dict[str, object] = {}  # head sha -> Report the "bench" produced
        router = EventRouter(lambda p: self.forge, lambda f: ForgeServices(f, self.generator),
                             RateLimiter(tmp_path / "rate.sqlite3"), self.fetch)
        self.worker = Worker(self.queue, router.handle, lease_seconds=60)
        self.n = 0

    def fetch(self, forge, run, dest):
        rep = self.results.get(run["head_sha"])
        if rep is None:
            return False
        rep.dump(dest / "report.json")
        return True

    def deliver(self, event, payload, *, delivery=None, secret=SECRET):
        self.n += 1
        body = json.dumps(payload).encode()
        resp = self.app.handle("POST", "/webhook", {
            "X-GitHub-Event": event, "X-GitHub-Delivery": delivery or f"delivery-{self.n}",
            "Content-Type": "application/json", "X-Hub-Signature-256": sign(secret, body)}, body)
        while self.worker.run_once():
            pass
        return resp

    def comment(self, number, body, author="alice", association="MEMBER"):
        c = self.server.add_comment(number, body, author=author)
        payload = comment_event(self.shared, body=body, login=author, number=number, comment_id=c["id"],
                                repo=self.server.full_name, is_pr=self.server.issues[number]["is_pull"],
                                association=association)
        return c, payload

    def bench_done(self, pr_number, rep):
        pr = self.forge.get_pr(pr_number)
        self.results[pr.head_sha] = rep
        p = example(self.shared, "workflow_run", "completed")
        run = p["workflow_run"]
        run.update(event="pull_request", path=".github/workflows/bench.yml", head_branch=pr.head_branch,
                   head_sha=pr.head_sha, conclusion="success", html_url=f"https://github.com/{self.server.full_name}/actions/runs/1")
        run["head_repository"]["full_name"] = self.server.full_name
        p["repository"]["full_name"] = self.server.full_name
        return self.deliver("workflow_run", p)

    def pulls(self):
        return sorted(n for n, i in self.server.issues.items() if i["is_pull"])

    def bot_comments(self, number):
        return [c for c in self.server.comments_on(number) if c["user"]["login"] == self.server.bot_login]

    def reactions(self, comment):
        return [r["content"] for r in self.server.comments[comment["id"]]["reactions"]]


@pytest.fixture
def env(github_server, shared, tmp_path, repo):
    return Env(github_server, shared, tmp_path, repo)


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
    from bot.review import publish_results
    publish_results(env.forge, pr, env.forge.get_pr(pr).head_sha, reports=[rep], promote=False)
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
