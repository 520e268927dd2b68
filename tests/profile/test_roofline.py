"""Roofline counts, floors and classes; formulas as data; every official definition evaluates."""

from __future__ import annotations

import pytest

from harness.ceilings import Ceilings
from harness.roofline import counts, load_spec, roofline
from harness.schema import load_definition, parse_definition

H200 = Ceilings(gpu_name="NVIDIA H200", device="cuda", copy_bandwidth_gbs=4000.0,
                matmul_tflops={"bf16": 800.0, "fp16": 800.0, "fp8": 1600.0, "fp32": 50.0}, sm_count=132)


def d(name, op_type, axes, inputs, outputs):
    return parse_definition({"name": name, "op_type": op_type, "axes": axes, "inputs": inputs, "outputs": outputs,
                             "reference": "def run(**kw):\n    pass\n"})


GEMM = d("gemm_n4096_k4096", "gemm", {"M": {"type": "var"}, "N": {"type": "const", "value": 4096}, "K": {"type": "const", "value": 4096}},
         {"A": {"shape": ["M", "K"], "dtype": "float16"}, "B": {"shape": ["N", "K"], "dtype": "float16"}},
         {"C": {"shape": ["M", "N"], "dtype": "float16"}})


def test_gemm_counts_and_compute_bound():
    axes = GEMM.resolve_axes({"M": 4096})
    c = counts(GEMM, axes)
    assert c["flops"] == 2 * 4096**3
    assert c["bytes"] == 3 * 4096 * 4096 * 2
    assert c["peak_key"] == "fp16"
    r = roofline(GEMM, axes, H200, measured_ms=0.25)
    # the tensor-core fp16 rate, plus the H200's documented launch floor (these ceilings measured none)
    assert r.floor_ms == pytest.approx(2 * 4096**3 / 800e12 * 1e3 + 3.33e-3)
    assert r.model_extra["launch_floor_ms"] == pytest.approx(3.33e-3) and "documented" in r.model_extra["launch_floor_source"]
    assert r.bound == "compute"
    assert r.fraction == pytest.approx(r.floor_ms / 0.25)
    assert r.model_extra["compute_unit"] == "tensor"
    assert r.ceilings["gpu_name"] == "NVIDIA H200"


TINY = d("gemm_n256_k256", "gemm", {"M": {"type": "var"}, "N": {"type": "const", "value": 256}, "K": {"type": "const", "value": 256}},
         {"A": {"shape": ["M", "K"], "dtype": "float16"}, "B": {"shape": ["N", "K"], "dtype": "float16"}},
         {"C": {"shape": ["M", "N"], "dtype": "float16"}})


def test_small_gemm_is_launch_bound():
    r = roofline(TINY, TINY.resolve_axes({"M": 1}), H200, measured_ms=0.004)
    assert r.bound == "launch" and r.model_extra["intrinsic_bound"] == "memory"
    assert "launch floor" in r.model_extra["bound_reason"]
    # the floor is the launch plus the work, so a 4 µs call of a few-ns workload is near its floor (83%),
    # where the work's floor alone said 0.1%
    work = r.model_extra["work_floor_ms"]
    assert r.floor_ms == pytest.approx(3.33e-3 + work) and r.fraction == pytest.approx((3.33e-3 + work) / 0.004)
    assert work / 0.004 < 0.01


