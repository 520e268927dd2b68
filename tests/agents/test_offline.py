"""The tunable convention and the offline agent on the real tunable Triton seeds in skills/seeds/."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.agents.base import AgentContext, Mode
from bot.agents.catalog import AgentError, available, create_agent, get_agent_class, register
from bot.agents.providers.offline import OfflineAgent, load_seeds
from bot.agents.tunables import TunableError, apply, config_key, config_key_or_none, configuration, find_tunables, solution_tunables, space_size, structure_hash
from bot.controller.memory import SearchMemory
from harness.report import FeedbackItem

REPO = Path(__file__).resolve().parents[2]


def seed(stem: str, definition: str = "rmsnorm_h4096"):
    [s] = [s for s in load_seeds(definition) if s.name.endswith(stem)]
    return s


def test_seeds_declare_their_tunables():
    ts = {t.key: t for t in solution_tunables(seed("single_pass"))}
    assert set(ts) == {"ROWS", "NUM_WARPS"}
    assert ts["NUM_WARPS"].options == (1, 2, 4, 8, 16, 32) and ts["NUM_WARPS"].value == 8
    assert ts["NUM_WARPS"].role == "warps" and ts["ROWS"].role == "block"
    g = {t.key: t.role for t in solution_tunables(seed("tiled", "gemm_n4096_k4096"))}
    assert g == {"BLOCK_M": "block", "BLOCK_N": "block", "BLOCK_K": "block", "GROUP_M": "group",
                 "NUM_WARPS": "warps", "NUM_STAGES": "stages"}


def test_marks_in_docstrings_are_not_tunables_and_bad_marks_are_errors():
    assert find_tunables("a.py", '"""Mark knobs with ``# kbot: tunable [1, 2]``."""\nX = 1\n') == []
    src = "f(a, num_warps=4, num_stages=2)  # kbot: tunable [2, 3] role=stages\n"
    with pytest.raises(TunableError, match="exactly one"):
        find_tunables("a.py", src)
    with pytest.raises(TunableError, match="a.py:1: current value 3 is not among"):
        find_tunables("a.py", "X = 3  # kbot: tunable [1, 2]\n")
    with pytest.raises(TunableError, match="malformed"):
        find_tunables("a.py", "X = 3  # kbot: tunable 1, 2, 3\n")
    with pytest.raises(TunableError, match="unknown role"):
        find_tunables("a.py", "X = 1  # kbot: tunable [1, 2] role=speed\n")
    [t] = find_tunables("a.py", "    kernel[grid](x, BLOCK=B, num_warps=4)  # kbot: tunable [2, 4, 8]\n")
    assert (t.name, t.value, t.role) == ("num_warps", 4, "warps")


def test_apply_rewrites_only_the_literals():
    s = seed("chunked")
    v = apply(s, {"BLOCK": 256, "NUM_WARPS": 16})
    assert configuration(solution_tunables(v)) == {"BLOCK": 256, "NUM_WARPS": 16}
    before, after = s.source("main.py").splitlines(), v.source("main.py").splitlines()
    assert sum(a != b for a, b in zip(before, after)) == 2 and len(before) == len(after)
    ast.parse(v.source("main.py"))
    with pytest.raises(TunableError, match="not among the options"):
        apply(s, {"BLOCK": 384})
    with pytest.raises(TunableError, match="no tunables named"):
        apply(s, {"BLOCK_SIZE": 256})
    # Same structure, different values: keys differ only in the configuration part.
    assert config_key(s).split(":", 1)[0] == config_key(v).split(":", 1)[0] and config_key(s) != config_key(v)


def test_offline_agent_exhausts_the_space_without_repeating(rmsnorm_def):
    agent = OfflineAgent()
    mem = SearchMemory(rmsnorm_def.name)
    ctx = AgentContext(definition=rmsnorm_def, mode=Mode.INITIAL, memory=mem)
    total = sum(space_size(solution_tunables(s)) for s in load_seeds(rmsnorm_def.name))
    keys, contents = [], set()
    for _ in range(100):
        ps = agent.propose(ctx, 7)
        if not ps:
            break
        for p in ps:
            assert p.ok and p.config_key == config_key(p.solution)
            ast.parse(p.solution.source("main.py"))
            keys.append(p.config_key)
            contents.add(p.solution.content_hash())
            mem.note_proposed(p.config_key, p.solution.content_hash()[:12])
    assert len(keys) == len(set(keys)) == len(contents) == total == 49
    # A fresh agent reading the same memory has nothing new either.
    assert OfflineAgent().propose(ctx, 5) == []


