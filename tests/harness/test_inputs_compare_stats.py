"""Inputs (seeded, fresh per trial, dtype-aware, structured), the comparison rule, the statistics."""

import math
import random
import time

import pytest
import torch

from harness.compare import compare, elementwise
from harness.defconfig import DefinitionConfig, GeneratorRef, Tolerance
from harness.inputs import allocate_outputs, make_inputs, seed_for
from harness.schema import Definition, SchemaError, Status, Workload
from harness.stats import median_ci_indices, paired_ratio, precise_enough, summarize


def _def(inputs, outputs=None, axes=None):
    return Definition.model_validate({
        "name": "t", "op_type": "x", "axes": axes or {"M": {"type": "var"}, "N": {"type": "const", "value": 16}},
        "inputs": inputs, "outputs": outputs or {"y": {"shape": ["M", "N"], "dtype": "float32"}},
        "reference": "def run(**kw):\n    return None\n"})


def _w(**inputs):
    return Workload.model_validate({"uuid": "u", "axes": {"M": 4}, "inputs": inputs})


def test_seeded_reproducible_and_fresh_per_trial():
    d = _def({"x": {"shape": ["M", "N"], "dtype": "bfloat16"}})
    a = make_inputs(d, _w(), seed=seed_for(0, "u", 0))["x"]
    b = make_inputs(d, _w(), seed=seed_for(0, "u", 0))["x"]
    c = make_inputs(d, _w(), seed=seed_for(0, "u", 1))["x"]
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.dtype == torch.bfloat16 and a.shape == (4, 16)


def test_fp8_scalars_and_bool():
    d = _def({"q": {"shape": ["M", "N"], "dtype": "float8_e4m3fn"}, "s": {"shape": None, "dtype": "float32"}, "m": {"shape": ["M"], "dtype": "bool"}})
    x = make_inputs(d, _w(s={"type": "scalar", "value": 2.5}), seed=1)
    assert x["q"].dtype == torch.float8_e4m3fn and torch.isfinite(x["q"].float()).all()
    assert x["s"] == 2.5
    assert x["m"].dtype == torch.bool


def test_random_integer_inputs_are_refused_without_a_generator():
    d = _def({"idx": {"shape": ["M"], "dtype": "int32"}})
    with pytest.raises(SchemaError, match="never valid"):
        make_inputs(d, _w(), seed=0)


def test_structured_generators_are_valid_by_construction():
    d = _def({"cu": {"shape": ["B1"], "dtype": "int32"}, "perm": {"shape": ["M"], "dtype": "int64"}, "ri": {"shape": ["M"], "dtype": "int32"}},
             axes={"M": {"type": "var"}, "B1": {"type": "var"}, "T": {"type": "var"}, "N": {"type": "const", "value": 16}})
    cfg = DefinitionConfig(inputs={"cu": GeneratorRef(generator="cu_seqlens", params={"total_axis": "T"}),
                                   "perm": GeneratorRef(generator="permutation", params={"n_axis": "T"}),
                                   "ri": GeneratorRef(generator="randint", params={"low": 0, "high": "T"})})
    w = Workload.model_validate({"uuid": "u", "axes": {"M": 5, "B1": 4, "T": 40}, "inputs": {}})
    for seed in range(5):
        x = make_inputs(d, w, seed=seed, config=cfg)
        cu = x["cu"].tolist()
        assert cu[0] == 0 and cu[-1] == 40 and all(b >= a + 1 for a, b in zip(cu, cu[1:]))
        assert len(set(x["perm"].tolist())) == 5 and max(x["perm"].tolist()) < 40
        assert 0 <= int(x["ri"].min()) and int(x["ri"].max()) < 40


def test_safetensors_inputs_stay_inside_the_dataset_root(tmp_path):
    from safetensors.torch import save_file

    save_file({"x": torch.ones(4, 16)}, str(tmp_path / "blob.safetensors"))
    d = _def({"x": {"shape": ["M", "N"], "dtype": "float32"}})
    x = make_inputs(d, _w(x={"type": "safetensors", "path": "blob.safetensors", "tensor_key": "x"}), seed=0, dataset_root=tmp_path)
    assert torch.equal(x["x"], torch.ones(4, 16))
    with pytest.raises(SchemaError, match="escapes"):
        make_inputs(d, _w(x={"type": "safetensors", "path": "../blob.safetensors", "tensor_key": "x"}), seed=0, dataset_root=tmp_path / "sub")
    with pytest.raises(SchemaError, match="dataset root"):
        make_inputs(d, _w(x={"type": "safetensors", "path": "blob.safetensors", "tensor_key": "x"}), seed=0)


def test_outputs_are_poisoned():
    d = _def(
        {"x": {"shape": ["M", "N"], "dtype": "float32"}}, outputs={"y": {"shape": ["M", "N"], "dtype": "bfloat16"}, "i": {"shape": ["M"], "dtype": "int32"}}
    )
    out = allocate_outputs(d, {"M": 3, "N": 16}, "cpu")
    assert torch.isnan(out["y"].float()).all() and (out["i"] == torch.iinfo(torch.int32).max).all()