def test_a_measured_launch_floor_wins_and_a_device_without_one_says_so():
    measured = H200.model_copy(update={"launch_floor_us": 2.5})
    r = roofline(TINY, TINY.resolve_axes({"M": 1}), measured)
    assert r.model_extra["launch_floor_ms"] == pytest.approx(2.5e-3) and r.model_extra["launch_floor_source"] == "measured"
    unknown = H200.model_copy(update={"gpu_name": "Some GPU"})
    r = roofline(TINY, TINY.resolve_axes({"M": 1}), unknown)
    assert r.model_extra["launch_floor_ms"] is None and "no launch floor" in r.model_extra["launch_floor_source"]
    assert r.floor_ms == r.model_extra["work_floor_ms"]
    assert r.bound == "launch" and "launch overhead dominates" in r.model_extra["bound_reason"]  # the 5 µs rule stands in
    # a GPU-side kernel duration (ncu) has no launch in it: the floor does not add one
    r = roofline(TINY, TINY.resolve_axes({"M": 1}), H200, launch=False)
    assert r.floor_ms == r.model_extra["work_floor_ms"] and r.model_extra["launch_floor_ms"] is None


def test_the_ceilings_report_and_describe_the_launch_floor():
    from harness.ceilings import describe, documented_ceilings, measure_launch_floor_cpu

    doc = documented_ceilings("NVIDIA H200")
    assert doc.to_report()["launch_floor_us"] == pytest.approx(3.33)
    assert "launch floor" in describe(doc) and "3.33" in describe(doc)
    us = measure_launch_floor_cpu(200)
    assert 0 < us < 1000  # an empty Python call between two clock reads


def test_the_spec_says_which_compute_rate_applies(tmp_path):
    """`compute: tensor` puts matrix work on the tensor-core peak of its dtype, `simt` on the fp32 CUDA
    cores; a variant can change it for the definitions it matches."""
    (tmp_path / "gemm.yaml").write_text(
        'op_type: gemm\ncompute: tensor\nflops: "2 * M * N * K"\n'
        'variants:\n  - match: "gemm_n256_*"\n    compute: simt\n')
    axes = GEMM.resolve_axes({"M": 4096})
    big = roofline(GEMM, axes, H200, spec_dir=tmp_path)
    assert big.ceilings["peak_used"] == "fp16" and big.model_extra["compute_unit"] == "tensor"
    small = roofline(TINY, TINY.resolve_axes({"M": 4096}), H200, spec_dir=tmp_path)
    assert small.ceilings["peak_used"] == "fp32" and small.model_extra["compute_unit"] == "simt"
    assert small.model_extra["compute_floor_ms"] == pytest.approx(2 * 4096 * 256 * 256 / 50e12 * 1e3)


def test_measured_far_above_floor_is_latency_bound():
    big = {"M": 8192}
    r = roofline(GEMM, GEMM.resolve_axes(big), H200, measured_ms=100.0)
    assert r.bound == "latency" and r.model_extra["intrinsic_bound"] == "compute"
    assert roofline(GEMM, GEMM.resolve_axes(big), H200, measured_ms=0.5).bound == "compute"


def test_default_bytes_use_dtype_sizes_fp8_and_fp4():
    dd = d("x", "something_new", {"N": {"type": "var"}},
           {"a": {"shape": ["N"], "dtype": "float8_e4m3fn"}, "b": {"shape": ["N"], "dtype": "float4_e2m1"},
            "s": {"shape": None, "dtype": "float32"}},
           {"o": {"shape": ["N"], "dtype": "bfloat16"}})
    c = counts(dd, {"N": 1000})
    assert c["bytes"] == 1000 * 1 + 1000 * 0.5 + 1000 * 2
    assert c["flops"] == 1000  # default: one per output element
    assert c["peak_key"] == "fp32"  # no spec: CUDA cores
    assert load_spec(dd).source.startswith("default")


def test_rmsnorm_and_fused_variant(shared):
    rms = load_definition(shared / "flashinfer-trace/definitions/rmsnorm/rmsnorm_h4096.json")
    fused = load_definition(shared / "flashinfer-trace/definitions/rmsnorm/fused_add_rmsnorm_h4096.json")
    a = counts(rms, rms.resolve_axes({"batch_size": 8}))
    b = counts(fused, fused.resolve_axes({"batch_size": 8}))
    assert a["flops"] == 4 * 8 * 4096 and b["flops"] == 5 * 8 * 4096
    assert a["bytes"] == (2 * 8 * 4096 + 4096) * 2
    assert "variant fused_add_rmsnorm_*" in b["spec"]


