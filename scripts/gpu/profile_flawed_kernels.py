"""Deliberately flawed Triton kernels (and one good one) with a known right diagnosis.

Each case names its kernel, launch, fixture definition (tests/fixtures/ncu/definitions/) and axes,
and the rule that must come out on top. Used by scripts/gpu/profile_flawed.py on the H200 and, through
the ahead-of-time compile, by tests/profile on a CPU-only machine.

Run one case (this is what ncu profiles): ``python scripts/gpu/profile_flawed_kernels.py CASE``.
Warm-up happens outside the NVTX range ``kbot_candidate``; one call is made inside it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import triton
import triton.language as tl


@triton.jit
def transpose_strided(x_ptr, out_ptr, R, C, BLOCK: tl.constexpr):
    # out[c, r] = x[r, c]. A program writes BLOCK consecutive outputs (consecutive r for one c), so
    # neighbouring lanes read x C*4 bytes apart: one 32-byte sector per 4-byte element. FLAW.
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    c = offs // R
    r = offs % R
    v = tl.load(x_ptr + r * C + c)
    tl.store(out_ptr + offs, v)


@triton.jit
def add_few_programs(x_ptr, y_ptr, out_ptr, n, per_prog, BLOCK: tl.constexpr):
    # Each of a handful of programs loops over its n / grid slice: 4 programs for 132 SMs. FLAW.
    pid = tl.program_id(0)
    start = pid * per_prog
    for i in range(0, per_prog, BLOCK):
        offs = start + i + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def matmul_no_dot(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # C = A @ B^T with broadcast-multiply + tl.sum: correct, but every product is an FFMA on the CUDA
    # cores; the tensor cores stay idle. FLAW.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :]).to(tl.float32)
        b = tl.load(b_ptr + rn[:, None] * K + (k + rk)[None, :]).to(tl.float32)
        acc += tl.sum(a[:, None, :] * b[None, :, :], axis=2)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@triton.jit
def row_mix_spill(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    # A whole 4096-wide row per single-warp program, four transformed copies alive until the end:
    # 4 x 128 fp32 values per thread against a 255-register limit. FLAW: heavy spilling.
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + offs)
    a = tl.exp(x)
    b = tl.sin(x)
    c = x * x
    d = tl.sqrt(tl.abs(x) + 1.0)
    y = a * tl.sum(b, 0) + b * tl.sum(c, 0) + c * tl.sum(d, 0) + d * tl.sum(a, 0)
    tl.store(out_ptr + row * n_cols + offs, y)


@triton.jit
def add_good(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # The reference point: contiguous 128-bit loads, one program per 1024 elements, thousands of programs.
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def matmul_dot(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
               GROUP: tl.constexpr):
    # The second reference point: C = A @ B^T on tensor cores (tl.dot), grouped program order for L2.
    pid = tl.program_id(0)
    n_m = tl.cdiv(M, BM)
    n_n = tl.cdiv(N, BN)
    group = pid // (GROUP * n_n)
    first_m = group * GROUP
    size_m = min(n_m - first_m, GROUP)
    pid_m = first_m + (pid % (GROUP * n_n)) % size_m
    pid_n = (pid % (GROUP * n_n)) // size_m
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + rn[:, None] * K + (k + rk)[None, :])
        acc = tl.dot(a, tl.trans(b), acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@dataclass
class Case:
    name: str
    kernel: Any
    definition: str  # fixture definition name
    axes: dict[str, int]
    expect_top: str | None  # rule that must be the top-priority item; None = no high-severity item at all
    # For the ahead-of-time compile: signature (without constexprs), constexprs, options.
    signature: dict[str, str]
    constexprs: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)
    launch: Callable[..., Any] | None = None
    # Rules that describe the same flaw in other words: acceptable as the top item too.
    accept_top: tuple[str, ...] = ()


def _launch_transpose(t):
    R, C = 4096, 4096
    x = t.randn(R, C, device="cuda")
    out = t.empty(C, R, device="cuda")
    grid = (R * C // 1024,)
    return lambda: transpose_strided[grid](x, out, R, C, BLOCK=1024)


def _launch_small_grid(t):
    n = 1 << 22
    x, y = t.randn(n, device="cuda"), t.randn(n, device="cuda")
    out = t.empty_like(x)
    return lambda: add_few_programs[(4,)](x, y, out, n, n // 4, BLOCK=1024)


def _launch_matmul(t):
    M = N = K = 1024
    a = t.randn(M, K, device="cuda", dtype=t.float16)
    b = t.randn(N, K, device="cuda", dtype=t.float16)
    c = t.empty(M, N, device="cuda", dtype=t.float16)
    return lambda: matmul_no_dot[(M // 32, N // 32)](a, b, c, M, N, K, BM=32, BN=32, BK=8)


def _launch_spill(t):
    R, C = 4096, 4096
    x = t.randn(R, C, device="cuda")
    out = t.empty_like(x)
    return lambda: row_mix_spill[(R,)](x, out, C, BLOCK=4096, num_warps=1)


def _launch_good_matmul(t):
    M = N = K = 2048
    a = t.randn(M, K, device="cuda", dtype=t.float16)
    b = t.randn(N, K, device="cuda", dtype=t.float16)
    c = t.empty(M, N, device="cuda", dtype=t.float16)
    grid = ((M // 128) * (N // 128),)
    return lambda: matmul_dot[grid](a, b, c, M, N, K, BM=128, BN=128, BK=64, GROUP=8, num_warps=8, num_stages=3)


def _launch_good(t):
    n = 1 << 24
    x, y = t.randn(n, device="cuda"), t.randn(n, device="cuda")
    out = t.empty_like(x)
    return lambda: add_good[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)


CASES: dict[str, Case] = {
    c.name: c
    for c in (
        Case("uncoalesced", transpose_strided, "kbot_transpose_f32", {"R": 4096, "C": 4096}, "uncoalesced_global_loads",
             {"x_ptr": "*fp32", "out_ptr": "*fp32", "R": "i32", "C": "i32"}, {"BLOCK": 1024},
             launch=_launch_transpose),
        Case("small_grid", add_few_programs, "kbot_vector_add_f32", {"N": 1 << 22}, "grid_too_small",
             {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "per_prog": "i32"}, {"BLOCK": 1024},
             launch=_launch_small_grid),
        Case("matmul_no_dot", matmul_no_dot, "kbot_gemm_f16", {"M": 1024, "N": 1024, "K": 1024}, "tensor_cores_unused",
             {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"},
             {"BM": 32, "BN": 32, "BK": 8}, launch=_launch_matmul, accept_top=("tensor_cores_unused_sass",)),
        Case("spill", row_mix_spill, "kbot_row_mix_f32", {"R": 4096, "C": 4096}, "register_spills",
             {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_cols": "i32"}, {"BLOCK": 4096}, {"num_warps": 1},
             launch=_launch_spill, accept_top=("register_spills_sass", "register_spills_triton")),
        Case("good_matmul", matmul_dot, "kbot_gemm_f16", {"M": 2048, "N": 2048, "K": 2048}, None,
             {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"},
             {"BM": 128, "BN": 128, "BK": 64, "GROUP": 8}, {"num_warps": 8, "num_stages": 3},
             launch=_launch_good_matmul),
        Case("good", add_good, "kbot_vector_add_f32", {"N": 1 << 24}, None,
             {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": 1024},
             launch=_launch_good),
    )
}


def run_case(name: str, warmup: int = 3) -> None:
    import torch

    fn = CASES[name].launch(torch)  # type: ignore[misc]
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("kbot_candidate")
    fn()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print(f"usage: {sys.argv[0]} {{{','.join(CASES)}}}", file=sys.stderr)
        sys.exit(2)
    run_case(sys.argv[1])
