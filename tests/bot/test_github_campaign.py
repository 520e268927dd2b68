"""The GitHub campaign (``bot.campaign.github_campaign``) end to end against the fake GitHub, through GitHubForge:

signed `/optimize rmsnorm_h4096 --candidates 2` → the command handler with the REAL campaign (offline
agent, tree rebuilt from the repository) → 2 PRs with meta blocks and one commit each; the same
command handled again → no new PR; one PR benchmarked with the real harness on the CPU (Triton
interpreter) against the champion, as bench.yml does → workflow_run → sticky review → promotion merge
→ champion pointer and leaderboard on main; a second `/optimize` → the tree comes back from the PRs,
the merged candidate is the parent, and the new candidates differ from the first ones.

The champion on main is the deliberately weak starting point of the local loop (the chunked seed with
BLOCK=256), so the BLOCK=512 candidate is faster even under the interpreter (half the loop trips) and
wins by the repository's real promotion policy.
"""

from __future__ import annotations

import json

import pytest
from e2ekit import Env, real_bench
from reportkit import bench_for_pr

from bot.campaign.attempts import ensure_attempt
from bot.campaign.github_campaign import bind, champion_lineage, continue_after_results, read_snapshot, summary_from_evidence
from bot.campaign.local_loop import weak_start
from bot.commands.dispatch import CommandDispatcher
from bot.commands.services import ForgeServices
from bot.forge.base import BranchTouchedByHumansError
from bot.forge.markers import REVIEW_MARKER, decode_meta
from bot.names import attempt_branch
from bot.promotion.champion import champion_path, leaderboard_path, read_champion, render_leaderboard, updated_champion
from bot.review.evidence import Evidence, WorkloadEvidence
from harness.runner import RunConfig
from harness.schema import Solution, load_definition, load_workloads, parse_solution

DEF = "rmsnorm_h4096"
START_DIR = f"kernels/{DEF}/{DEF}_start"


def seed_files(repo):
    """main: the definition (+ workloads), the skills the bot reads, and the weak starting champion."""
    files = {}
    for rel in ("definitions/rmsnorm_h4096", "skills/seeds/rmsnorm_h4096"):
        for p in sorted((repo / rel).iterdir()):
            if p.is_file():
                files[f"{rel}/{p.name}"] = p.read_text()
    start = weak_start(DEF)
    files[f"{START_DIR}/solution.json"] = start.to_json(indent=2) + "\n"
    for src in start.sources:
        files[f"{START_DIR}/{src.path}"] = src.content
    entry = {"solution": start.name, "solution_hash": start.content_hash(), "solution_path": f"{START_DIR}/solution.json",
             "pr": None, "sha": None, "merge_sha": None, "promoted_at": "2026-11-29T00:00:00Z",
             "summary": {"origin": "start", "workloads": None}}
    doc = updated_champion(None, DEF, entry)
    files[champion_path(DEF)] = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    files[leaderboard_path(DEF)] = render_leaderboard(doc)
    return files, start


def bench(repo, scratch):
    """bench.yml's evaluate step in-process (e2ekit.real_bench), on two small workloads."""
    definition = load_definition(repo / "definitions" / DEF / "definition.json")
    workloads = load_workloads(repo / "definitions" / DEF / "workloads.small.jsonl", definition)[:2]
    cfg = RunConfig(device="cpu", trials=1, timing={"budget_s": 0.05, "warmup": 1, "min_iters": 5}, timeout_s=120)
    return real_bench(definition, workloads, scratch, cfg)


def candidates(env, numbers):
    out = {}
    for n in numbers:
        pr = env.forge.get_pr(n)
        meta = decode_meta(pr.body)
        sol = parse_solution(json.loads(env.forge.read_file(meta["solution_path"], ref=pr.head_sha)))
        out[n] = (pr, meta, sol)
    return out


