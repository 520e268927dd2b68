"""The end-to-end rig: the fake GitHub (through GitHubForge/PyGithub), the webhook app with its durable
queue and worker, signed deliveries built from GitHub's payload examples, and an injected candidate
generator that opens PRs through the bot's own attempt code (bot/campaign/attempts.py: deterministic
branches, the signed kbot:meta block recording the pushed head, idempotent)."""

from __future__ import annotations

import json

from eventkit import comment_event, example
from reportkit import bench_for_pr, stand_in

from bot.campaign.attempts import ensure_attempt
from bot.commands.auth import RateLimiter
from bot.commands.bot_policy import POLICY_PATH
from bot.commands.services import ForgeServices
from bot.forge.github import GitHubForge
from bot.forge.markers import decode_meta
from bot.intake.events import EventRouter
from bot.intake.queue import JobQueue
from bot.intake.server import JobRunner, WebhookApp, sign
from bot.promotion.decision import PROMOTION_PATH

DEF = "gdn_decode_qk4_v8_d128_k_last"
SECRET = b"e2e-secret"
CHAMPION = stand_in("champ_v1", DEF, variant="the champion on main")
CHAMP_HASH = CHAMPION.content_hash()


class Generator:
    """Candidate PRs the way the controller opens them (idempotent by branch name)."""

    def __init__(self, forge):
        self.forge = forge
        self.calls = 0

    def __call__(self, req):
        self.calls += 1
        prs = []
        for i in range(req.candidates):
            sol = stand_in(f"cand_{i}", req.definition, variant=f"candidate {i}")
            meta = {"definition": req.definition, "node": f"n{i}", "solution": f"cand_{i}",
                    "solution_hash": sol.content_hash(), "agent": req.agent}
            att = ensure_attempt(self.forge, sol, node=f"n{i}", meta=meta, body=f"Candidate n{i} for `{req.definition}`.",
                                 title=f"kbot: {req.definition} candidate n{i}", labels=())
            prs.append(att.pr.number)
        return prs


class Env:
    def __init__(self, server, shared, tmp_path, repo_root, *, files=None, fetch=None, generator=None):
        self.server, self.shared = server, shared
        server.set_permission("alice", "write")
        server.add_user("alice")
        seed = {POLICY_PATH: (repo_root / POLICY_PATH).read_text(),
                PROMOTION_PATH: (repo_root / PROMOTION_PATH).read_text()}
        seed.update(files or {})
        server.push_commit("main", seed, author=server.maintainer, message="policies (and a champion)")
        self.forge = GitHubForge(server.full_name, token=server.bot_token, base_url=server.base_url,
                                 seconds_between_requests=None, seconds_between_writes=None, sleep=lambda s: None,
                                 backoff=0.0)
        self.generator = (generator or Generator)(self.forge)
        self.queue = JobQueue(tmp_path / "queue.sqlite3")
        self.app = WebhookApp(self.queue, [SECRET])
        self.results: dict[str, object] = {}  # head sha -> Report the "bench" produced
        router = EventRouter(lambda p: self.forge, lambda f: ForgeServices(f, self.generator),
                             RateLimiter(tmp_path / "rate.sqlite3"), fetch or self.fetch)
        self.worker = JobRunner(self.queue, router.handle, lease_seconds=60)
        self.n = 0

    def fetch(self, forge, run, dest):
        """The bench artifact for the run's head: the report the test chose, laid out as bench.yml and
        the harness write it, with the solution read from the PR head."""
        from bot.campaign.submission import dispatched_target, trusted_meta
        from harness.schema import Solution

        if run.get("event") == "workflow_dispatch":  # a person's PR, benched after a maintainer's /evaluate
            target = dispatched_target(forge, run)
            if target is None:
                return False
            pr, sha = target
        else:
            pr, sha = forge.find_open_pr(run["head_branch"]), run["head_sha"]
        rep = self.results.get(run["head_sha"])  # what the test's "bench" produced for this run
        if rep is None or pr is None:
            return False
        meta = trusted_meta(forge, pr)
        sol = Solution.model_validate_json(forge.read_file(meta["solution_path"], ref=sha))
        bench_for_pr(dest, forge, pr, rep, solution=sol,
                     baseline=CHAMPION if rep.baseline_hash == CHAMP_HASH else None)
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


def real_bench(definition, workloads, scratch, cfg):
    """A results fetcher that does what bench.yml's evaluate and upload steps do, in-process: the PR's
    solution (meta ``solution_path`` at the measured head), the champion on main as the paired baseline,
    the real harness (``cfg``: a ``harness.runner.RunConfig``), then the artifact as bench.yml uploads it
    (the sidecar and the parent's files of the run folder)."""
    from bot.promotion.champion import read_champion
    from bot.review.results import write_bench_results
    from harness.runner import evaluate
    from harness.schema import parse_solution

    def fetch(forge, run, dest):
        pr = forge.find_open_pr(run["head_branch"])
        path = decode_meta(pr.body)["solution_path"]
        solution = parse_solution(json.loads(forge.read_file(path, ref=run["head_sha"])))
        champ = read_champion(forge, definition.name)
        baseline = None
        if champ and champ.get("solution_path"):
            baseline = parse_solution(json.loads(forge.read_file(champ["solution_path"])))
        out = scratch / f"run-{run['head_sha'][:12]}"
        evaluate(definition, solution, workloads, out, cfg, baseline=baseline)
        write_bench_results(dest, out, path, solution.name, artifact="kbot-results-0")
        return True

    return fetch
