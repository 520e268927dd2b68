"""The campaign API: budgets and stop rules, crash and resume, records -> tree, memory, the offline agent
on a real tunable Triton rmsnorm with a latency table."""

from __future__ import annotations

import json
import math
import random

import pytest
from landscapes import DEFINITION, MoveAgent, landscape_evaluator, state_of, state_solution

from bot.agents.base import Agent, Proposal
from bot.agents.calllog import CallRecord
from bot.agents.providers.offline import OfflineAgent, load_seeds
from bot.agents.tunables import configuration, solution_tunables
from bot.controller.budget import Budget, Usage, converged, exceeded
from bot.controller.campaign import Campaign, CampaignConfig, CampaignError
from bot.controller.memory import SearchMemory
from bot.controller.tree import ROOT, SearchConfig, Tree
from harness.schema import parse_definition
from tests.controller.synthetic import FunctionEvaluator, LatencyTable, TableEvaluator, canonical


def smooth(state: str) -> float:
    return 1.0 + 0.02 * len(state) + 0.003 * sum(ord(c) - ord("A") for c in state)


def start(tmp_path, speedup=smooth, agent=None, name="c", **cfg):
    config = {"fsync": False, **cfg}
    config.setdefault("budget", {})
    config["budget"] = {"max_candidates": 20, "patience": None, **config["budget"]}
    return Campaign.start(DEFINITION, [state_solution("")], agent or MoveAgent("ABC"), landscape_evaluator(speedup),
                          config, tmp_path / name)


# -- budgets and stop rules ---------------------------------------------------------------------------


def test_candidate_budget_stops_exactly(tmp_path):
    camp = start(tmp_path, budget={"max_candidates": 12})
    results = camp.run()
    assert results[-1].stopped and "candidate budget" in results[-1].reason
    assert len(camp.tree) == 12 == len(camp.evaluator.calls)


def test_step_budget_and_eval_seconds_budget(tmp_path):
    camp = start(tmp_path, name="a", budget={"max_steps": 5})
    assert len([r for r in camp.run() if not r.stopped]) == 5
    camp = start(tmp_path, name="b", budget={"max_eval_seconds": 3.5})  # 1 s per evaluation (synthetic)
    r = camp.run()[-1]
    assert "evaluation time" in r.reason and camp.usage.eval_seconds == 4.0


class PricedAgent(MoveAgent):
    """Moves that cost tokens and money, as a model-backed agent's would."""

    def propose(self, ctx, n):
        out = super().propose(ctx, n)
        for p in out:
            p.calls.append(CallRecord(provider="fake", model="m", prompt_hash="h" * 64, system="", messages=[],
                                      response="r", response_hash="x", tokens_in=1000, tokens_out=500, cost_usd=0.01))
        return out


def test_token_and_money_budgets(tmp_path):
    camp = start(tmp_path, name="t", agent=PricedAgent("ABC"), budget={"max_tokens": 4000})
    assert "token budget" in camp.run()[-1].reason and camp.usage.tokens_in + camp.usage.tokens_out == 4500
    camp = start(tmp_path, name="m", agent=PricedAgent("ABC"), budget={"max_cost_usd": 0.025})
    assert "money budget" in camp.run()[-1].reason and camp.usage.cost_usd == pytest.approx(0.03)


def test_roofline_stop(tmp_path):
    def fn(sol):
        s = smooth(state_of(sol))
        return [{"axes": {"n": 1}, "latency_ms": 1.0 / s, "reference_ms": 1.0, "floor_ms": 1.0 / 1.1}]

    camp = Campaign.start(DEFINITION, [state_solution("")], MoveAgent("ABC"), FunctionEvaluator(fn),
                          {"fsync": False, "budget": {"max_candidates": 50, "patience": None}}, tmp_path / "r")
    r = camp.run()[-1]
    assert "roofline" in r.reason
    best = camp.tree.best()
    assert best.summary["roofline_fraction_min"] >= 0.95 and len(camp.tree) < 50


def test_patience_stop_when_nothing_improves(tmp_path):
    camp = start(tmp_path, speedup=lambda s: 1.0, budget={"max_candidates": 100, "patience": 4})
    r = camp.run()[-1]
    assert "plateau" in r.reason and len(camp.tree) <= 7