@pytest.mark.slow
def test_optimize_opens_real_candidates_then_iterates_on_the_winner(github_server, shared, tmp_path, repo):
    files, start = seed_files(repo)
    env = Env(github_server, shared, tmp_path, repo, files=files, fetch=bench(repo, tmp_path), generator=bind)
    start_node = start.content_hash()[:12]
    issue = env.server.create_issue("make rmsnorm faster", author="alice")

    c1, p1 = env.comment(issue, f"/optimize {DEF} --candidates 2")
    assert env.deliver("issue_comment", p1).status == 202
    first = env.pulls()
    assert len(first) == 2 and env.reactions(c1) == ["eyes", "rocket"]
    got = candidates(env, first)
    for pr, meta, sol in got.values():
        assert pr.head_branch == attempt_branch(DEF, meta["node"]) and pr.author == env.server.bot_login
        assert meta["parent"] == start_node and meta["agent"] == "offline" and meta["campaign"].startswith(f"{DEF}#{issue}-c")
        assert meta["solution_hash"] == sol.content_hash() and meta["node"] == sol.content_hash()[:12]
        assert meta["round"] == 1 and "prompt_hash" in meta and "model" in meta
        assert len(env.forge.branch_commits(pr.head_branch)) == 1
        assert "kbot:candidate" in pr.labels
    reply = [c for c in env.bot_comments(issue) if f"kbot:reply:{c1['id']}" in c["body"]][0]["body"]
    assert all(f"#{n}" in reply for n in first)

    # The same command handled again (a redelivery the queue did not catch, a retried job): no new PR.
    again = CommandDispatcher(env.forge, ForgeServices(env.forge, bind(env.forge)), None).handle_issue_comment(p1)
    assert again.status == "done" and env.pulls() == first

    # The repository's seeds at their defaults come first (the search has tried neither; the start is
    # the chunked seed at its weakest configuration). Benchmark the chunked one (BLOCK 1024, 4 warps,
    # against the start's 256 and 1) with the real harness; the review, merge and leaderboard follow.
    assert sorted("seed structure" in m["rationale"] for _, m, _ in got.values()) == [True, True], [m["rationale"] for _, m, _ in got.values()]
    (win,) = [n for n, (_, _, sol) in got.items() if "BLOCK = 1024" in sol.sources[0].content]
    env.bench_done(win, None)
    (review,) = [r for r in env.server.reviews_on(win) if REVIEW_MARKER in r["body"]]
    assert "Decision: PROMOTE" in review["body"], review["body"]
    assert env.forge.get_pr(win).merged
    champ = read_champion(env.forge, DEF)
    assert champ["pr"] == win and champ["solution_hash"] == got[win][1]["solution_hash"]
    assert champ["solution_path"] == got[win][1]["solution_path"]
    board = env.forge.read_file(f"kernels/{DEF}/LEADERBOARD.md").decode()
    assert "(champion)" in board

    # The tree as GitHub holds it now: the start seed (baseline), the merged winner above 1x, the other pending.
    snap = read_snapshot(env.forge, DEF)
    recs = {r["node_id"]: r for r in snap.records}
    win_node = got[win][1]["node"]
    assert recs[start_node]["is_baseline"] and recs[win_node]["status"] == "evaluated"
    assert recs[win_node]["summary"]["speedup_vs_baseline"] > 1.0 and recs[win_node]["solution"] is not None
    (other,) = [n for n in first if n != win]
    assert recs[got[other][1]["node"]]["status"] == "pending"

    # A second /optimize: new candidates, children of the merged winner, none seen before.
    c2, p2 = env.comment(issue, f"/optimize {DEF} --candidates 2")
    env.deliver("issue_comment", p2)
    second = [n for n in env.pulls() if n not in first]
    assert len(second) == 2 and env.reactions(c2) == ["eyes", "rocket"]
    new = candidates(env, second)
    old_nodes = {m["node"] for _, m, _ in got.values()} | {start_node}
    for _pr, meta, sol in new.values():
        assert meta["parent"] == win_node and meta["parent_pr"] == win
        assert meta["node"] not in old_nodes and meta["campaign"] != got[win][1]["campaign"]
        assert "seed structure" not in meta["rationale"]  # both seeds tried: the winner's own moves now
        assert "BLOCK = 1024" in sol.sources[0].content or "NUM_WARPS = 4 " in sol.sources[0].content  # one knob moved


