"""Gated DeltaNet prefill over variable-length sequences, k-last state: chunked (WY/UT) form, 2 kernels.

Write H = S^T ([K, V]) for one value head. Token by token the recurrence is
    H_t = g_t (I - beta_t k_t k_t^T) H_{t-1} + beta_t k_t v_t^T,    o_t = scale * H_t^T q_t.
Within a chunk of C tokens, with gamma_i = sum_{j<=i} log g_j (cumulative log-decay from the chunk
start; every exp below has a non-positive argument, so nothing overflows) and H the state at the
chunk start:
    A     = strictly lower [beta_i (k_i . k_j) exp(gamma_i - gamma_j)]        (C x C)
    T     = (I + A)^{-1}                                                        (unit lower triangular)
    W     = T diag(beta exp(gamma)) K,   U = T diag(beta) V                     (the WY representation)
    Vn    = U - W H                                                             (corrected values)
    O     = scale * (diag(exp(gamma)) Q H + Aqk Vn),
            Aqk = lower incl. diagonal [(q_i . k_j) exp(gamma_i - gamma_j)]
    H'    = exp(gamma_C) H + (diag(exp(gamma_C - gamma)) K)^T Vn.
Kernel 1 (all chunks of all sequences and heads in parallel) computes W, U, Aqk and gamma; T comes
from the nilpotent product (I + A)^{-1} = prod_{n<log2 C} (I + (-A)^(2^n)), i.e. log2(C) squarings on
tensor cores instead of a serial substitution. Kernel 2 runs the recurrence over the chunks of one
sequence, one program per (sequence, head, block of BV value columns), the state in registers in
float32; it writes the outputs and the final state. Chunks never cross a sequence boundary: kernel 1's
programs find their (sequence, chunk) from cu_seqlens on the GPU (no host sync; the grid is an upper
bound, ceil(T / C) + num_seqs, and spare programs exit).

Numerics: the state stays float32; matrix products take tf32 (fp32 operands) or bf16 (the inputs)
operands with float32 accumulation; W and U are stored in float32 (INTER_FP16 stores them in fp16,
half the intermediate traffic, same 10-bit mantissa as tf32).
"""

import math

import torch
import triton
import triton.language as tl

K_DIM = 128
V_DIM = 128
CHUNK = 64  # kbot: tunable [64, 32] role=block
BV = 32  # kbot: tunable [32, 16, 64] role=block
PREP_WARPS = 4  # kbot: tunable [4, 8]
REC_WARPS = 4  # kbot: tunable [4, 2, 8] role=warps
REC_STAGES = 2  # kbot: tunable [2, 1, 3] role=stages
INTER_FP16 = False  # kbot: tunable [False, True] role=other


@triton.jit
def _locate_chunk(cu_ptr, c, N, C: tl.constexpr, NP: tl.constexpr):
    """Sequence index, first token and end of the c-th chunk over all sequences (seq >= N: none)."""
    i = tl.arange(0, NP)
    start = tl.load(cu_ptr + i, mask=i < N, other=0)
    end = tl.load(cu_ptr + i + 1, mask=i < N, other=0)
    nch = (end - start + C - 1) // C
    incl = tl.cumsum(nch, axis=0)
    seq = tl.sum((incl <= c).to(tl.int32), axis=0)
    sel = i == seq
    first = tl.sum(tl.where(sel, incl - nch, 0), axis=0)
    s0 = tl.sum(tl.where(sel, start, 0), axis=0)
    e0 = tl.sum(tl.where(sel, end, 0), axis=0)
    t0 = s0 + (c - first) * C
    return seq, t0, tl.minimum(t0 + C, e0)


