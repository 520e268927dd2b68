"""The search on synthetic reward landscapes: UCT vs greedy, widening, asymmetric branching, pruning."""

from __future__ import annotations

import math
import statistics

import pytest
from landscapes import DEFINITION, MoveAgent, deceptive_speedup, landscape_evaluator, state_of, state_solution

from bot.controller.campaign import Campaign
from bot.controller.tree import EVALUATED, ROOT, Node, SearchConfig, Tree

SEEDS = range(5)


def run_campaign(tmp_path, speedup, policy="uct", budget=30, moves="LR", seed=0, search=None, shuffle=True, **budget_kw):
    cfg = {"search": {"policy": policy, **(search or {})}, "fsync": False,
           "budget": {"max_candidates": budget, "patience": None, **budget_kw}, "seed": seed}
    camp = Campaign.start(DEFINITION, [state_solution("")], MoveAgent(moves, seed=seed, shuffle=shuffle),
                          landscape_evaluator(speedup), cfg, tmp_path / f"{policy}-{seed}")
    results = camp.run()
    return camp, results


def test_mcts_beats_greedy_on_a_deceptive_landscape(tmp_path):
    best = {"uct": [], "greedy": []}
    for policy in best:
        for seed in SEEDS if policy == "uct" else range(3):
            camp, _ = run_campaign(tmp_path, lambda s, seed=seed: deceptive_speedup(s, seed), policy, seed=seed)
            best[policy].append(camp.report()["best"]["speedup_vs_baseline"])
    # Greedy climbs the local optimum next to the root and never leaves it.
    assert max(best["greedy"]) < 1.4
    # UCT pays for the worse first step and finds the optimum behind it.
    assert statistics.mean(best["uct"]) > 2.5, best
    assert sum(b > 2.5 for b in best["uct"]) >= len(SEEDS) - 1, best


def smooth(state: str) -> float:
    """Every move helps a little; the tree is infinite, so nothing ever closes."""
    return 1.0 + 0.01 * len(state) + 0.001 * sum(ord(c) - ord("A") for c in state)


def test_progressive_widening_bounds_children_by_visits(tmp_path):
    """At every expansion the node has fewer children than ceil(k * N**alpha) (k for its class then)."""
    cfg = SearchConfig()
    seen: list[tuple[int, int, int]] = []  # (children before, bound, visits)

    class Watching(MoveAgent):
        def propose(self, ctx, n):
            node = camp.tree.nodes[ctx.parent_node] if ctx.parent_node else camp.tree.root
            if node.id != ROOT:
                bound = math.ceil(camp.tree.widening_k(node) * max(node.visits, 1) ** cfg.alpha)
                assert bound == camp.tree.max_children(node)
                seen.append((len(node.children), bound, node.visits))
            return super().propose(ctx, n)

    camp = Campaign.start(DEFINITION, [state_solution("")], Watching("ABCDEFGH"), landscape_evaluator(smooth),
                          {"budget": {"max_candidates": 60, "patience": None}, "fsync": False}, tmp_path / "w")
    camp.run()
    assert seen and all(before < bound for before, bound, _ in seen), seen
    # The bound, not the agent, is what stopped nodes: many nodes have fewer than the 8 possible moves.
    assert sum(1 for n in camp.tree.nodes.values() if n.id != ROOT and 0 < len(n.children) < 8) >= 5
    # The search went deep as well as wide (with 8 moves and 60 nodes, a flat search would be depth 2).
    assert camp.tree.stats()["depth"] >= 4


def test_max_children_formula_and_asymmetric_branching():
    t = Tree(SearchConfig(alpha=0.5, k_improving=2.0, k_passed=1.0, k_repair=0.5))
    seed = t.add(Node(id="s", parent=None, status=EVALUATED, is_baseline=True, summary=_summary(1.0)))
    up = t.add(Node(id="up", parent="s", status=EVALUATED, summary=_summary(1.5)))
    flat = t.add(Node(id="flat", parent="s", status=EVALUATED, summary=_summary(1.005)))
    bad = t.add(Node(id="bad", parent="s", status=EVALUATED, summary=_summary(None)))
    for n in (up, flat, bad):
        n.visits = 9
    assert t.improving(up) and not t.improving(flat) and not t.improving(bad)
    assert t.max_children(up) == math.ceil(2.0 * 3) == 6
    assert t.max_children(flat) == 3
    assert t.max_children(bad) == math.ceil(0.5 * 3) == 2
    assert seed.visits == 4