def test_branch_rules_and_round_continuation(github_server, shared, tmp_path, repo):
    files, start = seed_files(repo)
    env = Env(github_server, shared, tmp_path, repo, files=files, generator=bind)
    issue = env.server.create_issue("rounds", author="alice")
    _, p = env.comment(issue, f"/optimize {DEF} --candidates 1 --rounds 2")
    env.deliver("issue_comment", p)
    (pr1,) = env.pulls()
    meta = decode_meta(env.forge.get_pr(pr1).body)
    assert meta["rounds"] == 2 and meta["round"] == 1

    # Round 2 waits for round 1's results.
    assert continue_after_results(env.forge, pr1) == []

    # A person pushes to the branch the next candidate would use: the bot never writes there.
    variant = start.model_copy(update={"sources": [s.model_copy(update={"content": s.content.replace("NUM_WARPS = 1 ", "NUM_WARPS = 4 ")})
                                                   for s in start.sources]})
    node = variant.content_hash()[:12]
    env.server.push_commit(attempt_branch(DEF, node), {"kernels/x.txt": "mine"}, author="alice")
    with pytest.raises(BranchTouchedByHumansError):
        ensure_attempt(env.forge, variant, node=node, meta={"definition": DEF, "node": node}, body="x")
    assert env.pulls() == [pr1]

    # A constructed review for round 1 (evaluated, slower): round 2 opens one more PR, once.
    from reportkit import good

    from bot.review.publish import publish_results
    rep = good(ratio=(0.9, 0.85, 0.95), solution=meta["solution"], solution_hash=meta["solution_hash"],
               baseline_hash=start.content_hash(), definition=DEF)
    publish_results(env.forge, pr1, env.forge.get_pr(pr1).head_sha, report=rep)
    round2 = continue_after_results(env.forge, pr1)
    assert len(round2) == 1
    assert [p.number for p in continue_after_results(env.forge, pr1)] == [round2[0].number]  # idempotent
    m2 = decode_meta(round2[0].body)
    assert m2["round"] == 2 and m2["campaign"] == meta["campaign"] and m2["node"] != meta["node"]
    assert env.pulls() == [pr1, round2[0].number]
    # and no third round: 2 of 2 done once round 2 has results
    assert continue_after_results(env.forge, round2[0].number) == []


def test_summary_and_lineage_frames():
    doc = {"solution_hash": "c" * 64, "summary": {"speedup_vs_previous": 1.5},
           "history": [{"solution_hash": "b" * 64, "summary": {"speedup_vs_previous": 2.0}},
                       {"solution_hash": "a" * 64, "summary": {"origin": "start"}}]}
    lin = champion_lineage(doc)
    assert [e["solution_hash"][0] for e in lin] == ["a", "b", "c"] and [e["factor"] for e in lin] == [1.0, 2.0, 3.0]
    w = [WorkloadEvidence("u1", "PASSED", 0, (1.2, 1.1, 1.3), 2.0), WorkloadEvidence("u2", "PASSED", 0, (1.2, 1.1, 1.3), 2.0)]
    s = summary_from_evidence(Evidence(DEF, "s", "d" * 64, "b" * 64, "e" * 40, 0, tuple(w)))
    assert s["passed"] and abs(s["speedup_vs_baseline"] - 1.2) < 1e-9 and s["status"] == "PASSED"
    bad = (WorkloadEvidence("u1", "INCORRECT_NUMERICAL", 2, None, None),) + tuple(w[1:])
    s = summary_from_evidence(Evidence(DEF, "s", "d" * 64, "b" * 64, None, 0, bad))
    assert not s["passed"] and s["status"] == "INCORRECT_NUMERICAL" and "u1" in s["error"]["message"]
    s = summary_from_evidence(Evidence(DEF, "s", "d" * 64, "b" * 64, None, 1, tuple(w)))
    assert not s["passed"] and s["status"] == "REJECTED"


