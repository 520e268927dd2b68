"""What each prompt mode carries: definition, reference, regimes, operator notes, memory, the parent
with its report summary and feedback, the structured error."""

from __future__ import annotations

import jinja2
import pytest

from bot.agents.base import AgentContext, Mode, StructuredError
from bot.agents.calllog import prompt_hash
from bot.agents.prompts import OPERATORS_DIR, PROMPTS_DIR, PromptBuilder
from bot.agents.providers.offline import load_seeds
from bot.controller.memory import SearchMemory
from harness.report import FeedbackItem
from harness.schema import Workload


@pytest.fixture
def ctx(rmsnorm_def):
    mem = SearchMemory(rmsnorm_def.name)
    mem.note_result("n1", None, "k1", "ROWS 1 -> 2", "PASSED", 1.17)
    mem.note_result("n2", None, None, "used tl.fancy", "COMPILE_ERROR", None,
                    error={"message": "AttributeError: module 'triton.language' has no attribute 'fancy'"})
    wl = [Workload(uuid=str(b), axes={"batch_size": b}, inputs={}) for b in (1, 7, 512, 8192)]
    parent = [s for s in load_seeds("rmsnorm_h4096") if s.name.endswith("single_pass")][0]
    return AgentContext(definition=rmsnorm_def, mode=Mode.OPTIMIZE, parent=parent, parent_node="abc123",
                        parent_summary={"status": "PASSED", "speedup_vs_reference": 3.25, "speedup_vs_baseline": 1.08,
                                        "roofline_fraction_min": 0.42, "energy_j_per_call": 0.0021},
                        feedback=[FeedbackItem(rule="register_spills", severity="high", title="Register spills: 512 bytes",
                                               cause="the whole row is live in registers", recommendation="more warps")],
                        workloads=wl, memory=mem)


def test_optimize_prompt(ctx):
    system, [msg] = PromptBuilder().render(ctx)
    text = msg["content"]
    assert msg["role"] == "user"
    assert "main.py::run" in system and "kbot: tunable" in system and "<file path=" in system
    assert '"name": "rmsnorm_h4096"' in text and "def run(hidden_states, weight):" in text  # definition + reference
    assert "`batch_size`: 4 values from 1 to 8192 (1, 7, 512, 8192)" in text  # regimes
    assert "# RMSNorm on H200" in text  # operator notes (skills/operators/rmsnorm.md)
    assert "1.170x: ROWS 1 -> 2" in text and "tl.fancy" in text  # memory: best and failures
    assert "triton.language.fancy does not exist" in text  # memory: learned facts
    assert "ROWS = 1  # kbot: tunable" in text and "node `abc123`" in text  # the parent kernel
    assert "3.250x" in text and "1.080x" in text and "42% of the roofline" in text
    assert "[high] Register spills: 512 bytes" in text and "recommendation: more warps" in text


def test_debug_prompt_carries_the_structured_error(ctx):
    ctx.mode = Mode.DEBUG
    ctx.error = StructuredError("out of resource: shared memory", file="main.py", line=31, status="RUNTIME_ERROR")
    _, [msg] = PromptBuilder().render(ctx)
    assert "Status: RUNTIME_ERROR" in msg["content"] and "Where: main.py, line 31" in msg["content"]
    assert "out of resource: shared memory" in msg["content"]
    assert "Profiler feedback" not in msg["content"]


def test_initial_prompt_and_candidate_numbering(ctx):
    ctx.mode, ctx.parent, ctx.parent_summary = Mode.INITIAL, None, None
    _, [one] = PromptBuilder().render(ctx, index=0, n=2)
    _, [two] = PromptBuilder().render(ctx, index=1, n=2, previous=["a row-per-program kernel"])
    assert "Write a first, correct" in one["content"] and "Current kernel" not in one["content"]
    assert "candidate 2 of 2" in two["content"] and "a row-per-program kernel" in two["content"]


def test_rendering_is_deterministic_and_strict(ctx, tmp_path):
    a = PromptBuilder().render(ctx)
    b = PromptBuilder().render(ctx)
    assert prompt_hash(*a) == prompt_hash(*b)
    for name in ("system", "initial", "debug", "optimize", "repair", "_context", "_parent"):
        src = (PROMPTS_DIR / f"{name}.md.j2").read_text()
        (tmp_path / f"{name}.md.j2").write_text(src)
    (tmp_path / "optimize.md.j2").write_text("{{ no_such_field }}")
    with pytest.raises(jinja2.UndefinedError):
        PromptBuilder(prompts_dir=tmp_path).render(ctx)


def test_operator_notes_exist_for_the_contest_families():
    notes = OPERATORS_DIR
    for stem in ("rmsnorm", "fused_add_rmsnorm", "gemm", "moe", "dsa_paged", "gdn"):
        assert (notes / f"{stem}.md").read_text().strip()


def test_operator_notes_lookup_by_name_prefix_then_op_type(rmsnorm_def):
    pb = PromptBuilder()
    fused = rmsnorm_def.model_copy(update={"name": "fused_add_rmsnorm_h4096"})
    notes = pb.operator_notes(fused)
    assert notes.startswith("# Fused add + RMSNorm") and "# RMSNorm on H200" in notes
    gemm = rmsnorm_def.model_copy(update={"name": "gemm_n4096_k4096", "op_type": "gemm"})
    assert pb.operator_notes(gemm).count("# GEMM on H200") == 1
    dsa = rmsnorm_def.model_copy(update={"name": "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64", "op_type": "dsa_paged"})
    assert pb.operator_notes(dsa).startswith("# DSA")
    assert pb.operator_notes(rmsnorm_def.model_copy(update={"name": "zzz", "op_type": "none"})) == ""
