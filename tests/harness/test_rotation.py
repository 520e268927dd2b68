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


def _timer(sets=4):
    from harness.measure import Refresher, Timer, TimingConfig

    cfg = TimingConfig(warmup=1, min_iters=8, max_iters=8, chunk=4, recheck=2, rotate_sets=sets)
    return Timer(torch.device("cpu"), cfg, Refresher(["x"]), 0, rotate_on_cpu=True)


def test_timed_calls_see_every_set_and_the_caller_gets_its_own_tensors_back():
    inputs, outputs = _sets()
    x0, y0 = inputs["x"], outputs[0]["y"]
    seen = []

    def call():
        seen.append((inputs["x"].data_ptr(), outputs[0]["y"].data_ptr()))
        outputs[0]["y"].copy_(inputs["x"] * 2)
        return dict(outputs[0])

    samples = _timer().run([call], inputs, outputs[:1])
    assert samples[0].sets == 4 and len(samples[0].times_ms) == 8
    assert len({p for p, _ in seen}) == 4 and len({q for _, q in seen}) == 4  # inputs and outputs both rotate
    assert inputs["x"] is x0 and outputs[0]["y"] is y0
    assert len(samples[0].input_sets) == 4
    for kept_in, kept_out in samples[0].rechecks:  # re-checked pairs match the set they were taken from
        assert torch.equal(kept_out["y"], kept_in["x"] * 2)


def test_a_failing_call_still_restores_the_callers_tensors():
    inputs, outputs = _sets()
    x0 = inputs["x"]
    n = []

    def call():
        n.append(1)
        if len(n) > 3:
            raise RuntimeError("boom")
        return {"y": inputs["x"] * 2}

    try:
        _timer().run([call], inputs, [None])
    except RuntimeError:
        pass
    else:
        raise AssertionError("the failure must propagate")
    assert inputs["x"] is x0


def test_structured_inputs_are_the_same_in_every_set_so_a_write_to_any_is_visible():
    """The worker compares every set's structured inputs with a copy taken before timing."""
    from harness.worker import inputs_unchanged

    inputs, outputs = _sets()
    frozen = {"idx": inputs["idx"].clone()}

    def call():
        if inputs["idx"] is not frozen_ref:  # writes only into the copies, never into set 0
            inputs["idx"][0] = 7
        return {"y": inputs["x"] * 2}

    frozen_ref = inputs["idx"]
    samples = _timer().run([call], inputs, [None])
    assert inputs_unchanged(frozen, {"idx": inputs["idx"]}) is None  # set 0 alone looks untouched
    assert any(inputs_unchanged(frozen, {"idx": s["idx"]}) == "idx" for s in samples[0].input_sets)


def test_sm_clock_summary_of_the_kept_calls():
    from harness.measure import Samples

    s = Samples(clock_mhz=[2000.0, 1600.0, 2000.0])
    assert s.sm_clock_mhz() == {"median": 2000.0, "min": 1600.0, "max": 2000.0}
    assert Samples().sm_clock_mhz() is None  # the CPU, or no GPU sleep: nothing to say