def test_budget_rules_directly():
    b = Budget(max_candidates=None, patience=3, min_gain=0.05, roofline_target=0.9)
    assert exceeded(b, Usage()) is None
    rewards = [0.0, 0.01, -1.0, 0.03]  # three candidates after the start, best 1.03x over it: no gain beyond 5%
    assert "plateau" in converged(b, rewards, None)
    assert converged(b, rewards[:3], None) is None  # not yet `patience` candidates after a first one
    assert converged(b, rewards + [0.2], None) is None  # 1.22x over the best before the last three
    assert converged(b, [0.0, 0.3, -1.0, -1.0, 0.31], None) is not None  # failures count as candidates
    assert converged(b, [-1.0, 0.0, 0.3, 0.3], None) is None  # 0.3 came within the last three
    assert "speed of light" in converged(b, rewards + [0.2], 0.91)
    assert converged(b, rewards + [0.2], 0.89) is None
    with pytest.raises(ValueError, match="unknown budget settings"):
        Budget.from_dict({"max_dollars": 3})
    with pytest.raises(ValueError, match="unknown search settings"):
        SearchConfig.from_dict({"c": 1})
    with pytest.raises(ValueError, match="policy"):
        SearchConfig(policy="beam")
    with pytest.raises(ValueError, match="unknown campaign settings"):
        CampaignConfig.from_dict({"budgets": {}})


# -- crash and resume ---------------------------------------------------------------------------------


class Crash(Exception):
    pass


def crashing_evaluator(speedup, crash_at: int):
    ev = landscape_evaluator(speedup)
    inner = ev.fn

    def fn(sol):
        if len(ev.calls) == crash_at:
            raise Crash("power cut")
        return inner(sol)

    ev.fn = fn
    return ev


def test_resume_after_a_crash_loses_nothing_and_duplicates_nothing(tmp_path):
    store = tmp_path / "c"
    cfg = {"fsync": False, "budget": {"max_candidates": 25, "patience": None}, "proposals_per_step": 2}
    ev1 = crashing_evaluator(smooth, crash_at=9)
    camp = Campaign.start(DEFINITION, [state_solution("")], MoveAgent("ABCD"), ev1, cfg, store)
    with pytest.raises(Crash):
        camp.run()
    finished_before = {n.solution.content_hash() for n in camp.tree.nodes.values() if n.status == "evaluated" and n.id != ROOT}
    pending_before = [n.id for n in camp.tree.pending()]
    assert len(finished_before) == 8 and pending_before  # the 9th was proposed (on disk) but not evaluated

    steps_before = camp.usage.steps
    ev2 = landscape_evaluator(smooth)
    resumed = Campaign.resume(store, MoveAgent("ABCD"), ev2)
    # The pending node was evaluated on resume, first; nothing finished was evaluated again.
    assert ev2.calls[: len(pending_before)] == [resumed.tree.nodes[i].solution.content_hash() for i in pending_before]
    # ... and its step ended, as in an uninterrupted run (the agent's seed is derived from the count)
    assert resumed.usage.steps == steps_before + 1
    assert not finished_before & set(ev2.calls)
    resumed.run()
    all_calls = [c for c in ev1.calls[:8]] + ev2.calls
    assert len(all_calls) == len(set(all_calls)) == 25 == len(resumed.tree)
    # Same nodes on disk as in memory, and the memory knows every configuration.
    assert len(list((store / "nodes").glob("*.json"))) == 25
    mem = SearchMemory.load(DEFINITION.name, store / "memory.json")
    # every proposal (the toy seed declares no tunables, so it has no configuration key)
    assert len(mem.tried) == 24 and all(v["status"] != "pending" for v in mem.tried.values())


