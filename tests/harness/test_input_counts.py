"""Roofline counts from the timed inputs: the spec's ``from_inputs``, the counts' checks, inputs made alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.input_counts import COUNTERS, Counter
from harness.inputs import make_inputs
from harness.roofline import RooflineSpec, given_counts, input_counts, load_spec, roofline
from harness.schema import SchemaError, Workload, load_definition
from harness.timed_counts import TimedCounts

REPO = Path(__file__).resolve().parents[2]
MOE = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"
RMS = REPO / "definitions" / "rmsnorm_h4096" / "definition.json"


def test_from_inputs_must_name_a_counter_and_lower_bounds(tmp_path):
    gemm = load_definition(REPO / "definitions" / "rmsnorm_h4096" / "definition.json")
    for bad in ("from_inputs: moe", "from_inputs: {counter: c}", "from_inputs: {counter: c, lower_bounds: {}}",
                "from_inputs: {counter: c, lower_bounds: {n: -1}}", "from_inputs: {counter: c, lower_bounds: {'a b': 1}}"):
        (tmp_path / f"{gemm.op_type}.yaml").write_text(f"op_type: {gemm.op_type}\n{bad}\n")
        with pytest.raises(ValueError, match="from_inputs"):
            load_spec(gemm, tmp_path)
    (tmp_path / f"{gemm.op_type}.yaml").write_text(f"op_type: {gemm.op_type}\nfrom_inputs: {{counter: c, lower_bounds: {{n: 2}}}}\nbytes: 'n * 10'\n")
    spec = load_spec(gemm, tmp_path)
    assert spec.counter == "c" and spec.lower_bounds == {"n": 2.0}


def test_given_counts_are_checked_against_the_spec():
    spec = RooflineSpec(op_type="x", counter="c", lower_bounds={"n": 2.0, "m": 0.0})
    assert input_counts(spec, None) == {"n": 2.0, "m": 0.0}
    assert input_counts(spec, {"n": 5, "m": 0}) == {"n": 5.0, "m": 0.0}
    for bad in ({"n": 5}, {"n": 5, "m": 0, "k": 1}, {"n": 1, "m": 0}, {"n": float("nan"), "m": 0}, {"n": True, "m": 0}, {"n": "7", "m": 0}):
        with pytest.raises(ValueError):
            input_counts(spec, bad)
    with pytest.raises(ValueError, match="counts nothing"):
        input_counts(RooflineSpec(op_type="x"), {"n": 1})


def test_an_input_made_alone_has_its_full_build_value_or_is_refused():
    d = load_definition(RMS)
    w = Workload.model_validate({"uuid": "u", "axes": {"batch_size": 3}, "inputs": {}})
    full = make_inputs(d, w, seed=5)
    first = make_inputs(d, w, seed=5, only=frozenset({"hidden_states"}))
    assert set(first) == {"hidden_states"} and (first["hidden_states"] == full["hidden_states"]).all()
    with pytest.raises(SchemaError, match="cannot be made alone"):  # the weight is drawn after hidden_states
        make_inputs(d, w, seed=5, only=frozenset({"weight"}))


def test_a_failing_counter_leaves_the_lower_bounds_and_its_reason(monkeypatch):
    from harness.ceilings import documented_ceilings
    from harness.operators import moe  # noqa: F401  (registers the MoE counter)

    d = load_definition(REPO / "definitions" / MOE / "definition.json")
    w = Workload.model_validate({"uuid": "u", "axes": {"seq_len": 4}, "inputs": {"local_expert_offset": {"type": "scalar", "value": 0},
                                                                                   "routed_scaling_factor": {"type": "scalar", "value": 1.0}}})

    def broken(inputs, axes, config):
        raise RuntimeError("counter broke")

    monkeypatch.setitem(COUNTERS, "moe_local_routing", Counter(fn=broken, reads=COUNTERS["moe_local_routing"].reads))
    counts = TimedCounts(d, [w], seed=0, definition_path=REPO / "definitions" / MOE / "definition.json")
    got, why = counts.get("u")
    assert got is None and "counter broke" in why
    r = roofline(d, d.resolve_axes(w.axes), documented_ceilings("NVIDIA H200"))
    assert given_counts(r) is None and r.input_counts_from.startswith("lower bounds")
    assert TimedCounts.wanted(d) and not TimedCounts.wanted(load_definition(RMS))