def _summary(speedup):
    if speedup is None:
        return {"passed": False, "status": "COMPILE_ERROR", "error": {"message": "boom"}, "eval_seconds": 1.0}
    return {"passed": True, "status": "PASSED", "speedup_vs_reference": speedup, "eval_seconds": 1.0}


def test_dead_end_pruning_closes_a_node_after_m_failed_children(tmp_path):
    # Everything below L fails; L itself is the best node, so greedy keeps picking it until it closes.
    def f(s):
        if s.startswith("L") and len(s) > 1:
            return None
        return {"": 1.0, "L": 1.5}.get(s, 1.1)

    camp, results = run_campaign(tmp_path, f, policy="greedy", moves="LRXYZ", budget=25, shuffle=False,
                                 search={"prune_after": 3, "max_repair_depth": 0})
    L = next(n for n in camp.tree.nodes.values() if n.solution and state_of(n.solution) == "L")
    assert camp.tree.closed(L)
    assert len(L.children) == 3  # exactly m failures, then closed
    # Once closed, never selected again.
    closed_at = max(i for i, r in enumerate(results) if r.selected == L.id)
    assert all(r.selected != L.id for r in results[closed_at + 1 :])
    assert sum(r.selected == L.id for r in results) == 3


def test_repair_depth_limits_chains_of_failures(tmp_path):
    def f(s):
        return 1.0 if s == "" else None  # nothing but the seed ever passes

    camp, _ = run_campaign(tmp_path, f, moves="AB", budget=40, search={"max_repair_depth": 2, "prune_after": 5})
    depths = [camp.tree.repair_depth(n) for n in camp.tree.nodes.values() if n.id != ROOT]
    assert max(depths) == 3  # a depth-2 failure may still get one repair attempt, no more
    assert camp.report()["stop_reason"].startswith("nothing left to expand")


def test_energy_breaks_ties_within_noise_only():
    t = Tree(SearchConfig(noise=0.02))
    t.add(Node(id="s", parent=None, status=EVALUATED, is_baseline=True, summary=_summary(1.0)))
    a = t.add(Node(id="a", parent="s", status=EVALUATED, summary={**_summary(2.00), "energy_j_per_call": 0.5}))
    b = t.add(Node(id="b", parent="s", status=EVALUATED, summary={**_summary(1.99), "energy_j_per_call": 0.3}))
    assert t.best() is b  # 0.5% slower, 40% less energy: within noise, energy decides
    c = t.add(Node(id="c", parent="s", status=EVALUATED, summary={**_summary(2.2), "energy_j_per_call": 0.9}))
    assert t.best() is c  # 10% faster: speed first
    assert a.passed


@pytest.mark.parametrize("policy", ["uct", "greedy", "random"])
def test_every_policy_never_evaluates_a_kernel_twice(tmp_path, policy):
    camp, _ = run_campaign(tmp_path, smooth, policy, moves="ABC", budget=30)
    calls = camp.evaluator.calls
    assert len(calls) == len(set(calls)) == 30


def test_exploitation_schedule():
    t = Tree(SearchConfig(stagnation=3))
    t.add(Node(id="s", parent=None, status=EVALUATED, is_baseline=True, summary=_summary(1.0)))
    t.add(Node(id="a", parent="s", status=EVALUATED, summary=_summary(1.5)))
    assert t.since_gain == 0 and t.exploit_step()
    assert t.select().id == "a"  # improving: the best node is expanded
    for i, sp in enumerate([1.2, 1.1, 1.0, 1.3, 1.2]):
        t.add(Node(id=f"b{i}", parent="a", status=EVALUATED, summary=_summary(sp)))
    assert t.since_gain == 5 and not t.exploit_step()  # stuck: odd counts explore
    t.add(Node(id="c", parent="a", status=EVALUATED, summary=_summary(1.0)))
    assert t.exploit_step()  # ... even counts exploit
    t.add(Node(id="d", parent="c", status=EVALUATED, summary=_summary(1.6)))
    assert t.since_gain == 0  # a gain beyond noise restarts the exploitation phase
    assert not Tree(SearchConfig(exploit=False)).exploit_step()