def test_cli_uses_the_github_campaign_by_default_and_report_opens_the_next_round(github_server, shared, tmp_path, repo,
                                                                                  monkeypatch):
    """`bot command` as command.yml runs it (KBOT_CAMPAIGN unset → `--campaign ""`), then `bot report`
    as report.yml runs it: the review is posted and round 2 of `--rounds 2` opens."""
    import click
    from click.testing import CliRunner
    from reportkit import good

    import bot.cli.github_bot

    def cli():
        @click.group()
        def root() -> None:
            pass

        bot.cli.github_bot.register(root)
        return root

    files, start = seed_files(repo)
    env = Env(github_server, shared, tmp_path, repo, files=files)
    # The CLI builds its forge from the environment with GitHub's pacing; the test's forge is unpaced.
    monkeypatch.setattr(bot.cli.github_bot, "_github_forge", lambda repo_name, installation_id=None: env.forge)
    issue = env.server.create_issue("rounds from the CLI", author="alice")
    _, payload = env.comment(issue, f"/optimize {DEF} --candidates 1 --rounds 2")
    event = tmp_path / "event.json"
    event.write_text(json.dumps(payload))
    r = CliRunner().invoke(cli(), ["bot", "command", "--event-path", str(event), "--repo", env.server.full_name,
                                   "--campaign", ""])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output.strip().splitlines()[-1])["status"] == "done"
    (pr1,) = env.pulls()
    meta = decode_meta(env.forge.get_pr(pr1).body)
    assert meta["agent"] == "offline" and meta["rounds"] == 2

    head = env.forge.get_pr(pr1).head_sha
    sol = Solution.model_validate_json(env.forge.read_file(meta["solution_path"], ref=head))
    results = bench_for_pr(tmp_path / "results", env.forge, pr1, good(
        ratio=(0.95, 0.9, 1.0), solution=meta["solution"], solution_hash=meta["solution_hash"],
        baseline_hash=start.content_hash(), definition=DEF), solution=sol, baseline=start)
    r = CliRunner().invoke(cli(), ["bot", "report", "--results", str(results), "--pr", str(pr1), "--head-sha", head,
                                   "--repo", env.server.full_name])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output.strip().splitlines()[-1])
    assert out["decision"]["action"] == "reject" and len(out["next_round"]) == 1
    assert env.pulls() == [pr1, out["next_round"][0]]
    assert decode_meta(env.forge.get_pr(out["next_round"][0]).body)["round"] == 2


def test_optimize_on_a_candidate_pr_iterates_on_it(github_server, shared, tmp_path, repo):
    files, start = seed_files(repo)
    env = Env(github_server, shared, tmp_path, repo, files=files, generator=bind)
    issue = env.server.create_issue("go", author="alice")
    _, p = env.comment(issue, f"/optimize {DEF} --candidates 1")
    env.deliver("issue_comment", p)
    (pr1,) = env.pulls()
    meta = decode_meta(env.forge.get_pr(pr1).body)

    # Not evaluated yet: refused with a reason, nothing opened.
    c, p = env.comment(pr1, "/optimize")
    env.deliver("issue_comment", p)
    assert env.reactions(c) == ["eyes", "confused"] and env.pulls() == [pr1]

    from reportkit import good

    from bot.review.publish import publish_results
    rep = good(ratio=(0.97, 0.95, 0.99), solution=meta["solution"], solution_hash=meta["solution_hash"],
               baseline_hash=start.content_hash(), definition=DEF)
    publish_results(env.forge, pr1, env.forge.get_pr(pr1).head_sha, report=rep)
    # Slower than the start, so UCT would expand the start; on the PR, the PR's node is the parent.
    c, p = env.comment(pr1, "/optimize --candidates 2")
    env.deliver("issue_comment", p)
    assert env.reactions(c) == ["eyes", "rocket"]
    kids = [n for n in env.pulls() if n != pr1]
    assert len(kids) == 2
    for n in kids:
        m = decode_meta(env.forge.get_pr(n).body)
        assert m["parent"] == meta["node"] and m["parent_pr"] == pr1 and m["thread"] == pr1