def test_official_rule_fails_only_when_both_tolerances_are_exceeded():
    tol = Tolerance(atol=0.01, rtol=0.01)
    ref = torch.tensor([100.0, 0.001])
    assert elementwise("y", torch.tensor([100.5, 0.001]), ref, tol).status is Status.PASSED  # rel ok
    assert elementwise("y", torch.tensor([100.0, 0.009]), ref, tol).status is Status.PASSED  # abs ok
    bad = elementwise("y", torch.tensor([102.0, 0.001]), ref, tol)
    assert bad.status is Status.INCORRECT_NUMERICAL and "1/2 elements" in bad.message
    assert elementwise("y", torch.tensor([float("nan"), 0.001]), ref, tol).status is Status.INCORRECT_NUMERICAL
    assert elementwise("y", torch.tensor([float("inf"), 0.001]), ref, tol).status is Status.INCORRECT_NUMERICAL
    loose = Tolerance(atol=0.01, rtol=0.01, required_matched_ratio=0.5)
    assert elementwise("y", torch.tensor([102.0, 0.001]), ref, loose).status is Status.PASSED


def test_shape_and_dtype_are_their_own_statuses():
    d = _def({"x": {"shape": ["M", "N"], "dtype": "float32"}})
    cfg = DefinitionConfig()
    ref = {"y": torch.zeros(4, 16)}
    axes = {"M": 4, "N": 16}
    assert compare({"y": torch.zeros(4, 15)}, ref, definition=d, axes=axes, config=cfg).status is Status.INCORRECT_SHAPE
    assert compare({"y": torch.zeros(4, 16, dtype=torch.float64)}, ref, definition=d, axes=axes, config=cfg).status is Status.INCORRECT_DTYPE
    assert compare({"y": [0.0]}, ref, definition=d, axes=axes, config=cfg).status is Status.INCORRECT_SHAPE
    assert compare({"y": torch.zeros(4, 16)}, ref, definition=d, axes=axes, config=cfg).ok


def test_median_interval_is_the_exact_binomial_one():
    assert median_ci_indices(50) == (17, 32)  # order statistics 18 and 33 (1-based)
    assert median_ci_indices(100) == (39, 60)
    lo, hi = median_ci_indices(10_000)
    assert lo < 5000 < hi and hi - lo < 250


def test_median_interval_matches_the_binomial_definition_at_every_size_and_is_cheap():
    # The definition: the largest lo with P(Binomial(n, 1/2) <= lo) <= 2.5%, less one (ties) -- written
    # out the slow way here, against the incremental sum the stop rule calls after every chunk.
    def by_definition(n: int) -> tuple[int, int]:
        cdf = lambda k: sum(math.comb(n, i) for i in range(k + 1)) / 2**n  # noqa: E731
        lo = 0
        while lo + 1 < n // 2 and cdf(lo) <= 0.025:
            lo += 1
        return max(0, lo - 1), n - 1 - max(0, lo - 1)

    for n in [*range(6, 260), 333, 550, 999, 1000]:
        assert median_ci_indices(n) == by_definition(n), n
    median_ci_indices.cache_clear()
    t0 = time.perf_counter()
    for n in range(25, 1001, 25):  # what one 1000-sample workload asks, chunk by chunk
        median_ci_indices(n)
    assert time.perf_counter() - t0 < 0.25  # was 3+ s: O(n^2) big-integer sums per call


def test_median_interval_covers_the_true_median():
    rng = random.Random(0)
    hits = 0
    for _ in range(400):
        xs = [rng.expovariate(1.0) for _ in range(60)]
        s = summarize(xs)
        hits += s.ci95[0] <= math.log(2) <= s.ci95[1]
    assert 0.92 <= hits / 400 <= 0.995


def test_stop_rule_ignores_rare_outliers():
    xs = [1.0 + 0.001 * (i % 7) for i in range(500)] + [1000.0] * 3
    assert precise_enough(xs, 0.003, 0.0)  # the median's 95% half-width is within 0.3% of it


def test_paired_ratio():
    r = paired_ratio([2.0] * 20, [1.0] * 20)
    assert r.median == 2.0 and r.ci95 == (2.0, 2.0) and r.n == 20


def test_stop_rule_respects_timer_resolution():
    from harness.stats import precise_enough

    quantized = [0.0035 + 0.0005 * (i % 5) for i in range(60)]  # a 4.5 µs kernel on a 0.5 µs clock
    assert not precise_enough(quantized, 0.003, 0.0)
    assert precise_enough(quantized, 0.003, 0.0005)
    assert not precise_enough([1.0, 2.0] * 30, 0.003, 0.0005)


def test_poison_fails_even_with_a_tolerated_mismatch_fraction():
    loose = Tolerance(atol=0.01, rtol=0.01, required_matched_ratio=0.5)
    r = elementwise("y", torch.tensor([float("nan"), 1.0, 1.0, 1.0]), torch.tensor([1.0, 1.0, 1.0, 1.0]), loose)
    assert r.status is Status.INCORRECT_NUMERICAL and "NaN/Inf" in r.message


def test_export_writes_generated_inputs_as_random():
    from harness.export import official_trace
    from harness.schema import Trace

    t = Trace.model_validate(
        {
            "definition": "d",
            "solution": "s",
            "workload": {"uuid": "u", "axes": {"M": 1}, "inputs": {"idx": {"type": "generated", "generator": "permutation", "params": {"n_axis": "M"}}}},
            "evaluation": {"status": "REJECTED", "environment": {"hardware": "h"}, "timestamp": "t", "log": "why"},
        }
    )
    data, kept, _ = official_trace(t, "run")
    assert data["workload"]["inputs"]["idx"] == {"type": "random"} and not kept  # no correctness record to carry it
    assert data["evaluation"]["kbot"]["generated_inputs"]["idx"]["generator"] == "permutation"
    assert data["evaluation"]["status"] == "RUNTIME_ERROR" and data["evaluation"]["log"].startswith("[kbot REJECTED")
