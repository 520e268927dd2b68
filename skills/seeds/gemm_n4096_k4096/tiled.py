"""GEMM C = A @ B.T (A: [M, K], B: [N, K], fp16/bf16 in, fp32 accumulate), N = K = 4096.

Classic tiled Triton matmul: each program owns a BLOCK_M x BLOCK_N tile of C, walks K in BLOCK_K steps
with ``tl.dot`` (wgmma on sm_90 when tiles are large enough), programs grouped GROUP_M tiles along M so
neighbouring programs share B tiles in L2. Tunables are marked with ``# kbot: tunable``.
"""

import torch
import triton
import triton.language as tl

BLOCK_M = 128  # kbot: tunable [64, 128, 256]
BLOCK_N = 128  # kbot: tunable [64, 128, 256]
BLOCK_K = 64  # kbot: tunable [32, 64, 128]
GROUP_M = 8  # kbot: tunable [1, 8]
NUM_WARPS = 8  # kbot: tunable [4, 8]
NUM_STAGES = 3  # kbot: tunable [3, 4]


@triton.jit
def _matmul_abt(a_ptr, b_ptr, c_ptr, M, N, K,
                stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_n
    group = pid // per_group
    first_m = group * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % per_group) % size_m)
    pid_n = (pid % per_group) // size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_n[None, :] * stride_bn + offs_k[:, None] * stride_bk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_n[None, :] < N) & (offs_k[:, None] < k_left), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def run(A, B, C=None):
    M, K = A.shape
    N, K2 = B.shape
    assert K == K2, f"A is [M, {K}] but B is [N, {K2}]"
    if C is None:
        C = torch.empty((M, N), dtype=A.dtype, device=A.device)
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    _matmul_abt[grid](A, B, C, M, N, K,
                      A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0), C.stride(1),
                      BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M,
                      num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return C
