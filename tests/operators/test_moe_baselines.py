"""The MoE baselines (definitions/<moe>/baselines/, for issue 16) compute the definition's math.

deepgemm_grouped runs against a stand-in ``deep_gemm`` module whose grouped GEMM checks what DeepGEMM 2.6.1's
``m_grouped_fp8_fp4_gemm_nt_contiguous`` checks on sm_90 (csrc/apis/gemm.hpp: FP8 operands K-major, bf16 ``d``,
int32 layout of one end row per group in the psum layout) and computes only the rows the psum layout names
(each group starting at its predecessor's end rounded up to the alignment), leaving the rest as they were.

On the CPU at shrunk sizes: torch_compile with torch.compile as the identity (the same functions, eager), and
scaled_mm_loop against an emulation of ``torch._scaled_mm``'s DeepSeek recipe that first applies the
rules the baseline's docstring gives with their sources (torch's layout checks: scale_a [M, K/128]
outer-dim-major, scale_b [K/128, N/128] whose transpose is row-major with a 16-byte row stride, mat1
row-major, mat2 column-major; cuBLASLt's: every size a multiple of 16, M included, which torch does
not check), so a layout or padding mistake fails here, not on the GPU.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from opkit import MOE, REPO, clone, gen, judge, make, our_run, ours, scalar, shrink, workload
from test_references import SMALL

BASE = REPO / "definitions" / MOE / "baselines"


def load(name, tmp_path, monkeypatch):
    """The baseline as the harness builds it: its solution.json's sources in a folder on sys.path."""
    from harness.schema import load_solution

    sol = load_solution(BASE / name / "solution.json")
    for src in sol.sources:
        (tmp_path / src.path).write_text(src.content)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "reference", raising=False)
    spec = importlib.util.spec_from_file_location(f"moe_baseline_{name}", tmp_path / "main.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def emulated_scaled_mm(mat1, mat2, scale_a, scale_b, out_dtype=None, **_):
    M, K = mat1.shape
    K2, N = mat2.shape
    assert K == K2 and K % 16 == 0 and N % 16 == 0
    assert M % 16 == 0, f"cuBLASLt's FP8 heuristic refuses M = {M} (not a multiple of 16): pad the rows"
    assert scale_a.dtype == torch.float32 and scale_b.dtype == torch.float32
    assert mat1.stride(1) == 1, "mat1 must be row-major"
    assert mat2.stride(0) == 1, "mat2 must be column-major"
    assert tuple(scale_a.shape) == (M, K // 128) and (M == 1 or scale_a.stride(0) == 1) and (K // 128 == 1 or scale_a.stride(1) == M), \
        f"scale_a must be [M, K/128] outer-dim-major, got {tuple(scale_a.shape)} strides {scale_a.stride()}"
    sbt = scale_b.t()
    assert tuple(sbt.shape) == (N // 128, K // 128) and (K // 128 == 1 or sbt.stride(1) == 1) and (N // 128 == 1 or sbt.stride(0) == K // 128), \
        f"scale_b.t() must be [N/128, K/128] row-major, got {tuple(sbt.shape)} strides {sbt.stride()}"
    assert N // 128 == 1 or sbt.stride(0) % 4 == 0, f"scale_b's row stride {sbt.stride(0)} floats is not 16-byte aligned"
    a = mat1.float() * scale_a.repeat_interleave(128, dim=1)
    b = mat2.float() * scale_b.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)
    return (a @ b).to(out_dtype or torch.bfloat16)


# scaled_mm_loop's smallest sizes: the 128x128 scales' rows must be 16-byte aligned (K a multiple of 512)
SCALED_MM = dict(hidden_size=512, intermediate_size=512, gemm1_out_size=1024, num_hidden_blocks=4, num_intermediate_blocks=4,
                 num_gemm1_out_blocks=8)


def cases(T, sizes=SMALL):
    defn, cfg = ours(MOE)
    defn = shrink(defn, **sizes)
    w = workload({"seq_len": T}, routing_logits=gen("moe_routing_logits"), local_expert_offset=scalar(96), routed_scaling_factor=scalar(3.25))
    for seed in (0, 1):
        x = make(defn, cfg, w, seed)
        yield defn, cfg, w, x, our_run(MOE)(**clone(x))


@pytest.mark.parametrize("T,m_align", [(1, None), (16, None), (70, None), (5, 16), (70, 16)])
def test_scaled_mm_loop_matches_with_torchs_layout_rules(monkeypatch, tmp_path, T, m_align):
    monkeypatch.setattr(torch, "_scaled_mm", emulated_scaled_mm)
    mod = load("scaled_mm_loop", tmp_path, monkeypatch)
    if m_align is not None:  # the other padding scripts/gpu/moe_dev.py measures
        monkeypatch.setattr(mod, "M_ALIGN", m_align)
    for defn, cfg, w, x, expected in cases(T, SCALED_MM):
        r = judge(defn, cfg, w, x, mod.run(**clone(x)), expected)
        assert r.ok and r.checks["token_l2"].ok, (r.message, r.checks)


def test_the_stand_in_refuses_unpadded_rows(monkeypatch, tmp_path):
    """Without the padding (M_ALIGN 1: an expert's 1-5 rows as they are) the stand-in fails as cuBLASLt
    did on the H200 (CUBLAS_STATUS_NOT_SUPPORTED at 1-5 rows per expert)."""
    monkeypatch.setattr(torch, "_scaled_mm", emulated_scaled_mm)
    mod = load("scaled_mm_loop", tmp_path, monkeypatch)
    monkeypatch.setattr(mod, "M_ALIGN", 1)
    defn, cfg, w, x, expected = next(cases(1, SCALED_MM))
    with pytest.raises(AssertionError, match="not a multiple of 16"):
        mod.run(**clone(x))
    _, _, _, x, _ = next(cases(1))  # K = 256: the 128x128 scale rows are 8 bytes apart
    with pytest.raises(ValueError, match="multiples of 512"):
        mod.run(**clone(x))


ALIGN = 128  # DeepGEMM's default contiguous alignment on sm_90 (get_mk_alignment_for_contiguous_layout)


def emulated_m_grouped_fp8_gemm_nt_contiguous(a, b, d, grouped_layout, disable_ue8m0_cast=False, use_psum_layout=False, **_):
    (x, sfa), (w, sfb) = a, b
    M, K = x.shape
    G, N, K2 = w.shape
    assert x.dtype == w.dtype == torch.float8_e4m3fn and x.stride(1) == 1 and w.stride(2) == 1, "FP8 operands, K-major"
    assert K == K2 and K % 128 == 0 and N % 128 == 0 and tuple(d.shape) == (M, N) and d.dtype == torch.bfloat16
    assert d.is_contiguous(), "d must be N-major"
    assert sfa.dtype == sfb.dtype == torch.float32 and disable_ue8m0_cast, "sm_90 takes float32 scales as they are"
    assert tuple(sfa.shape) == (M, K // 128) and tuple(sfb.shape) == (G, N // 128, K // 128)
    assert use_psum_layout and grouped_layout.dtype == torch.int32 and tuple(grouped_layout.shape) == (G,)
    end = 0
    for g, stop in enumerate(grouped_layout.tolist()):
        start = 0 if g == 0 else -(-end // ALIGN) * ALIGN
        assert start <= stop <= M, f"group {g}: rows [{start}, {stop}) outside the {M} rows"
        if stop > start:
            deq_a = x[start:stop].float() * sfa[start:stop].repeat_interleave(128, dim=1)
            deq_b = w[g].float() * sfb[g].repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)
            d[start:stop] = (deq_a @ deq_b.T).to(torch.bfloat16)
        end = stop


def stand_in_deep_gemm(monkeypatch):
    import types

    mod = types.ModuleType("deep_gemm")
    mod.m_grouped_fp8_gemm_nt_contiguous = emulated_m_grouped_fp8_gemm_nt_contiguous
    mod.get_mk_alignment_for_contiguous_layout = lambda: ALIGN
    monkeypatch.setitem(sys.modules, "deep_gemm", mod)


@pytest.mark.parametrize("T", [1, 16, 70])
def test_deepgemm_grouped_matches_with_deepgemms_layout(monkeypatch, tmp_path, T):
    """Rows the layout leaves out are poisoned (NaN) in the buffers the baseline allocates with
    torch.empty: the combine must never pick them up."""
    stand_in_deep_gemm(monkeypatch)
    real_empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *a, **k: real_empty(*a, **k).fill_(float("nan"))
                        if k.get("dtype") in (torch.bfloat16, torch.float32) else real_empty(*a, **k))
    mod = load("deepgemm_grouped", tmp_path, monkeypatch)
    for defn, cfg, w, x, expected in cases(T):
        r = judge(defn, cfg, w, x, mod.run(**clone(x)), expected)
        assert r.ok and r.checks["token_l2"].ok, (r.message, r.checks)


def test_deepgemm_layout_rows_is_expert_major_and_aligned():
    """Every local pair gets its own row inside its expert's aligned range, in token order; the rest -1."""
    defn, cfg = ours(MOE)
    spec = importlib.util.spec_from_file_location("dg_main", BASE / "deepgemm_grouped" / "main.py")
    src = (BASE / "deepgemm_grouped" / "main.py").read_text().replace("from reference import BLOCK, TOP_K, route", "BLOCK, TOP_K = 128, 8")
    ns: dict = {}
    exec(compile(src, str(spec.origin), "exec"), ns)  # noqa: S102 (our own baseline)
    experts = torch.tensor([[96, 97, 5, 6, 7, 8, 9, 10], [97, 127, 128, 0, 1, 2, 3, 4], [96, 11, 12, 13, 14, 15, 16, 17]])
    row, psum, rows = ns["layout_rows"](experts, 96, 32, 128)
    assert rows == 3 * 8 + 32 * 128
    assert row[0, 0] == 0 and row[2, 0] == 1  # expert 0 (global 96): tokens 0 and 2, rows 0 and 1
    assert row[0, 1] == 128 and row[1, 0] == 129  # expert 1: starts at 128 (aligned)
    assert row[1, 1] == 256  # expert 31 (global 127) after expert 1's aligned block (experts 2-30 are empty)
    assert (row[:, 2:] == -1).all() and row[1, 2] == -1  # global 128 is past the rank's 32 experts
    assert psum[0] == 2 and psum[1] == 130 and psum[31] == 257 and (psum[2:31] == 256).all()


def test_the_baselines_solution_json_carry_their_sources():
    """solution.json is what the harness runs: its sources must be the folder's main.py and the
    definition's reference.py byte for byte (regenerate with scripts/gpu/moe_dev.py --sync-baselines)."""
    from harness.schema import load_solution

    for name in ("scaled_mm_loop", "torch_compile", "deepgemm_grouped"):
        sol = load_solution(BASE / name / "solution.json")
        files = {"main.py": BASE / name / "main.py", "reference.py": BASE.parent / "reference.py"}
        assert {s.path for s in sol.sources} == set(files)
        for s in sol.sources:
            assert s.content == files[s.path].read_text(), f"{name}/solution.json: {s.path} differs from the file"


@pytest.mark.parametrize("T", [1, 16])
def test_torch_compile_baseline_computes_the_reference(monkeypatch, tmp_path, T):
    # The same functions, eager: torch.compile (the decorator form) becomes the identity.
    monkeypatch.setattr(torch, "compile", lambda fn=None, **kw: fn if fn is not None else (lambda f: f))
    mod = load("torch_compile", tmp_path, monkeypatch)
    for defn, cfg, w, x, expected in cases(T):
        r = judge(defn, cfg, w, x, mod.run(**clone(x)), expected)
        assert r.ok and r.checks["token_l2"].ok and r.checks["token_l2"].value < 1e-2, (r.message, r.checks)


def test_baselines_pass_the_static_guard_except_torch_compile():
    """scaled_mm_loop is an ordinary python solution; torch.compile is refused for every candidate (its
    compile workers and caches are outside the harness's view), so that baseline is measured with the
    static guard off (scripts/gpu/moe_dev.py)."""
    from harness.guard.static import check_solution
    from harness.schema import load_solution

    defn = ours(MOE)[0]
    assert check_solution(load_solution(BASE / "scaled_mm_loop" / "solution.json"), defn) == []
    assert {f.rule for f in check_solution(load_solution(BASE / "torch_compile" / "solution.json"), defn)} == {"torch-compile"}
