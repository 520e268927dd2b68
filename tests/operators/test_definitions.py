"""Our definitions state the official interface exactly, carry our reference, and cover the regimes."""

from __future__ import annotations

import json

import pytest
from opkit import ALL, ATTENTION, DECODE, INDEXER, MOE, PREFILL, REPO, official, official_path, ours

import harness.inputs  # noqa: F401  (registers the contest operators' generators)
from harness.compare import COMPARATORS
from harness.generators import GENERATORS
from harness.schema import load_workloads


@pytest.mark.parametrize("name", ALL)
def test_interface_is_the_official_one(shared, name):
    mine, _ = ours(name)
    theirs = official(shared, name)
    assert mine.name == theirs.name and mine.op_type == theirs.op_type

    def strip(group):
        return {k: {kk: vv for kk, vv in v.items() if kk != "description"} for k, v in group.items()}

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
    def wl(n):
        return load_workloads(REPO / "definitions" / n / "workloads.jsonl", ours(n)[0])

    dec = wl(DECODE)
    assert {w.axes["batch_size"] for w in dec} >= {1, 4, 8, 16, 32, 48, 64}
    pre = wl(PREFILL)
    assert {w.inputs["cu_seqlens"].params["mix"] for w in pre} == {"equal", "random", "skewed"}
    assert {w.axes["num_seqs"] for w in pre} >= {1, 4, 16, 32} and max(w.axes["total_seq_len"] for w in pre) >= 8192
    assert any(w.inputs["cu_seqlens"].params.get("empty") for w in pre), "an empty sequence (its final state is zeros)"
    for ws in (dec, pre):
        # a kernel that ignores `scale` (or treats 0 as 0) must fail somewhere; so must one that ignores the state
        scales = {w.inputs["scale"].value for w in ws}
        assert 0.0 in scales and len(scales - {0.0, 1 / 128 ** 0.5}) >= 3
        assert any(w.absent_inputs() == {"state"} for w in ws) and any("state" not in w.absent_inputs() for w in ws)
    idx = wl(INDEXER)  # the DSA sets' finer properties: test_dsa_workloads.py
    assert {w.inputs["seq_lens"].params["mix"] for w in idx} >= {"short", "long", "mixed"}
    att = wl(ATTENTION)
    assert {w.inputs["sparse_indices"].params["mix"] for w in att} >= {"short", "long", "mixed"}
    moe = wl(MOE)
    assert len({w.inputs["local_expert_offset"].value for w in moe}) >= 6
    assert all(w.inputs["routing_logits"].type == "generated" for w in moe)
    assert len({w.inputs["routed_scaling_factor"].value for w in moe}) >= 3  # a hard-coded 2.5 fails somewhere
    small = load_workloads(REPO / "definitions" / MOE / "workloads.small.jsonl", ours(MOE)[0])
    assert {w.uuid for w in small} <= {w.uuid for w in moe} and max(w.axes["seq_len"] for w in small) <= 8


def test_moe_workloads_are_the_official_sizes_and_offsets(shared):
    """Ours are the official file's (seq_len, local_expert_offset) pairs, in its order (written by
    scripts/make_workloads.py; only the routing, which the official blobs hold, is generated)."""
    import json

    official = []
    for line in (shared / "flashinfer-trace" / "workloads" / "moe" / f"{MOE}.jsonl").read_text().splitlines():
        if line.strip():
            w = json.loads(line)["workload"]
            official.append((w["axes"]["seq_len"], w["inputs"]["local_expert_offset"]["value"]))
    mine = [(w.axes["seq_len"], w.inputs["local_expert_offset"].value) for w in load_workloads(REPO / "definitions" / MOE / "workloads.jsonl", ours(MOE)[0])]
    assert mine == official


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
