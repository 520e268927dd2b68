"""The MoE baselines (definitions/<moe>/baselines/, for issue 16) compute the definition's math.

On the CPU at shrunk sizes: torch_compile with torch.compile as the identity (the same functions, eager), and
scaled_mm_loop against an emulation of ``torch._scaled_mm``'s DeepSeek recipe that first applies
torch's own layout checks (scale_a [M, K/128] outer-dim-major, scale_b [K/128, N/128] whose transpose
is row-major, mat1 row-major, mat2 column-major), so a scale-layout mistake fails here, not on the GPU.
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
    assert mat1.stride(1) == 1, "mat1 must be row-major"
    assert mat2.stride(0) == 1, "mat2 must be column-major"
    assert tuple(scale_a.shape) == (M, K // 128) and (M == 1 or scale_a.stride(0) == 1) and (K // 128 == 1 or scale_a.stride(1) == M), \
        f"scale_a must be [M, K/128] outer-dim-major, got {tuple(scale_a.shape)} strides {scale_a.stride()}"
    sbt = scale_b.t()
    assert tuple(sbt.shape) == (N // 128, K // 128) and (K // 128 == 1 or sbt.stride(1) == 1) and (N // 128 == 1 or sbt.stride(0) == K // 128), \
        f"scale_b.t() must be [N/128, K/128] row-major, got {tuple(sbt.shape)} strides {sbt.stride()}"
    a = mat1.float() * scale_a.repeat_interleave(128, dim=1)
    b = mat2.float() * scale_b.repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)
    return (a @ b).to(out_dtype or torch.bfloat16)


def cases(T):
    defn, cfg = ours(MOE)
    defn = shrink(defn, **SMALL)
    w = workload({"seq_len": T}, routing_logits=gen("moe_routing_logits"), local_expert_offset=scalar(96), routed_scaling_factor=scalar(3.25))
    for seed in (0, 1):
        x = make(defn, cfg, w, seed)
        yield defn, cfg, w, x, our_run(MOE)(**clone(x))


@pytest.mark.parametrize("T", [1, 16, 70])
def test_scaled_mm_loop_matches_with_torchs_layout_rules(monkeypatch, tmp_path, T):
    monkeypatch.setattr(torch, "_scaled_mm", emulated_scaled_mm)
    mod = load("scaled_mm_loop", tmp_path, monkeypatch)
    for defn, cfg, w, x, expected in cases(T):
        r = judge(defn, cfg, w, x, mod.run(**clone(x)), expected)
        assert r.ok and r.checks["token_l2"].ok, (r.message, r.checks)


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