def test_paged_decode_reads_only_listed_pages(shared):
    g = load_definition(shared / "flashinfer-trace/definitions/gqa_paged/gqa_paged_decode_h32_kv8_d128_ps1.json")
    small = counts(g, g.resolve_axes({"batch_size": 1, "num_pages": 1000, "len_indptr": 2, "num_kv_indices": 10}))
    full = counts(g, g.resolve_axes({"batch_size": 1, "num_pages": 10, "len_indptr": 2, "num_kv_indices": 10}))
    # A 1000-page pool with 10 pages in use costs the same bytes as a 10-page pool: only used pages move.
    assert small["bytes"] == pytest.approx(full["bytes"])
    assert small["flops"] == 4 * 32 * 128 * 10


def test_every_official_definition_evaluates(shared):
    defs = sorted((shared / "flashinfer-trace/definitions").glob("*/*.json"))
    assert len(defs) > 100
    for p in defs:
        dfn = load_definition(p)
        axes = {a: 64 for a in dfn.var_axes}
        if "len_indptr" in axes:
            axes["len_indptr"] = 5
        values = {**dfn.const_axes, **axes}
        r = roofline(dfn, values, H200, measured_ms=1.0)
        assert r.bytes > 0 and r.floor_ms > 0, p.name
        # Expert-parallel MoE from its axes alone: a token may reach no local expert (no FLOPs at all);
        # every formula is a lower bound for any input (skills/roofline/moe.yaml).
        ep_moe = dfn.op_type == "moe" and "num_experts" in values and values.get("num_local_experts", values["num_experts"]) < values["num_experts"]
        assert r.flops > 0 or ep_moe, p.name


def test_per_definition_override_and_bad_formula(tmp_path):
    (tmp_path / "gemm.yaml").write_text(
        "op_type: gemm\ncompute: tensor\nflops: '2 * M * N * K'\n"
        "definitions:\n  gemm_n4096_k4096: {flops: '3 * M * N * K', note: test}\n")
    c = counts(GEMM, GEMM.resolve_axes({"M": 2}), spec_dir=tmp_path)
    assert c["flops"] == 3 * 2 * 4096 * 4096 and "definition gemm_n4096_k4096" in c["spec"]
    (tmp_path / "gemm.yaml").write_text("op_type: gemm\nflops: 'M * nonexistent'\n")
    with pytest.raises(ValueError, match="nonexistent"):
        counts(GEMM, GEMM.resolve_axes({"M": 2}), spec_dir=tmp_path)
    (tmp_path / "gemm.yaml").write_text("op_type: gemm\nflops: '__import__(\"os\")'\n")
    with pytest.raises(Exception, match="may be called|not allowed"):
        counts(GEMM, GEMM.resolve_axes({"M": 2}), spec_dir=tmp_path)


def test_measured_must_be_positive():
    with pytest.raises(ValueError):
        roofline(GEMM, GEMM.resolve_axes({"M": 16}), H200, measured_ms=0)


def test_workload_roofline_picks_ceilings(monkeypatch, tmp_path):
    from harness.roofline import workload_roofline

    monkeypatch.setenv("KBOT_CACHE", str(tmp_path))
    axes = GEMM.resolve_axes({"M": 64})
    r = workload_roofline(GEMM, axes, 0.5, device="cuda", gpu_name="NVIDIA H200")
    assert r is not None and r.ceilings["source"] == "documented, not measured here"
    assert workload_roofline(GEMM, axes, 0.5, device="cuda", gpu_name="Unknown GPU") is None
    cpu = workload_roofline(GEMM, axes, 50.0, device="cpu")
    assert cpu is not None and cpu.fraction is not None and cpu.ceilings["gpu_name"].startswith("cpu-")
