"""End to end with the REAL harness on the CPU (Triton through its interpreter): signed `/optimize` →
candidate PR (a variant of our Triton rmsnorm) → the bench step as bench.yml does it (solution read
from the PR head, champion from main, `harness.runner.evaluate`, report + sidecar in the artifact
folder) → workflow_run → sticky review with measured numbers → promotion merge → champion pointer
and leaderboard on main.

CPU timings say nothing about GPU speed (the Triton interpreter is far slower than the torch
reference), so the policy on main here accepts a first champion at any speedup over the reference;
the paired rules are covered with constructed reports in test_bot_e2e.py / test_bot_promotion.py.
"""

from __future__ import annotations

import json

import pytest
from e2ekit import Env, real_bench

from bot.forge.markers import REVIEW_MARKER
from bot.forge.trusted_meta import write_meta
from bot.promotion.champion import read_champion
from bot.promotion.decision import PROMOTION_PATH
from harness.runner import RunConfig
from harness.schema import Solution, load_definition, load_workloads

pytestmark = pytest.mark.slow

DEF = "rmsnorm_h4096"
SEED = "kernels/rmsnorm_h4096/triton_rows/solution.json"


class TunableGenerator:
    """Candidates = the shipped Triton rmsnorm with another NUM_WARPS (what the offline agent tunes)."""

    def __init__(self, forge):
        self.forge = forge

    def __call__(self, req):
        seed = json.loads(self.forge.read_file(SEED))
        prs = []
        for warps in (4, 16)[: req.candidates]:
            sol = json.loads(json.dumps(seed))
            sol["name"] = f"rmsnorm_h4096_triton_rows_w{warps}"
            src = sol["sources"][0]
            src["content"] = src["content"].replace("NUM_WARPS = 8", f"NUM_WARPS = {warps}")
            path = f"kernels/{DEF}/triton_rows_w{warps}/solution.json"
            branch = f"kbot/{DEF}/w{warps}"
            pr = self.forge.find_open_pr(branch)
            if pr is None:
                head = self.forge.branch_head(branch)
                if head is None:
                    _, base = self.forge.default_head()
                    head = self.forge.commit_files(branch, base, {path: json.dumps(sol, indent=2)}, f"kbot: {sol['name']}")
                meta = {"definition": DEF, "node": f"w{warps}", "solution": sol["name"], "solution_path": path,
                        "solution_hash": Solution.model_validate(sol).content_hash()}
                pr = self.forge.open_pr(branch, f"kbot: {sol['name']}", write_meta("NUM_WARPS variant.", meta, branch, head_sha=head))
            prs.append(pr.number)
        return prs


def bench(repo, scratch):
    """What bench.yml's evaluate step does, in-process (e2ekit.real_bench)."""
    definition = load_definition(repo / "definitions" / DEF / "definition.json")
    workloads = load_workloads(repo / "definitions" / DEF / "workloads.small.jsonl", definition)
    return real_bench(definition, workloads, scratch, RunConfig(device="cpu", trials=1, timing={"budget_s": 0.05}, timeout_s=120))


def test_real_harness_cpu_to_leaderboard(github_server, shared, tmp_path, repo):
    permissive = (repo / PROMOTION_PATH).read_text().replace(
        "first_champion_min_speedup_vs_reference: 1.0", "first_champion_min_speedup_vs_reference: 0.0")
    env = Env(github_server, shared, tmp_path, repo, generator=TunableGenerator, fetch=bench(repo, tmp_path),
              files={PROMOTION_PATH: permissive, SEED: (repo / SEED).read_text()})
    issue = env.server.create_issue("rmsnorm", author="alice")
    _, payload = env.comment(issue, f"/optimize {DEF} --candidates 1")
    env.deliver("issue_comment", payload)
    (pr,) = env.pulls()
    head = env.forge.get_pr(pr).head_sha
    env.bench_done(pr, None)  # results come from the real harness through `fetch`

    (review,) = [r for r in env.server.reviews_on(pr) if REVIEW_MARKER in r["body"]]
    body = review["body"]
    assert "Decision: PROMOTE" in body and "3 / 3" in body and "cpu\\_monotonic" in body
    assert body.count("| PASSED |") == 3
    assert env.forge.combined_status(head).get("kbot/harness").state == "success"
    assert env.forge.get_pr(pr).merged
    champ = read_champion(env.forge, DEF)
    assert champ["solution"] == "rmsnorm_h4096_triton_rows_w4" and champ["sha"] == head
    assert champ["solution_path"] == f"kernels/{DEF}/triton_rows_w4/solution.json"
    assert env.forge.read_file(champ["solution_path"]) is not None  # the squash merge brought it to main
    board = env.forge.read_file(f"kernels/{DEF}/LEADERBOARD.md").decode()
    assert "rmsnorm\\_h4096\\_triton\\_rows\\_w4" in board and "(champion)" in board
