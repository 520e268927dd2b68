"""Our definitions state the official interface exactly, carry our reference, and cover the regimes."""

from __future__ import annotations

import json

import pytest

from harness.compare import COMPARATORS
from harness.inputs import GENERATORS
from harness.schema import load_workloads
from opkit import ALL, ATTENTION, DECODE, INDEXER, MOE, PREFILL, REPO, official, official_path, ours


@pytest.mark.parametrize("name", ALL)
def test_interface_is_the_official_one(shared, name):
    mine, _ = ours(name)
    theirs = official(shared, name)
    assert mine.name == theirs.name and mine.op_type == theirs.op_type
    strip = lambda group: {k: {kk: vv for kk, vv in v.items() if kk != "description"} for k, v in group.items()}
    raw = json.loads(official_path(shared, name).read_text())
    ours_raw = json.loads((REPO / "definitions" / name / "definition.json").read_text())
    for key in ("axes", "inputs", "outputs"):
        assert strip(ours_raw[key]) == strip(raw[key]), key
        assert list(ours_raw[key]) == list(raw[key]), f"{key}: same order (positional calls depend on it)"
    assert ours_raw.get("constraints") == raw.get("constraints")


@pytest.mark.parametrize("name", ALL)
def test_reference_string_is_reference_py(name):
    mine, cfg = ours(name)
    assert mine.reference == (REPO / "definitions" / name / "reference.py").read_text()
    assert cfg.reference_fn == "reference.py::run"


@pytest.mark.parametrize("name", ALL)
def test_sidecar_and_workloads_resolve(name):
    mine, cfg = ours(name)
    assert cfg.comparator in COMPARATORS
    for ref in cfg.inputs.values():
        assert ref.generator in GENERATORS
    ws = load_workloads(REPO / "definitions" / name / "workloads.jsonl", mine)
    assert ws and len({w.uuid for w in ws}) == len(ws)
    for w in ws:
        for spec in w.inputs.values():
            if spec.type == "generated":
                assert spec.generator in GENERATORS


def test_official_tolerances_are_the_defaults():
    assert ours(MOE)[1].tolerance.model_dump() == {"atol": 1.0, "rtol": 0.3, "required_matched_ratio": 0.9}
    for name in (INDEXER, ATTENTION, DECODE, PREFILL):
        assert ours(name)[1].tolerance.model_dump() == {"atol": 0.01, "rtol": 0.01, "required_matched_ratio": 1.0}
    assert ours(ATTENTION)[1].optional_outputs == ["lse"]
    assert ours(INDEXER)[1].comparator == "dsa_topk_by_score"


def test_workloads_cover_the_contest_regimes():
    wl = lambda n: load_workloads(REPO / "definitions" / n / "workloads.jsonl", ours(n)[0])
    assert {w.axes["batch_size"] for w in wl(DECODE)} == {1, 4, 8, 16, 32, 48, 64}
    pre = wl(PREFILL)
    assert {w.inputs["cu_seqlens"].params["mix"] for w in pre} == {"equal", "random", "skewed"}
    assert {w.axes["num_seqs"] for w in pre} >= {1, 4, 16, 32} and max(w.axes["total_seq_len"] for w in pre) >= 8192
    idx = wl(INDEXER)  # the DSA sets' finer properties: test_dsa_workloads.py
    assert {w.inputs["seq_lens"].params["mix"] for w in idx} >= {"short", "long", "mixed"}
    att = wl(ATTENTION)
    assert {w.inputs["sparse_indices"].params["mix"] for w in att} >= {"short", "long", "mixed"}
    moe = wl(MOE)
    assert len({w.inputs["local_expert_offset"].value for w in moe}) >= 6
    assert all(w.inputs["routing_logits"].type == "generated" for w in moe)


def test_reference_copies_are_in_sync():
    from harness.operators.sync import sync

    for name in ALL:
        assert sync(name, write=False) == [], "run: python -m harness.operators.sync"


@pytest.mark.parametrize("name", ALL)
def test_reference_solution_passes_the_static_guard(name):
    from harness.guard.static import check_solution
    from harness.schema import load_solution

    sol = load_solution(REPO / "definitions" / name / "reference_solution.json")
    assert sol.spec.language.value == "python" and sol.definition == name
    assert check_solution(sol, ours(name)[0]) == []