def test_a_moved_workspace_resumes_with_its_memory_where_it_now_is(tmp_path):
    """A relative memory_path is relative to the store: a workspace carried to another machine (another
    folder) resumes with the memory it brought, and writes there, not at the old absolute path."""
    import shutil

    ws = tmp_path / "old"
    cfg = {"fsync": False, "budget": {"max_candidates": 6, "patience": None}, "memory_path": "../memory/def.json"}
    store = ws / "campaigns" / "c"
    camp = Campaign.start(DEFINITION, [state_solution("")], MoveAgent("ABC"), crashing_evaluator(smooth, crash_at=4), cfg, store)
    with pytest.raises(Crash):
        camp.run()
    assert (ws / "campaigns" / "memory" / "def.json").is_file()
    shutil.move(str(ws), str(tmp_path / "new"))
    resumed = Campaign.resume(tmp_path / "new" / "campaigns" / "c", MoveAgent("ABC"), landscape_evaluator(smooth))
    resumed.run()
    mem = SearchMemory.load(DEFINITION.name, tmp_path / "new" / "campaigns" / "memory" / "def.json")
    assert len(mem.tried) == 5 and not ws.exists()


def test_resume_of_a_finished_campaign_evaluates_nothing(tmp_path):
    camp = start(tmp_path, budget={"max_candidates": 10})
    camp.run()
    ev = landscape_evaluator(smooth)
    again = Campaign.resume(tmp_path / "c", MoveAgent("ABC"), ev)
    assert ev.calls == [] and again.step().stopped
    assert again.report()["best"] == camp.report()["best"]


def test_start_refuses_an_existing_campaign_and_resume_needs_one(tmp_path):
    start(tmp_path)
    with pytest.raises(CampaignError, match="already holds a campaign"):
        start(tmp_path)
    with pytest.raises(CampaignError, match="nothing to resume"):
        Campaign.resume(tmp_path / "nothing", MoveAgent(), landscape_evaluator(smooth))


# -- records ------------------------------------------------------------------------------------------


def test_tree_is_rebuilt_from_records_alone(tmp_path):
    def f(s):
        return None if s.endswith("C") else smooth(s)  # some failures, some repairs

    camp = start(tmp_path, speedup=f, budget={"max_candidates": 30})
    camp.run()
    records = json.loads(json.dumps(camp.records()))  # what a PR body would carry
    random.Random(1).shuffle(records)
    tree = Tree.from_records(records, camp.config.search)
    assert tree.stats() == camp.tree.stats()
    assert tree.best().id == camp.tree.best().id
    for nid, n in camp.tree.nodes.items():
        m = tree.nodes[nid]
        assert (m.parent, sorted(m.children), m.visits, m.status) == (n.parent, sorted(n.children), n.visits, n.status)
        assert math.isclose(m.value_max, n.value_max) and math.isclose(m.value_sum, n.value_sum)
    # "The agent had nothing new here" is campaign state, not a node record: a rebuilt tree re-learns it
    # (one empty expansion per such node). With it copied over, selection agrees.
    for nid, n in camp.tree.nodes.items():
        tree.nodes[nid].exhausted = n.exhausted
    assert tree.select(random.Random(0)).id == camp.tree.select(random.Random(0)).id
    for r in records:
        assert {"node_id", "parent_id", "solution", "agent", "model", "prompt_hash", "summary"} <= set(r)


def test_compact_records_without_solutions_rebuild_the_same_tree(tmp_path):
    camp = start(tmp_path, speedup=lambda s: None if s.endswith("C") else smooth(s), budget={"max_candidates": 15})
    camp.run()
    compact = json.loads(json.dumps(camp.records(include_solution=False)))
    assert all(r["solution"] is None for r in compact)
    assert len(json.dumps(compact)) < len(json.dumps(camp.records()))
    tree = Tree.from_records(compact, camp.config.search)
    assert tree.stats() == camp.tree.stats() and tree.best().id == camp.tree.best().id
    for nid, n in camp.tree.nodes.items():
        assert math.isclose(tree.nodes[nid].value_max, n.value_max) and tree.nodes[nid].visits == n.visits


def test_from_records_rejects_broken_records(tmp_path):
    camp = start(tmp_path, budget={"max_candidates": 5})
    camp.run()
    recs = camp.records()
    child = next(r for r in recs if r["parent_id"])
    with pytest.raises(ValueError, match="parents that are not in the records"):
        Tree.from_records([r for r in recs if r["node_id"] != child["parent_id"]])
    with pytest.raises(ValueError, match="does not match its solution"):
        Tree.from_records([{**recs[0], "node_id": "0123456789ab"}])
    with pytest.raises(ValueError, match="two records"):
        Tree.from_records([recs[0], recs[0]])
    with pytest.raises(ValueError, match="failure reason"):
        Tree.from_records([{"node_id": "x1", "parent_id": None, "solution": None, "status": "failed"}])