@triton.jit
def _gdn_chunk_prep(q_ptr, k_ptr, v_ptr, alog_ptr, a_ptr, dtb_ptr, b_ptr, cu_ptr, w_ptr, u_ptr, aqk_ptr, gam_ptr, N,
                    HV: tl.constexpr, REP: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                    C: tl.constexpr, NP: tl.constexpr, LOG2C: tl.constexpr):
    c = tl.program_id(0)
    h = tl.program_id(1)
    seq, t0, t1 = _locate_chunk(cu_ptr, c, N, C, NP)
    if seq >= N:
        return
    HQ: tl.constexpr = HV // REP
    hk = h // REP
    r = tl.arange(0, C)
    t = t0 + r
    live = t < t1
    kk = tl.arange(0, K)
    vv = tl.arange(0, V)
    tk = t.to(tl.int64)

    x = tl.load(a_ptr + tk * HV + h, mask=live, other=0.0).to(tl.float32) + tl.load(dtb_ptr + h)
    softplus = tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(x)))
    glog = tl.where(live, -tl.exp(tl.load(alog_ptr + h)) * softplus, 0.0)
    beta = tl.where(live, 1.0 / (1.0 + tl.exp(-tl.load(b_ptr + tk * HV + h, mask=live, other=0.0).to(tl.float32))), 0.0)
    gam = tl.cumsum(glog, axis=0)

    kc = tl.load(k_ptr + (tk * HQ + hk)[:, None] * K + kk[None, :], mask=live[:, None], other=0.0)
    qc = tl.load(q_ptr + (tk * HQ + hk)[:, None] * K + kk[None, :], mask=live[:, None], other=0.0)
    vc = tl.load(v_ptr + (tk * HV + h)[:, None] * V + vv[None, :], mask=live[:, None], other=0.0)

    diff = gam[:, None] - gam[None, :]
    below = r[:, None] > r[None, :]
    causal = r[:, None] >= r[None, :]
    kkt = tl.dot(kc, tl.trans(kc))
    a_mat = tl.where(below, beta[:, None] * kkt * tl.exp(tl.where(below, diff, 0.0)), 0.0)
    # T = (I + A)^{-1} = prod_n (I + P^(2^n)) with P = -A (A is nilpotent: A^C = 0)
    eye = tl.where(r[:, None] == r[None, :], 1.0, 0.0)
    p = -a_mat
    tm = eye + p
    for _ in tl.static_range(LOG2C - 1):
        p = tl.dot(p, p)
        tm = tm + tl.dot(tm, p)

    kb = kc.to(tl.float32) * (beta * tl.exp(gam))[:, None]
    vb = vc.to(tl.float32) * beta[:, None]
    w = tl.dot(tm, kb)
    u = tl.dot(tm, vb)
    qkt = tl.dot(qc, tl.trans(kc))
    aqk = tl.where(causal, qkt * tl.exp(tl.where(causal, diff, 0.0)), 0.0)

    row = tk * HV + h
    tl.store(w_ptr + row[:, None] * K + kk[None, :], w.to(w_ptr.dtype.element_ty), mask=live[:, None])
    tl.store(u_ptr + row[:, None] * V + vv[None, :], u.to(u_ptr.dtype.element_ty), mask=live[:, None])
    tl.store(aqk_ptr + row[:, None] * C + r[None, :], aqk, mask=live[:, None])
    tl.store(gam_ptr + row, gam, mask=live)