def test_rewards_rebuilt_from_github_are_chained_paired_ratios():
    """The tree read back from GitHub alone: the start (a champion without a PR), PR A promoted 1.2x over
    it, PR B promoted 1.1x over A, PR C measured 1.05x over B (a loser), PR D measured 0.97x over A
    before B was promoted. Every speedup over the start is the chain through the reviews' pairings and
    the pointer's lineage; the vs-reference figures (deliberately inconsistent) play no part."""
    from candkit import bot_candidate
    from memforge import MemForge
    from reportkit import good, stand_in

    from bot.controller.campaign import Campaign
    from bot.forge.markers import REVIEW_MARKER as MARKER
    from bot.review.evidence import evidence_block

    d = "gdn_decode_qk4_v8_d128_k_last"
    sols = {k: stand_in(f"cand_{k}", d, variant=k) for k in "SABCD"}
    h = {k: s.content_hash() for k, s in sols.items()}

    def entry(k, pr, sp):
        return {"solution": sols[k].name, "solution_hash": h[k], "solution_path": None, "pr": pr, "sha": None,
                "merge_sha": None, "promoted_at": "2026-12-01T00:00:00Z",
                "summary": {"speedup_vs_previous": sp, "workloads": 4}}

    doc = updated_champion(None, d, {**entry("S", None, None), "summary": {"origin": "start"}})
    forge = MemForge(files={})
    prs = {}
    for k, against, ratio, vs_ref in (("A", "S", 1.2, 3.0), ("B", "A", 1.1, 1.0), ("C", "B", 1.05, 9.0), ("D", "A", 0.97, 2.0)):
        pr = bot_candidate(forge, d, node=h[k][:12], solution=sols[k].name, solution_hash=h[k],
                           parent=h[against][:12] if against != "S" else None)
        prs[k] = pr
        rep = good(ratio=(ratio, ratio * 0.99, ratio * 1.01), solution=sols[k].name, solution_hash=h[k],
                   baseline=sols[against].name, baseline_hash=h[against], definition=d)
        for w in rep.workloads:
            w.speedup_vs_reference = vs_ref
        forge.upsert_review(pr.number, MARKER, f"{MARKER}\nreview\n{evidence_block(rep, pr.head_sha)}", commit_sha=pr.head_sha)
        if k in "AB":
            doc = updated_champion(doc, d, entry(k, pr.number, ratio))
    _, main = forge.default_head()
    forge.commit_files("main", main, {champion_path(d): json.dumps(doc)}, "pointer")

    snap = read_snapshot(forge, d, load_solutions=False)
    from bot.agents.providers.offline import OfflineAgent

    camp = Campaign.from_records(snap.records, load_definition_for(d), OfflineAgent(), None, {"fsync": False})
    t = camp.tree
    want = {"S": 1.0, "A": 1.2, "B": 1.2 * 1.1, "C": 1.2 * 1.1 * 1.05, "D": 1.2 * 0.97}
    for k, v in want.items():
        n = t.nodes[h[k][:12]]
        assert t.speedup(n) == pytest.approx(v, rel=1e-9), (k, t.chain_problem(n))
    assert t.best().id == h["C"][:12]


def load_definition_for(name):
    from pathlib import Path

    return load_definition(Path(__file__).resolve().parents[2] / "definitions" / name / "definition.json")