# -- memory -------------------------------------------------------------------------------------------


class FixingAgent(Agent):
    """First a broken candidate, then (in debug mode) its fix."""

    name = "fixer"

    def propose(self, ctx, n):
        st = state_of(ctx.parent)
        if ctx.mode.value == "debug":
            assert ctx.error is not None and "synthetic failure" in ctx.error.message
            return [Proposal(solution=state_solution(st + "F"), rationale="fixed the mask on the ragged tail", agent=self.name)]
        if st == "":
            return [Proposal(solution=state_solution("X"), rationale="unmasked loads", agent=self.name)]
        return []


def test_memory_records_error_fix_pairs_and_feeds_prompts(tmp_path):
    camp = Campaign.start(DEFINITION, [state_solution("")], FixingAgent(),
                          landscape_evaluator(lambda s: None if s == "X" else 1.2),
                          {"fsync": False, "budget": {"max_candidates": 3, "patience": None}}, tmp_path / "m")
    camp.run()
    mem = SearchMemory.load(DEFINITION.name, tmp_path / "m" / "memory.json")
    [fix] = mem.fixes
    assert "synthetic failure" in fix["error"] and fix["fix"] == "fixed the mask on the ragged tail"
    view = mem.prompt_view()
    assert view["fixes"] == [fix] and view["failures"][0]["status"] == "COMPILE_ERROR"
    with pytest.raises(ValueError, match="not 'other'"):
        SearchMemory.load("other", tmp_path / "m" / "memory.json")


# -- the offline agent on a real tunable Triton rmsnorm ---------------------------------------------------

RMS = parse_definition({
    "name": "rmsnorm_h4096", "op_type": "rmsnorm",
    "axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": 4096}},
    "inputs": {"hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"},
               "weight": {"shape": ["hidden_size"], "dtype": "bfloat16"}},
    "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"}},
    "reference": "def run(hidden_states, weight):\n    return hidden_states\n",
})


def synthetic_table(seed_solution) -> LatencyTable:
    """A made-up latency surface over the seed's real tunable space (best: ROWS=2, NUM_WARPS=4)."""
    ts = solution_tunables(seed_solution)
    rows = []
    for rows_v in ts[0].options:
        for warps in ts[1].options:
            cfg = {"ROWS": rows_v, "NUM_WARPS": warps}
            if warps == 32 and rows_v == 8:
                rows.append({"config": cfg, "latency_ms": None, "error": "out of resources"})
                continue
            base = 0.010 * (1 + 0.15 * abs(math.log2(warps) - 2) + 0.1 * abs(math.log2(rows_v) - 1))
            rows.append({"config": cfg, "latency_ms": [base, base * 40]})
    return LatencyTable({"workloads": [{"batch_size": 1}, {"batch_size": 4096}], "reference_ms": [0.05, 1.0], "configs": rows})


def test_offline_agent_campaign_finds_the_table_optimum(tmp_path):
    seed = next(s for s in load_seeds("rmsnorm_h4096") if s.name.endswith("single_pass"))
    table = synthetic_table(seed)
    ev = TableEvaluator(table)
    camp = Campaign.start(RMS, [seed], OfflineAgent({"use_seeds": False}), ev,
                          {"fsync": False, "budget": {"max_candidates": 24, "patience": None}}, tmp_path / "o")
    camp.run()
    best = camp.tree.best()
    assert configuration(solution_tunables(best.solution)) == {"ROWS": 2, "NUM_WARPS": 4}
    assert canonical({"ROWS": 2, "NUM_WARPS": 4}) == table.best()[0]
    assert len(ev.calls) == len(set(ev.calls))
    # The failing configuration, if visited, is a failed node, never the best.
    for n in camp.tree.nodes.values():
        if n.solution is not None and n.id != ROOT and configuration(solution_tunables(n.solution)) == {"ROWS": 8, "NUM_WARPS": 32}:
            assert not n.passed
    rep = camp.report()
    assert rep["best"]["node"] == best.id and rep["budget"]["used"]["candidates"] == len(camp.tree)
    assert rep["history"][0]["node"] == camp.tree.baseline.id