@triton.jit
def _gdn_chunk_recurrence(q_ptr, k_ptr, s_ptr, cu_ptr, w_ptr, u_ptr, aqk_ptr, gam_ptr, o_ptr, ns_ptr, scale,
                          HV: tl.constexpr, REP: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                          C: tl.constexpr, BV: tl.constexpr, HAS_STATE: tl.constexpr, STAGES: tl.constexpr):
    seq = tl.program_id(0)
    h = tl.program_id(1)
    vb = tl.program_id(2)
    HQ: tl.constexpr = HV // REP
    hk = h // REP
    start = tl.load(cu_ptr + seq)
    end = tl.load(cu_ptr + seq + 1)
    kk = tl.arange(0, K)
    cols = vb * BV + tl.arange(0, BV)
    r = tl.arange(0, C)
    # state block, as H = S^T: hs[k, j] = S[seq, h, cols[j], k]
    s_offs = (seq * HV + h).to(tl.int64) * (V * K) + cols[None, :] * K + kk[:, None]
    if HAS_STATE:
        hs = tl.load(s_ptr + s_offs)
    else:
        hs = tl.zeros([K, BV], dtype=tl.float32)
    for c0 in tl.range(start, end, C, num_stages=STAGES):
        t = c0 + r
        live = t < end
        tk = t.to(tl.int64)
        row = tk * HV + h
        w = tl.load(w_ptr + row[:, None] * K + kk[None, :], mask=live[:, None], other=0.0).to(tl.float32)
        u = tl.load(u_ptr + row[:, None] * V + cols[None, :], mask=live[:, None], other=0.0).to(tl.float32)
        aqk = tl.load(aqk_ptr + row[:, None] * C + r[None, :], mask=live[:, None], other=0.0)
        gam = tl.load(gam_ptr + row, mask=live, other=0.0)
        qc = tl.load(q_ptr + (tk * HQ + hk)[:, None] * K + kk[None, :], mask=live[:, None], other=0.0).to(tl.float32)
        kc = tl.load(k_ptr + (tk * HQ + hk)[:, None] * K + kk[None, :], mask=live[:, None], other=0.0).to(tl.float32)
        last = tl.minimum(c0 + C, end) - 1
        gl = tl.load(gam_ptr + last.to(tl.int64) * HV + h)
        vn = u - tl.dot(w, hs)
        o = scale * (tl.exp(gam)[:, None] * tl.dot(qc, hs) + tl.dot(aqk, vn))
        tl.store(o_ptr + row[:, None] * V + cols[None, :], o.to(o_ptr.dtype.element_ty), mask=live[:, None])
        kd = tl.where(live[:, None], kc * tl.exp(gl - gam)[:, None], 0.0)
        hs = tl.exp(gl) * hs + tl.dot(tl.trans(kd), vn)
    # as the official definition: an empty sequence's final state is zeros
    hs = tl.where(end > start, hs, 0.0)
    tl.store(ns_ptr + s_offs, hs)


def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, output, new_state):
    """Destination-passing: writes ``output`` [T, HV, V] (bf16) and ``new_state`` [N, HV, V, K]."""
    T, HQ, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    N = cu_seqlens.shape[0] - 1
    if K != K_DIM or V != V_DIM or HV % HQ:
        raise ValueError(f"specialised for K = V = 128 and grouped heads; got q {tuple(q.shape)}, v {tuple(v.shape)}")
    for name, x in (("q", q), ("k", k), ("v", v), ("a", a), ("b", b), ("cu_seqlens", cu_seqlens),
                    ("output", output), ("new_state", new_state)):
        if not x.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
    if state is not None and not state.is_contiguous():
        raise ValueError("state must be contiguous")
    if N <= 0:
        return
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(K)
    inter = torch.float16 if INTER_FP16 else torch.float32
    dev = q.device
    w = torch.empty((T, HV, K), dtype=inter, device=dev)
    u = torch.empty((T, HV, V), dtype=inter, device=dev)
    aqk = torch.empty((T, HV, CHUNK), dtype=torch.float32, device=dev)
    gam = torch.empty((T, HV), dtype=torch.float32, device=dev)
    if T > 0:
        n_chunks = triton.cdiv(T, CHUNK) + N  # upper bound on sum_i ceil(len_i / CHUNK)
        _gdn_chunk_prep[(n_chunks, HV)](q, k, v, A_log, a, dt_bias, b, cu_seqlens, w, u, aqk, gam, N,
                                        HV=HV, REP=HV // HQ, K=K, V=V, C=CHUNK, NP=triton.next_power_of_2(N + 1),
                                        LOG2C=int(math.log2(CHUNK)), num_warps=PREP_WARPS)
    _gdn_chunk_recurrence[(N, HV, V // BV)](q, k, state if state is not None else new_state, cu_seqlens, w, u, aqk, gam,
                                            output, new_state, float(scale), HV=HV, REP=HV // HQ, K=K, V=V,
                                            C=CHUNK, BV=BV, HAS_STATE=state is not None, STAGES=REC_STAGES,
                                            num_warps=REC_WARPS)
