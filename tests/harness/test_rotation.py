"""Address rotation in the timer: K input/output sets swapped into the dicts the solution reads."""

import random

import torch

from harness.measure import Rotation


def _sets():
    inputs = {"x": torch.randn(64, 32), "idx": torch.arange(8), "eps": 1e-5}
    outputs = [{"y": torch.empty(64, 32)}, None]
    return inputs, outputs


def test_each_set_has_its_own_buffers_with_the_same_values_and_set_0_comes_back():
    inputs, outputs = _sets()
    x0, idx0, y0 = inputs["x"], inputs["idx"], outputs[0]["y"]
    rot = Rotation(inputs, outputs, 4, 1 << 30, random.Random(0))
    assert rot.k == 4
    seen = set()
    for i in range(4):
        rot.use(i)
        assert inputs["eps"] == 1e-5
        assert torch.equal(inputs["x"], x0) and torch.equal(inputs["idx"], idx0)
        seen.add((inputs["x"].data_ptr(), inputs["idx"].data_ptr(), outputs[0]["y"].data_ptr()))
        assert outputs[1] is None
    assert len(seen) == 4 and len({s[0] for s in seen}) == 4
    rot.use(5)  # wraps around
    assert inputs["x"].data_ptr() == rot.in_sets[1]["x"].data_ptr()
    rot.restore()
    assert inputs["x"] is x0 and inputs["idx"] is idx0 and outputs[0]["y"] is y0


def test_the_memory_cap_limits_the_number_of_sets():
    inputs, outputs = _sets()
    per_set = sum(t.numel() * t.element_size() for t in (inputs["x"], inputs["idx"], outputs[0]["y"]))
    assert Rotation(inputs, outputs, 16, 2 * per_set, random.Random(0)).k == 3  # the caller's set + two copies
    assert Rotation(inputs, outputs, 16, per_set - 1, random.Random(0)).k == 1
    assert Rotation(inputs, outputs, 0, 1 << 30, random.Random(0)).k == 1
    assert Rotation({"n": 3}, [None], 16, 1 << 30, random.Random(0)).k == 1  # nothing to move