def test_propose_then_record_reports_measured_elsewhere(tmp_path):
    """The bot's path: propose (PRs opened), reports arrive later, in any order."""
    ev = landscape_evaluator(smooth)
    camp = Campaign.start(DEFINITION, [state_solution("")], MoveAgent("ABC"), ev,
                          {"fsync": False, "proposals_per_step": 2, "budget": {"max_candidates": 9, "patience": None}},
                          tmp_path / "b")
    [seed] = camp.pending()
    camp.record_report(seed.id, ev.evaluate(seed.solution, None))
    r = camp.propose_next()
    assert len(r.new_nodes) == 2 and not r.evaluated
    assert {n.id for n in camp.pending()} == set(r.new_nodes)
    base = camp.tree.baseline.solution
    for nid in reversed(r.new_nodes):
        camp.record_report(nid, ev.evaluate(camp.tree.nodes[nid].solution, base))
    assert not camp.pending() and camp.usage.steps == 2
    with pytest.raises(CampaignError, match="never re-evaluated"):
        camp.record_report(r.new_nodes[0], ev.evaluate(camp.tree.nodes[r.new_nodes[0]].solution, base))
    r2 = camp.propose_next()
    with pytest.raises(CampaignError, match="report is for solution"):
        camp.record_report(r2.new_nodes[0], ev.evaluate(seed.solution, None))
    # A resume finds the pending ones and evaluates them.
    again = Campaign.resume(tmp_path / "b", MoveAgent("ABC"), landscape_evaluator(smooth))
    assert not again.pending() and len(again.tree) == 5


def test_memory_learns_facts_from_errors():
    mem = SearchMemory("d")
    msg = "OutOfResources: out of resource: shared memory, Required: 262144, Hardware limit: 232448."
    mem.note_result("n1", None, "k1", "BLOCK 256x256, 4 stages", "RUNTIME_ERROR", None, error={"message": msg})
    mem.note_result("n2", None, "k2", "tl.fancy", "COMPILE_ERROR", None,
                    error={"message": "AttributeError: module 'triton.language' has no attribute 'fancy'"})
    mem.note_result("n3", None, "k3", "same again", "RUNTIME_ERROR", None, error={"message": msg})
    assert mem.facts == [
        "shared memory per block is limited to 232448 bytes (a configuration needing 262144 failed to launch)",
        "triton.language.fancy does not exist in the installed version",
    ]


def test_campaign_from_records_continues_the_search(tmp_path):
    """The bot's recovery path: only the records (from PRs) survive; the campaign continues from them."""
    camp = start(tmp_path, name="orig", budget={"max_candidates": 8})
    camp.run()
    records = json.loads(json.dumps(camp.records()))
    random.Random(3).shuffle(records)
    ev = landscape_evaluator(smooth)
    cfg = {"fsync": False, "budget": {"max_candidates": 14, "patience": None}}
    again = Campaign.from_records(records, DEFINITION, MoveAgent("ABC"), ev, cfg, tmp_path / "restored")
    assert len(again.tree) == 8 and ev.calls == []  # nothing re-evaluated
    assert again.tree.best().id == camp.tree.best().id
    again.run()
    assert len(again.tree) == 14 and len(ev.calls) == 6
    old = {r["node_id"] for r in records}
    assert not old & {h for h in ev.calls}  # content hashes of new evaluations are new kernels
    # Compact records: the nodes are there, but cannot be expanded without their code.
    compact = Campaign.from_records(camp.records(include_solution=False), DEFINITION, MoveAgent("ABC"),
                                    landscape_evaluator(smooth), cfg, tmp_path / "compact")
    picked = compact.tree.select()
    assert picked is None or picked.id == ROOT  # only a fresh start is possible: no node has code
    assert all(n.exhausted for n in compact.tree.nodes.values() if n.id != ROOT)
    with pytest.raises(CampaignError, match="already holds"):
        Campaign.from_records(records, DEFINITION, MoveAgent(), ev, cfg, tmp_path / "restored")