def test_optimize_on_github_stops_on_a_plateau_read_from_the_prs(repo):
    """The plateau stop rule on the GitHub path, judged from the PRs alone: after `patience` evaluated
    candidates at 1.0x over the start, `/optimize` opens nothing and says why; with `stop.patience: null`
    in the policy on the default branch it opens a candidate again."""
    from candkit import bot_candidate
    from memforge import MemForge
    from reportkit import good, stand_in

    from bot.campaign.request import CampaignRefused, OptimizeRequest
    from bot.forge.markers import REVIEW_MARKER as MARKER
    from bot.promotion.decision import PromotionPolicy
    from bot.review.evidence import evidence_block

    files, start = seed_files(repo)
    files["skills/promotion.yaml"] = (repo / "skills/promotion.yaml").read_text()
    forge = MemForge(files=files)
    for i in range(PromotionPolicy().stop.patience):
        sol = stand_in(f"flat_{i}", DEF, variant=str(i))
        pr = bot_candidate(forge, DEF, node=sol.content_hash()[:12], solution=sol.name, solution_hash=sol.content_hash())
        rep = good(ratio=(1.0, 0.99, 1.01), solution=sol.name, solution_hash=sol.content_hash(), baseline=start.name,
                   baseline_hash=start.content_hash(), definition=DEF)
        forge.upsert_review(pr.number, MARKER, f"{MARKER}\n{evidence_block(rep, pr.head_sha)}", commit_sha=pr.head_sha)
    request = OptimizeRequest(definition=DEF, candidates=1, agent="offline", rounds=1, requested_by="alice", thread=1)
    before = len(list(forge.list_prs(state="all")))
    with pytest.raises(CampaignRefused, match="plateau"):
        bind(forge)(request)
    assert len(list(forge.list_prs(state="all"))) == before
    _, head = forge.default_head()
    off = files["skills/promotion.yaml"].replace("  patience: 6\n", "  patience: null\n")
    assert off != files["skills/promotion.yaml"]
    forge.commit_files("main", head, {"skills/promotion.yaml": off}, "no plateau rule")
    assert len(bind(forge)(request)) == 1


def test_optimize_on_github_stops_at_the_speed_of_light_read_from_the_reviews(repo):
    """The review's evidence block carries each workload's roofline fraction, so the speed-of-light
    rule judges the PRs too: a best candidate at >= 90% of its floor everywhere stops `/optimize`."""
    from candkit import bot_candidate
    from memforge import MemForge
    from reportkit import good, stand_in

    from bot.campaign.request import CampaignRefused, OptimizeRequest
    from bot.forge.markers import REVIEW_MARKER as MARKER
    from bot.review.evidence import evidence_block, read_evidence

    files, start = seed_files(repo)
    files["skills/promotion.yaml"] = (repo / "skills/promotion.yaml").read_text()
    forge = MemForge(files=files)
    sol = stand_in("fast", DEF, variant="fast")
    pr = bot_candidate(forge, DEF, node=sol.content_hash()[:12], solution=sol.name, solution_hash=sol.content_hash())
    rep = good(ratio=(1.2, 1.18, 1.22), solution=sol.name, solution_hash=sol.content_hash(), baseline=start.name,
               baseline_hash=start.content_hash(), definition=DEF)
    for i, w in enumerate(rep.workloads):
        w.roofline.fraction, w.roofline.floor_ms, w.roofline.bound = 0.95 - 0.01 * i, 0.01 * (i + 1), "memory"
    block = evidence_block(rep, pr.head_sha)
    ev = Evidence.from_block(read_evidence(block))
    assert ev.workloads[3].roofline == pytest.approx((0.92, 0.04, "memory"))
    s = summary_from_evidence(ev)
    assert s["roofline_fraction_largest"] == pytest.approx(0.92) and s["roofline_fraction_min"] == pytest.approx(0.92)
    forge.upsert_review(pr.number, MARKER, f"{MARKER}\n{block}", commit_sha=pr.head_sha)
    request = OptimizeRequest(definition=DEF, candidates=1, agent="offline", rounds=1, requested_by="alice", thread=1)
    with pytest.raises(CampaignRefused, match="speed of light"):
        bind(forge)(request)
