"""Gated DeltaNet decode (one token per sequence), k-last state, fused into a single kernel.

Per sequence b and value head h the state S = state[b, h] is [V, K] = [128, 128] float32. With the
gates g = exp(-exp(A_log) * softplus(a + dt_bias)) and beta = sigmoid(b), one step is

    u  = beta * (v - g * (S k))            [V]
    S' = g * S + u k^T                     new_state[b, h]
    o  = scale * S' q = scale * (g * (S q) + u * (k . q))

so a program that holds a block of BV rows of S (all 128 columns) reads each state element once,
takes both row dot products (S k, S q) from registers, and writes S' straight back: the minimum
traffic, 64 KiB in and 64 KiB out per head. Everything else (q, k, v, the gates) is noise. The kernel
is bandwidth-bound from ~16 sequences up (floor: 2 * B * 8 * 64 KiB over ~4.3 TB/s) and
latency/launch-bound below that, where what matters is having enough programs in flight: BV rows per
program sets the grid (B * 8 * 128 / BV programs), so small batches want small BV.

Tunables: the row block and warps for small and large batches separately, and the batch size from
which the large-batch configuration is used (the offline search tunes all three). No host-side sync:
the grid depends only on shapes.
"""

import math

import torch
import triton
import triton.language as tl

K_DIM = 128
V_DIM = 128
SMALL_BV = 8  # kbot: tunable [8, 4, 16, 32] role=block
SMALL_WARPS = 2  # kbot: tunable [2, 1, 4, 8]
LARGE_BV = 16  # kbot: tunable [16, 8, 32, 64] role=block
LARGE_WARPS = 4  # kbot: tunable [4, 2, 8] role=warps
LARGE_FROM = 8  # kbot: tunable [8, 4, 16, 32] role=other


@triton.jit
def _gdn_decode_step(q_ptr, k_ptr, v_ptr, s_ptr, alog_ptr, a_ptr, dtb_ptr, b_ptr, o_ptr, ns_ptr, scale,
                     HV: tl.constexpr, REP: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                     BV: tl.constexpr, HAS_STATE: tl.constexpr):
    bh = tl.program_id(0)  # sequence * HV + value head
    vb = tl.program_id(1)  # block of BV state rows
    b = bh // HV
    h = bh % HV
    hk = b * (HV // REP) + h // REP  # q/k row (seq_len is 1): [B, 1, HQ, K] flattened
    kk = tl.arange(0, K)
    rows = vb * BV + tl.arange(0, BV)

    # gates (float32, as the reference)
    x = tl.load(a_ptr + bh).to(tl.float32) + tl.load(dtb_ptr + h)
    softplus = tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(x)))
    g = tl.exp(-tl.exp(tl.load(alog_ptr + h)) * softplus)
    beta = 1.0 / (1.0 + tl.exp(-tl.load(b_ptr + bh).to(tl.float32)))

    q = tl.load(q_ptr + hk * K + kk).to(tl.float32)
    k = tl.load(k_ptr + hk * K + kk).to(tl.float32)
    v = tl.load(v_ptr + bh * V + rows).to(tl.float32)

    offs = bh.to(tl.int64) * (V * K) + rows[:, None] * K + kk[None, :]
    if HAS_STATE:
        s = tl.load(s_ptr + offs)
        sk = tl.sum(s * k[None, :], axis=1)
        sq = tl.sum(s * q[None, :], axis=1)
    else:
        s = tl.zeros([BV, K], dtype=tl.float32)
        sk = tl.zeros([BV], dtype=tl.float32)
        sq = tl.zeros([BV], dtype=tl.float32)
    u = beta * (v - g * sk)
    kq = tl.sum(k * q, axis=0)
    o = scale * (g * sq + u * kq)
    tl.store(ns_ptr + offs, g * s + u[:, None] * k[None, :])
    tl.store(o_ptr + bh * V + rows, o.to(o_ptr.dtype.element_ty))


def run(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):
    """Destination-passing: writes ``output`` [B, 1, HV, V] (bf16) and ``new_state`` [B, HV, V, K]."""
    B, T, HQ, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    if T != 1 or K != K_DIM or V != V_DIM or HV % HQ:
        raise ValueError(f"specialised for one token, K = V = 128 and grouped heads; got q {tuple(q.shape)}, v {tuple(v.shape)}")
    for name, t in (("q", q), ("k", k), ("v", v), ("a", a), ("b", b), ("output", output), ("new_state", new_state)):
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
    if state is not None and not state.is_contiguous():
        raise ValueError("state must be contiguous")
    if B == 0:
        return
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(K)
    bv, warps = (LARGE_BV, LARGE_WARPS) if B >= LARGE_FROM else (SMALL_BV, SMALL_WARPS)
    grid = (B * HV, V // bv)
    _gdn_decode_step[grid](q, k, v, state if state is not None else new_state, A_log, a, dt_bias, b, output, new_state,
                           float(scale), HV=HV, REP=HV // HQ, K=K, V=V, BV=bv, HAS_STATE=state is not None,
                           num_warps=warps)
