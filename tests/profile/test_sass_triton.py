"""Triton compiled ahead of time for sm_90 (no GPU): statistics and SASS facts of the flawed kernels."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts" / "gpu"))

triton = pytest.importorskip("triton")

from harness.profile.sass import find_tool, parse_resource_usage, parse_sass, sass_evidence  # noqa: E402
from harness.profile.triton_stats import compile_for_sm90, infer_signature, triton_evidence  # noqa: E402

pytestmark = pytest.mark.skipif(find_tool("cuobjdump") is None, reason="cuobjdump not available (ships with the triton wheel)")


@pytest.fixture(scope="module", autouse=True)
def _triton_cache(tmp_path_factory):
    import os

    old = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = str(tmp_path_factory.mktemp("triton_cache"))
    yield
    if old is None:
        os.environ.pop("TRITON_CACHE_DIR", None)
    else:
        os.environ["TRITON_CACHE_DIR"] = old


@pytest.fixture(scope="module")
def cases():
    from profile_flawed_kernels import CASES

    return CASES


def _ev(case):
    c = triton_evidence(case.kernel, dict(case.signature), dict(case.constexprs), **case.options)
    assert c.ok, c.missing
    return c.evidence


def test_good_kernel_vector_loads_no_spills(cases):
    ev = _ev(cases["good"])
    assert ev["sass_ldg_128_pct"] == 100 and ev["sass_ldg_narrow_pct"] == 0
    assert ev["triton_spill_bytes"] == 0 and ev["sass_stl"] == 0
    assert 0 < ev["triton_registers"] <= 64
    assert ev["triton_num_warps"] == 4


def test_strided_kernel_has_narrow_loads(cases):
    ev = _ev(cases["uncoalesced"])
    assert ev["sass_ldg_narrow_pct"] == 100


def test_matmul_without_dot_has_no_tensor_instructions(cases):
    ev = _ev(cases["matmul_no_dot"])
    assert ev["sass_tensor_instructions"] == 0 and ev["sass_ffma"] > 0


def test_spill_kernel_spills(cases):
    # Half the device case's row width keeps the compile quick (the device case spills ~3.4 KB per thread).
    case = cases["spill"]
    c = triton_evidence(case.kernel, dict(case.signature), {"BLOCK": 2048}, **case.options)
    assert c.ok, c.missing
    ev = c.evidence
    assert ev["triton_spill_bytes"] >= 64  # the register_spills_triton rule calls this critical
    assert ev["sass_stl"] > 0 and ev["sass_ldl"] > 0
    assert ev["triton_registers"] >= 200


def test_tl_dot_matmul_uses_tensor_cores():
    import triton.language as tl

    @triton.jit
    def mm(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm = tl.arange(0, BM)
        rn = tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
            b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
            acc += tl.dot(a, b)
        tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc.to(tl.float16))

    st = compile_for_sm90(mm, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "K": "i32"},
                          {"BM": 128, "BN": 128, "BK": 64}, num_warps=8)
    tensor = st.sass["tensor_instructions"]
    assert tensor.get("HGMMA", 0) + tensor.get("HMMA", 0) > 0, st.sass["opcodes"]
    assert st.resources["REG"] > 0


def test_signature_inference_from_definition_dtypes(cases):
    k = cases["good"].kernel
    sig, consts = infer_signature(k, {"x": "float32", "y": "float32", "out": "float32"}, constexprs={"BLOCK": 256})
    assert sig == {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    assert consts == {"BLOCK": 256}
    with pytest.raises(ValueError, match="y_ptr"):
        infer_signature(k, {"x": "float32"}, constexprs={"BLOCK": 256})
    with pytest.raises(ValueError, match="BLOCK"):
        infer_signature(k, {"x": "float32", "y": "float32", "out": "float32"})


def test_compile_error_is_reported_missing():
    import triton.language as tl

    @triton.jit
    def broken(x_ptr, BLOCK: tl.constexpr):
        tl.store(x_ptr + tl.arange(0, BLOCK), undefined_name)  # noqa: F821

    c = triton_evidence(broken, {"x_ptr": "*fp32"}, {"BLOCK": 128})
    assert not c.ok and "undefined_name" in c.missing


def test_sass_of_a_cubin_file(tmp_path, cases):
    case = cases["good"]
    st = compile_for_sm90(case.kernel, dict(case.signature), dict(case.constexprs))
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(st.cubin)
    c = sass_evidence(cubin)
    assert c.ok and c.evidence["sass_function"] == "add_good"
    assert c.evidence["sass_ldg"] >= 2
    text = subprocess.run([find_tool("cuobjdump"), "--dump-resource-usage", str(cubin)], capture_output=True, text=True).stdout
    assert parse_resource_usage(text)["add_good"]["REG"] == st.resources["REG"]
    assert not sass_evidence(tmp_path / "missing.cubin").ok


def test_parse_sass_widths_and_predicates():
    text = """
        Function : k
        /*0160*/              @!P0 LDG.E R0, desc[UR4][R6.64] ;
        /*0170*/                   LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;
        /*0180*/                   LDG.E.64 R8, desc[UR4][R2.64] ;
        /*0190*/                   STL [R1], R3 ;
        /*01a0*/                   LDL R3, [R1] ;
        /*01b0*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24 ;
        /*01c0*/                   STG.E.U16 desc[UR4][R2.64], R5 ;
    """
    f = parse_sass(text)["k"]
    assert f["ldg_widths"] == {"32": 1, "64": 1, "128": 1}
    assert f["stg_widths"] == {"16": 1}
    assert f["stl"] == 1 and f["ldl"] == 1
    assert f["tensor_instructions"] == {"HGMMA": 1}


def test_good_matmul_case_uses_tensor_cores_without_spills(cases):
    ev = _ev(cases["good_matmul"])
    assert ev["sass_tensor_instructions"] > 0
    assert ev["triton_spill_bytes"] == 0


def test_pick_function_matches_ncu_names():
    from harness.profile.sass import pick_function

    funcs = {"add_good": {"instructions": 50}, "other": {"instructions": 500}}
    assert pick_function(funcs, "add_good") == "add_good"
    assert pick_function(funcs, "void add_good<1024>(float*, int)") == "add_good"
    assert pick_function(funcs, None) == "other"
    assert pick_function(funcs, "nothing_like_it") is None


LOOP_TYPE_KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def _sum(x_ptr, n, B: tl.constexpr, FLOAT_ACC: tl.constexpr):
    acc = 0.0 if FLOAT_ACC else 0  # an int accumulator of float sums: the interpreter runs it, the compiler refuses
    for i in range(0, n, B):
        acc += tl.sum(tl.load(x_ptr + i + tl.arange(0, B)), axis=0)
    tl.store(x_ptr, acc)


def run(x, float_acc):
    for _ in range(2):  # the same launch twice: compiled once
        _sum[(1,)](x, x.numel(), B=16, FLOAT_ACC=float_acc, num_warps=2)
'''


def test_compiled_launches_compile_each_distinct_launch_and_report_the_compilers_refusal(tmp_path):
    import importlib.util

    import torch
    from triton.runtime.jit import JITFunction

    from harness.profile.triton_stats import compiled_launches

    original = JITFunction.__getitem__  # what indexing a kernel resolves to before the block

    (tmp_path / "k.py").write_text(LOOP_TYPE_KERNEL)  # the compiler reads a kernel's source from its file
    spec = importlib.util.spec_from_file_location("loop_type_kernel", tmp_path / "k.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = torch.ones(64)  # a real run would overwrite x[0] with the sum, 64
    with compiled_launches() as launches:
        mod.run(x, True)
        mod.run(x, False)
    assert [(c.kernel, c.constexprs["FLOAT_ACC"], c.options) for c in launches] == [
        ("_sum", True, {"num_warps": 2}), ("_sum", False, {"num_warps": 2})]
    good, bad = launches
    assert good.error is None and good.stats.cubin and good.signature == {"x_ptr": "*fp32", "n": "i32", "B": "constexpr",
                                                                           "FLOAT_ACC": "constexpr"}
    assert bad.stats is None and "Loop-carried variable acc" in bad.error
    assert torch.equal(x, torch.ones(64)), "a captured launch compiles; it does not run"
    assert JITFunction.__getitem__ is original and "__getitem__" not in JITFunction.__dict__, "the launches run again after the block"