def test_offline_agent_respects_memory_across_instances(rmsnorm_def):
    parent = seed("single_pass")
    mem = SearchMemory(rmsnorm_def.name)
    ctx = AgentContext(definition=rmsnorm_def, mode=Mode.OPTIMIZE, parent=parent, memory=mem)
    first = OfflineAgent().propose(ctx, 3)
    for p in first:
        mem.note_proposed(p.config_key, "n")
    second = OfflineAgent().propose(ctx, 3)
    assert not {p.config_key for p in first} & {p.config_key for p in second}


def _first_change(parent, feedback, rmsnorm_def):
    ctx = AgentContext(definition=rmsnorm_def, mode=Mode.OPTIMIZE, parent=parent, feedback=feedback)
    [p] = OfflineAgent(use_seeds=False).propose(ctx, 1)  # the parent's moves alone (untried seeds come first)
    before = configuration(solution_tunables(parent))
    after = configuration(solution_tunables(p.solution))
    return {k: (before[k], after[k]) for k in before if before[k] != after[k]}, p.rationale


def test_feedback_orders_the_moves(rmsnorm_def):
    sp, ch = seed("single_pass"), seed("chunked")
    spill = [FeedbackItem(rule="register_spills", severity="high", title="Register spills: 512 bytes")]
    change, why = _first_change(sp, spill, rmsnorm_def)
    # More warps on the same rows: each thread holds fewer of the row's values (fewer live registers).
    assert change == {"NUM_WARPS": (8, 16)} and "registers" in why
    small_grid = [FeedbackItem(rule="grid_too_small", severity="high", title="Grid of 16 blocks for 132 SMs")]
    assert _first_change(ch, small_grid, rmsnorm_def)[0] == {"BLOCK": (1024, 512)}
    narrow = [FeedbackItem(rule="narrow_global_loads", severity="medium", title="Narrow global loads")]
    assert _first_change(ch, narrow, rmsnorm_def)[0] == {"BLOCK": (1024, 2048)}
    # Items from another source are matched by their words.
    other = [FeedbackItem(rule="x", severity="high", title="heavy local memory spill traffic")]
    assert _first_change(sp, other, rmsnorm_def)[0] == {"NUM_WARPS": (8, 16)}
    latency = [FeedbackItem(rule="stall_long_scoreboard", severity="high", title="Warps wait on global memory")]
    assert _first_change(sp, latency, rmsnorm_def)[0] == {"NUM_WARPS": (8, 16)}


def test_engine_items_without_a_knob_vote_for_nothing():
    from bot.agents import hints

    # Its title says "latency-bound", which the memory-latency words would match; it names no knob.
    distance = FeedbackItem(rule="roofline_distance", severity="high", title="At 3% of the roofline (latency-bound)",
                            recommendation="Follow the higher-priority items")
    assert hints.votes([distance]) == {} and hints.explain([distance]) == []
    # The same words from another source still count, and every spill rule of the engine is a spill.
    assert hints.votes([distance.model_copy(update={"rule": "other_tool"})]) == {"stages": 3.0, "warps": 3.0}
    spills = FeedbackItem(rule="register_spill_instructions", severity="high", title="120 spill instructions executed")
    assert hints.votes([spills]) == {"warps": 3.0, "block": -3.0, "stages": -3.0}


def test_debug_mode_prefers_fewer_resources(rmsnorm_def):
    g = seed("tiled", "gemm_n4096_k4096")
    ctx = AgentContext(definition=rmsnorm_def.model_copy(update={"name": "gemm_n4096_k4096"}), mode=Mode.DEBUG, parent=g)
    ps = OfflineAgent({"use_seeds": False}).propose(ctx, 4)
    for p in ps:
        before = configuration(solution_tunables(g))
        after = configuration(solution_tunables(p.solution))
        [(k, (a, b))] = [(k, (before[k], after[k])) for k in before if before[k] != after[k]]
        assert b < a, f"{k}: {a} -> {b} asks for more resources after a failure"


