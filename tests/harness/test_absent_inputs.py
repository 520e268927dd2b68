"""An optional input a workload leaves out: generated as None, and it moves no bytes on the roofline."""

from pathlib import Path

import pytest

from harness.ceilings import documented_ceilings
from harness.defconfig import load_config
from harness.inputs import make_inputs
from harness.roofline import roofline
from harness.schema import SchemaError, Workload, load_definition

REPO = Path(__file__).resolve().parents[2]
DECODE = REPO / "definitions" / "gdn_decode_qk4_v8_d128_k_last" / "definition.json"


def _workload(state_absent: bool) -> Workload:
    inputs = {"scale": {"type": "scalar", "value": 0.5}}
    if state_absent:
        inputs["state"] = {"type": "generated", "generator": "absent"}
    return Workload.model_validate({"uuid": "u", "axes": {"batch_size": 4}, "inputs": inputs})


def test_absent_optional_input_is_none_and_present_one_is_a_tensor():
    d = load_definition(DECODE)
    cfg = load_config(d.name, DECODE)
    absent = make_inputs(d, _workload(True), seed=1, config=cfg)
    present = make_inputs(d, _workload(False), seed=1, config=cfg)
    assert absent["state"] is None
    assert tuple(present["state"].shape) == (4, 8, 128, 128)
    assert _workload(True).absent_inputs() == {"state"} and not _workload(False).absent_inputs()


def test_a_required_input_cannot_be_absent():
    d = load_definition(DECODE)
    w = Workload.model_validate({"uuid": "u", "axes": {"batch_size": 2}, "inputs": {"q": {"type": "generated", "generator": "absent"}}})
    with pytest.raises(SchemaError, match="only an optional input can be absent"):
        make_inputs(d, w, seed=1, config=load_config(d.name, DECODE))


def test_absent_input_moves_no_bytes_on_the_roofline():
    d = load_definition(DECODE)
    c = documented_ceilings("NVIDIA H200")
    axes = d.resolve_axes({"batch_size": 64})
    full = roofline(d, axes, c)
    without = roofline(d, axes, c, absent=frozenset({"state"}))
    state_bytes = 64 * 8 * 128 * 128 * 4
    assert full.bytes - without.bytes == pytest.approx(state_bytes)
    assert without.floor_ms < full.floor_ms
