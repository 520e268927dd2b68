"""Rewards are chained paired ratios: the local loop with a fake harness whose paired ratios are exact
(latency from the kernel's BLOCK) and whose reference timing is deliberately erratic, so any reward
taken from unpaired vs-reference ratios is visibly wrong. Over several promotions every node's
recorded speedup over the start must equal lat(start) / lat(node), which the chain of paired ratios
telescopes to, in the summary, in the campaign report, in the node records read back, and on the
leaderboard."""

from __future__ import annotations

import json
import math
import random

from bot.agents.tunables import configuration, solution_tunables
from bot.campaign.local_loop import Workspace, optimize
from bot.controller.tree import Tree
from bot.promotion.champion import champion_lineage, read_champion
from tests.controller.synthetic import make_report
from tests.local.test_local_loop_synthetic import SyntheticHarness, _opts


def latency(sol) -> float:
    cfg = configuration(solution_tunables(sol))
    return 4096 / cfg.get("BLOCK", 4096) + 1.0 + 0.1 * cfg.get("NUM_WARPS", 1)


class ErraticReferenceHarness(SyntheticHarness):
    """Paired ratios exact (lat(baseline) / lat(candidate) on every workload); the reference's latency
    drawn anew for each evaluation between 0.5x and 2x, as an unpaired measurement on a busy machine
    might be."""

    def __init__(self, cache: dict):
        super().__init__(cache)
        self.rng = random.Random(7)

    def evaluate(self, solution, baseline):
        key = (solution.content_hash(), baseline.content_hash() if baseline else None)
        if key in self.cache:
            self.cache_hits += 1
            return self.cache[key]
        self.runs += 1
        ref = 10.0 * self.rng.uniform(0.5, 2.0)
        ws = [{"uuid": w.uuid, "axes": dict(w.axes), "latency_ms": latency(solution) * (1 + i), "reference_ms": ref * (1 + i)}
              for i, w in enumerate(self.workloads)]
        if baseline is not None:
            for i, w in enumerate(ws):
                w["baseline_ms"] = latency(baseline) * (1 + i)
        self.cache[key] = make_report(solution, ws, baseline)
        return self.cache[key]


def test_rewards_are_the_chain_of_paired_ratios_over_several_promotions(tmp_path):
    s = optimize(_opts(tmp_path, rounds=4, candidates=2), harness=ErraticReferenceHarness({}))
    ws = Workspace(tmp_path / "ws")
    doc = read_champion(ws.forge, "rmsnorm_h4096")
    lineage = champion_lineage(doc)
    assert len(lineage) >= 3, "fewer than two promotions: the chain would have one link and prove little"
    store = ws.campaigns / "rmsnorm_h4096" / "001"
    records = [json.loads(p.read_text()) for p in sorted((store / "nodes").glob("*.json"))]
    tree = Tree.from_records(records)
    start = tree.baseline
    lat0 = latency(start.solution)
    checked = unpaired_wrong = 0
    rows = {r["node"]: r for r in s["candidates"]}
    for n in tree.nodes.values():
        if n.id == "root" or not n.passed:
            continue
        want = lat0 / latency(n.solution)
        assert math.isclose(tree.speedup(n), want, rel_tol=1e-9), (n.id, tree.speedup(n), want)
        assert math.isclose(tree.reward(n), math.log(want), rel_tol=1e-9, abs_tol=1e-12)
        assert math.isclose(rows[n.id]["speedup_vs_start"], want, rel_tol=1e-9)
        # what the old code used for a node paired against a later champion: the unpaired ratio
        unpaired = n.summary["speedup_vs_reference"] / start.summary["speedup_vs_reference"]
        unpaired_wrong += not math.isclose(unpaired, want, rel_tol=0.01)
        checked += 1
    assert checked >= 5 and unpaired_wrong >= checked - 2
    # The champion pointer's chain (what the leaderboard's "vs start" shows) agrees with the tree.
    champ_node = doc["solution_hash"][:12]
    assert math.isclose(lineage[-1]["factor"], tree.speedup(tree.nodes[champ_node]), rel_tol=1e-6)
    assert math.isclose(s["headline"]["speedup_vs_campaign_start"], lat0 / latency(tree.nodes[champ_node].solution), rel_tol=1e-6)
    links = s["headline"]["links_since_campaign_start"]
    assert len(links) == len(lineage) - 1 and math.isclose(math.prod(links), s["headline"]["speedup_vs_campaign_start"], rel_tol=1e-9)
    board = ws.forge.read_file("kernels/rmsnorm_h4096/LEADERBOARD.md").decode()
    assert f"{lineage[-1]['factor']:.3f}x" in board.splitlines()[[i for i, line in enumerate(board.splitlines()) if "(champion)" in line][0]]


def test_a_champion_promoted_outside_the_campaign_is_chained_through_the_lineage():
    """A node paired against a champion that is not in the tree (promoted by `kbot submit` while the
    campaign was stopped) gets its speedup through the pointer's lineage; without it, no speedup and
    the neutral reward, never an unpaired ratio."""

    a, b, c = "a" * 64, "b" * 64, "c" * 64

    def rec(nid, h, against, ratio, ref, base=False):
        return {"node_id": nid, "parent_id": None, "status": "evaluated", "seq": 0, "is_baseline": base,
                "summary": {"passed": True, "status": "PASSED", "solution_hash": h, "baseline_hash": against,
                            "speedup_vs_baseline": ratio, "speedup_vs_reference": ref}}

    records = [rec("a" * 12, a, None, None, 5.0, base=True), rec("c" * 12, c, b, 1.10, 50.0)]
    alone = Tree.from_records(records)
    node = alone.nodes["c" * 12]
    assert alone.speedup(node) is None and alone.reward(node) == 0.0
    assert "neither a passed node" in alone.chain_problem(node)
    lineage = {a: 2.0, b: 2.0 * 1.25}  # a over the oldest champion 2.0x; b promoted 1.25x over a
    chained = Tree.from_records(records, lineage=lineage)
    assert math.isclose(chained.speedup(chained.nodes["c" * 12]), 1.25 * 1.10)
    assert chained.chain_problem(chained.nodes["c" * 12]) is None