def test_variants_run_correctly_in_the_triton_interpreter(rmsnorm_def, tmp_path):
    """Three variants of each rmsnorm seed, run on CPU through TRITON_INTERPRET=1 against the reference."""
    ctx = AgentContext(definition=rmsnorm_def, mode=Mode.INITIAL)
    ps = OfflineAgent().propose(ctx, 6)
    for i, p in enumerate(ps):
        (tmp_path / f"v{i}.py").write_text(p.solution.source("main.py"))
    script = (
        "import importlib.util, sys, torch\n"
        "torch.manual_seed(0)\n"
        "x = torch.randn(5, 4096, dtype=torch.bfloat16); w = torch.randn(4096, dtype=torch.bfloat16)\n"
        "xf = x.float(); ref = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5) * w.float())\n"
        "for path in sys.argv[1:]:\n"
        "    spec = importlib.util.spec_from_file_location('v', path); m = importlib.util.module_from_spec(spec)\n"
        "    spec.loader.exec_module(m)\n"
        "    out = torch.empty_like(x); m.run(hidden_states=x, weight=w, output=out)\n"
        "    err = ((out.float() - ref).abs() - 1e-2 - 1e-2 * ref.abs()).max().item()\n"
        "    assert err <= 0, (path, err)\n"
        "print('ok', len(sys.argv) - 1)\n"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-c", script, *sorted(map(str, tmp_path.glob("v*.py")))],
                       capture_output=True, text=True, env=env, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == f"ok {len(ps)}"


def test_registry_builtin_unknown_and_plugin(monkeypatch):
    assert {"anthropic", "openai", "offline", "replay"} <= set(available())
    assert isinstance(create_agent("offline"), OfflineAgent)
    with pytest.raises(AgentError, match="no agent named 'nope'"):
        get_agent_class("nope")

    class EP:
        name, value, group = "myplug", "plug:Agent", "kbot.agents"

        def load(self):
            from bot.agents.base import Agent

            class Plug(Agent):
                def propose(self, ctx, n):
                    return []

                def __init__(self, config=None):
                    self.config = config

            return Plug

    import bot.agents.catalog as reg

    monkeypatch.setattr(reg, "entry_points", lambda group: [EP()] if group == "kbot.agents" else [])
    a = create_agent("myplug", {"x": 1})
    assert a.config == {"x": 1} and "myplug" in available()
    with pytest.raises(TypeError):
        register("bad")(dict)  # type: ignore[arg-type]


def test_seed_definitions_in_skills_are_valid_json_free_python():
    for folder in (REPO / "skills" / "seeds").iterdir():
        for f in folder.glob("*.py"):
            ast.parse(f.read_text())
            sol = [s for s in load_seeds(folder.name) if s.name.endswith(f.stem)][0]
            assert solution_tunables(sol), f"{f} declares no tunables"
            json.dumps(configuration(solution_tunables(sol)))


def test_a_rewritten_seed_comes_before_the_champion_s_moves(rmsnorm_def, tmp_path):
    """The champion descends from a seed; a person rewrites that seed's file. The next search tries the
    new seed at its defaults first, then the champion's moves; the seed at the champion's own
    configuration (the champion itself) is never proposed; a tried seed is not tried again."""
    sp = seed("single_pass")
    champion = apply(sp, {"NUM_WARPS": 16}, name="champ")  # a promoted move of the seed
    mem = SearchMemory(rmsnorm_def.name)
    for s in load_seeds(rmsnorm_def.name):
        mem.note_proposed(config_key_or_none(s), "tried in an earlier campaign")
    ctx = AgentContext(definition=rmsnorm_def, mode=Mode.OPTIMIZE, parent=champion, memory=mem)
    assert all("seed structure" not in p.rationale for p in OfflineAgent().propose(ctx, 4))  # every seed tried: moves only
    folder = tmp_path / rmsnorm_def.name
    folder.mkdir()
    src = (REPO / "skills" / "seeds" / rmsnorm_def.name / "single_pass.py").read_text()
    (folder / "single_pass.py").write_text(src + "\n# rewritten: the same kernel, a new revision\n")
    (folder / "champ.py").write_text(champion.source("main.py"))  # a seed file identical to the champion
    first, *rest = OfflineAgent(seeds_dir=tmp_path).propose(ctx, 3)
    assert "seed structure" in first.rationale and "rewritten" in first.solution.source("main.py")
    assert rest and all("seed structure" not in p.rationale for p in rest)
    keys = {p.config_key for p in [first, *rest]}
    assert config_key_or_none(champion) not in keys


def test_a_failing_parent_gets_its_fix_moves_before_untried_seeds(rmsnorm_def):
    parent = seed("single_pass")
    ctx = AgentContext(definition=rmsnorm_def, mode=Mode.DEBUG, parent=parent, memory=SearchMemory(rmsnorm_def.name))
    first = OfflineAgent().propose(ctx, 1)[0]
    assert "seed structure" not in first.rationale  # a move of the parent (fewer resources first)
    assert structure_hash(first.solution) == structure_hash(parent)


def test_what_was_tried_on_other_inputs_is_proposed_again(rmsnorm_def, tmp_path):
    """A configuration tried (and rejected) before the definition's inputs changed counts as untried
    under the new inputs, and as tried again once measured on them; entries without a fingerprint
    (memories written before fingerprints) still count."""
    path = tmp_path / "memory.json"
    old = SearchMemory(rmsnorm_def.name, path)
    old.inputs = "inputs-A"
    ctx = AgentContext(definition=rmsnorm_def, mode=Mode.INITIAL, memory=old)
    first = OfflineAgent().propose(ctx, 3)
    for p in first:
        old.note_result(p.solution.content_hash()[:12], None, p.config_key, p.rationale, "REJECTED", None)
    old.tried["legacy-key"] = {"node": "x", "status": "REJECTED", "speedup": None}  # no fingerprint
    old.save()

    again = SearchMemory.load(rmsnorm_def.name, path)
    again.inputs = "inputs-A"
    assert all(again.has_tried(p.config_key) for p in first) and again.has_tried("legacy-key")
    repeat = OfflineAgent().propose(AgentContext(definition=rmsnorm_def, mode=Mode.INITIAL, memory=again), 3)
    assert not {p.config_key for p in first} & {p.config_key for p in repeat}

    changed = SearchMemory.load(rmsnorm_def.name, path)
    changed.inputs = "inputs-B"
    assert not any(changed.has_tried(p.config_key) for p in first) and changed.has_tried("legacy-key")
    second = OfflineAgent().propose(AgentContext(definition=rmsnorm_def, mode=Mode.INITIAL, memory=changed), 3)
    assert [p.config_key for p in second] == [p.config_key for p in first]  # the same first moves, measured afresh
    changed.note_proposed(second[0].config_key, "n2")
    assert changed.tried[second[0].config_key] == {"node": "n2", "status": "pending", "speedup": None, "inputs": "inputs-B"}
    assert changed.has_tried(second[0].config_key)


def test_a_local_campaign_remembers_per_the_harness_inputs(tmp_path):
    """The fingerprint a local campaign stamps its memory with is the harness evaluator's (through the
    PR evaluator the campaign calls), so an edit of the definition's sidecar makes earlier tries untried."""
    import shutil

    from bot.campaign.harness_evaluator import HarnessEvaluator
    from bot.campaign.local_loop import PullRequestEvaluator, Workspace
    from bot.controller.campaign import definition_inputs_fingerprint, inputs_fingerprint
    from harness.schema import load_definition, load_workloads

    name = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"
    folder = tmp_path / name
    shutil.copytree(Path(__file__).resolve().parents[2] / "definitions" / name, folder)
    ws = Workspace(tmp_path / "ws")

    def campaign_fp():
        d = load_definition(folder / "definition.json")
        wls = load_workloads(folder / "workloads.small.jsonl", d)
        harness = HarnessEvaluator(d, wls, tmp_path / "runs", definition_path=folder / "definition.json")
        pr_eval = PullRequestEvaluator(ws, harness, d, "001", tmp_path / "store")
        assert pr_eval.inputs_fingerprint() == harness.inputs_fingerprint()
        assert harness.inputs_fingerprint() != definition_inputs_fingerprint(d, wls)  # the sidecar counts
        return inputs_fingerprint(d, wls, pr_eval)

    a = campaign_fp()
    assert campaign_fp() == a  # stable
    side = folder / "kbot.yaml"
    side.write_text(side.read_text().replace("std: 160.0", "std: 1.0"))
    assert campaign_fp() != a
