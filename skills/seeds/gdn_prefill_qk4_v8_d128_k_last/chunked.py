"""Gated DeltaNet prefill over variable-length sequences, k-last state: chunked (WY/UT) form.

Write H = S^T ([K, V]) for one value head. Token by token the recurrence is
    H_t = g_t (I - beta_t k_t k_t^T) H_{t-1} + beta_t k_t v_t^T,    o_t = scale * H_t^T q_t.
Within a chunk of C tokens, with gamma_i = sum_{j<=i} log g_j (cumulative log-decay from the chunk
start; every exp below has a non-positive argument, so nothing overflows) and H the state at the
chunk start:
    A   = strictly lower [beta_i (k_i . k_j) exp(gamma_i - gamma_j)]     T = (I + A)^{-1}
    W   = T diag(beta exp(gamma)) K,   U = T diag(beta) V                  (the WY representation)
    Vn  = U - W H                                                          (corrected values)
    O   = scale * (diag(exp(gamma)) Q H + Aqk Vn),   Aqk = lower incl. diagonal [(q_i . k_j) exp(gamma_i - gamma_j)]
    H'  = exp(gamma_C) H + (diag(exp(gamma_C - gamma)) K)^T Vn.
Three kernels: (1) every chunk of every sequence and head in parallel: W, U, gamma and the decayed keys
KD = diag(exp(gamma_C - gamma)) K, with T from the nilpotent product (I + A)^{-1} =
prod_{n < 6} (I + (-A)^(2^n)) on 64-token blocks (squarings on tensor cores, no serial substitution); a
128-token chunk is two such blocks joined by [[T11, 0], [-T22 A21 T11, T22]]; (2) the only sequential
part, one program per (sequence, head, block of BV value columns) walking its chunks with the state in
registers (float32): per chunk two small matrix products, Vn = U - W H and H' = exp(gamma_C) H + KD^T
Vn, and a snapshot of H for the output; (3) every chunk in parallel again: the outputs from the
snapshots. Kernel 2's chain of chunks bounds a long single sequence, so it carries as little as
possible per step, and 128-token chunks halve its length (at twice the work per step, which is cheap:
the step is latency-bound).

Which chunk size: LONG_CHUNK when the sequences hold at least LONG_FROM tokens on average, else CHUNK
(measured on the H200, 2026-12-01: 128-token chunks cut the sequential pass at 1 x 8192 tokens from 254
to 143 us but doubled the prep, 37 -> 87 us; at 4 x 4096 64-token chunks were 84 us against 124).

Which BV for the sequential pass: its grid is (sequences, 8 heads, V / BV), so one or two sequences
leave most SMs idle at BV = 32 (32-64 programs on 132 SMs) and many sequences fill them. Measured on the
H200 (2026-12-01, recording 02, whole-call GPU time, 64-token chunks): BV = 16 was 7-9% faster than 32
for one sequence of 512-8192 tokens; BV = 64 was 4-9% faster for 6-32 sequences; 32 was best at 4. So
FEW_SEQS_BV up to FEW_SEQS sequences, MANY_SEQS_BV from MANY_SEQS on, BV between. A 128-token chunk
with BV = 64 spills at 4 warps (sm_90 ahead-of-time compile, Triton 3.9: 255 registers, 16 B; 162 at
8 warps), so that pair runs with at least 8 warps.

LONG_PREP_WARPS / LONG_OUT_WARPS: the warps of prep and output at 128-token chunks. The 128-token prep
spills at 4 warps (sm_90 compile: 2384 B per thread; ncu on the H200, 2026-12-03: 175 MB of local traffic
at 1 x 8192 tokens), but removing the spills (8 warps and the rows stored as soon as they exist, contest
forge PR #32 on an H100, 2026-12-06) left the call's time unchanged (1.006x, rejected): the prep is
latency-bound (a chain of ~25 small dependent dots per chunk), not spill-bound.

Short sequences (on average at most RECURRENT_MAX_LEN tokens each) take a token-by-token kernel
instead: one program per (sequence, head, block of rows), the state in registers, three dependent
launches' worth of fixed cost saved. The choice uses only shapes (T / num_seqs): no host sync.

Chunks never cross a sequence boundary: programs find their (sequence, chunk) from cu_seqlens on the
GPU; kernel 1 and 3 grids are an upper bound (ceil(T / C) + num_seqs) and spare programs exit.

Per-chunk transitions (TRANSITION_FROM > 0, sequences of at least that many tokens on average): the state
step H' = exp(gamma_C) H + KD^T (U - W H) is, expanded, H' = exp(gamma_C) H - P H + B with P = KD^T W
([K, K]) and B = KD^T U ([K, V]), which depend on the chunk only. A parallel kernel forms P and B for
every chunk; the sequential pass then does one product per chunk instead of two dependent ones (Vn's
product, its fp16 rounding and layout change, then KD^T Vn) and streams P and a [K, BV] block of B (32 KB
+ 8 KB at 128-token chunks, BV 16) instead of W, KD and U (64 KB + 4 KB); the output pass forms its Vn = U
- W H from the snapshot (TRANS_VN False), or the sequential pass computes Vn = U - W H beside the step, off
its chain (both products read the same snapshot; TRANS_VN True, the default: the output pass forming Vn
itself cost 37 us more than it saved at 1 x 8192 on an H100). Costs a pass over W, KD, U (and writes P,
B: 64 KB per chunk and head) and a launch, so only for long sequences, where the sequential chain bounds
the call (1 x 8192 tokens, H100: the state pass 134.9 -> 86.6 us with transitions, the transition pass
32.7 us; docs/measurements.md recording 36). TRANS_IN_PREP forms P and B at the end of the prep kernel
instead, from the W, U and KD it holds in registers (no second pass over them, no KD store; more work
and registers in a prep that is latency-bound).

Two-level scan (SCAN_GROUP > 0, one sequence with transitions): chunk j maps its start state to M_j H + B_j
with M_j = exp(gamma_C) I - P_j, so SCAN_GROUP consecutive chunks compose into one such map (M = the product
of their M_j, B = the group run from a zero state). _compose forms every group's (M, B) in parallel, _carry
walks the groups (H_{g+1} = M_g H_g + B_g, one product a step) and stores each group's start state, and the
sequential pass runs every group's chunks in parallel from it: 2 x SCAN_GROUP + n / SCAN_GROUP dependent steps
instead of n (1 x 8192 tokens at 128-token chunks: 24 instead of 64 at SCAN_GROUP 8), for two launches and
_compose's reads of P and B (each of its (K + V) / BV column-block programs loads the chunk's whole P). M's
products take fp16 operands like the state step's. Measured slower (H100, 2026-12-07, recording 37: 370-389 us
at 1 x 8192 against 295; skills/operators/gdn.md).

Numerics: the state stays float32; products take fp16 operands (10-bit mantissa, the range of these
values is far inside fp16's) with float32 accumulation; W, U, Vn and the snapshots are stored in fp16.
"""

import math

import torch
import triton
import triton.language as tl

K_DIM = 128
V_DIM = 128
CHUNK = 64  # kbot: tunable [64, 128] role=block
LONG_CHUNK = 128  # kbot: tunable [128, 64] role=block
LONG_FROM = 2048  # kbot: tunable [2048, 1024, 4096, 512] role=other
BV = 32  # kbot: tunable [32, 16, 64] role=block
FEW_SEQS = 2  # kbot: tunable [2, 0, 1, 4] role=other
FEW_SEQS_BV = 16  # kbot: tunable [16, 32] role=block
MANY_SEQS = 6  # kbot: tunable [6, 8, 16, 1000000, 1] role=other
MANY_SEQS_BV = 64  # kbot: tunable [64, 32] role=block
OUT_BV = 64  # kbot: tunable [64, 32, 128] role=block
PREP_WARPS = 4  # kbot: tunable [4, 8]
LONG_PREP_WARPS = 4  # kbot: tunable [4, 8]
STATE_WARPS = 4  # kbot: tunable [4, 8] role=warps
OUT_WARPS = 4  # kbot: tunable [4, 8]
LONG_OUT_WARPS = 4  # kbot: tunable [4, 8]
# 1 is not offered: the sequential pass without pipelining made an illegal memory access on the H100
# (Triton 3.6, 512 tokens in one sequence, 64-token chunks, BV 16; docs/measurements.md recording 29),
# not reproduced or understood on the CPU (the crash ended that sweep before 3 ran on a chunked workload).
STATE_STAGES = 2  # kbot: tunable [2, 3] role=stages
RECURRENT_MAX_LEN = 16  # kbot: tunable [16, 0, 8, 32, 64] role=other
REC_BV = 16  # kbot: tunable [16, 8, 32] role=block
REC_WARPS = 4  # kbot: tunable [4, 2, 1]
# The recurrent step's output from the state before the update, o = scale (g S q + u (k . q)) as the decode
# kernel does: both reductions over K read the old state side by side, so one leaves the per-token chain.
REC_PARALLEL_O = True  # kbot: tunable [True, False] role=other
TRANSITION_FROM = 0  # kbot: tunable [0, 2048, 4096, 1024, 16] role=other
TRANS_WARPS = 8  # kbot: tunable [8, 4]
TRANS_VN = True  # kbot: tunable [True, False] role=other
TRANS_IN_PREP = False  # kbot: tunable [False, True] role=other
SCAN_GROUP = 0  # kbot: tunable [0, 8, 4, 16, 2] role=other


@triton.jit
def _gates(a_ptr, b_ptr, alog_ptr, dtb_ptr, tk, h, live, HV: tl.constexpr):
    x = tl.load(a_ptr + tk * HV + h, mask=live, other=0.0).to(tl.float32) + tl.load(dtb_ptr + h)
    softplus = tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(x)))
    glog = tl.where(live, -tl.exp(tl.load(alog_ptr + h)) * softplus, 0.0)
    braw = tl.load(b_ptr + tk * HV + h, mask=live, other=0.0).to(tl.float32)
    beta = tl.where(live, 1.0 / (1.0 + tl.exp(-braw)), 0.0)
    return glog, beta


@triton.jit
def _locate_chunk(cu_ptr, c, N, C: tl.constexpr, NP: tl.constexpr):
    """Sequence, first token and end of the c-th chunk over all sequences in order (seq >= N: none)."""
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
def _first_chunk(cu_ptr, seq, N, C: tl.constexpr, NP: tl.constexpr):
    """Global index of sequence ``seq``'s first chunk (the number of chunks before it)."""
    i = tl.arange(0, NP)
    start = tl.load(cu_ptr + i, mask=i < N, other=0)
    end = tl.load(cu_ptr + i + 1, mask=i < N, other=0)
    nch = (end - start + C - 1) // C
    return tl.sum(tl.where(i < seq, nch, 0), axis=0)


@triton.jit
def _inverse(a_mat, r, LOG2C: tl.constexpr):
    """(I + A)^{-1} for a strictly lower triangular A: prod_n (I + P^(2^n)), P = -A (A^C = 0)."""
    p = (-a_mat).to(tl.float16)
    tm = tl.where(r[:, None] == r[None, :], 1.0, 0.0) - a_mat
    for _ in tl.static_range(LOG2C - 1):
        p = tl.dot(p, p).to(tl.float16)
        tm = tm + tl.dot(tm.to(tl.float16), p)
    return tm.to(tl.float16)


@triton.jit
def _decay_block(kq, kk_, beta, gam_i, gam_j, strict: tl.constexpr, r):
    """beta_i (kq_i . kk_j) exp(gamma_i - gamma_j), lower triangle of a diagonal block when ``strict``."""
    prod = tl.dot(kq, tl.trans(kk_))
    diff = gam_i[:, None] - gam_j[None, :]
    if strict:
        below = r[:, None] > r[None, :]
        return tl.where(below, beta[:, None] * prod * tl.exp(tl.where(below, diff, 0.0)), 0.0)
    return beta[:, None] * prod * tl.exp(diff)


@triton.jit
def _store_rows(w_ptr, u_ptr, kd_ptr, gam_ptr, row, live, w, u, kd, gam, K: tl.constexpr, V: tl.constexpr,
                KD: tl.constexpr):
    kk = tl.arange(0, K)
    vv = tl.arange(0, V)
    tl.store(w_ptr + row[:, None] * K + kk[None, :], w.to(tl.float16), mask=live[:, None])
    tl.store(u_ptr + row[:, None] * V + vv[None, :], u.to(tl.float16), mask=live[:, None])
    if KD:
        tl.store(kd_ptr + row[:, None] * K + kk[None, :], kd.to(tl.float16), mask=live[:, None])
    tl.store(gam_ptr + row, gam, mask=live)


@triton.jit
def _prep(k_ptr, v_ptr, alog_ptr, a_ptr, dtb_ptr, b_ptr, cu_ptr, w_ptr, u_ptr, kd_ptr, gam_ptr, gl_ptr, p_ptr, bt_ptr, N,
          HV: tl.constexpr, REP: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
          C: tl.constexpr, NP: tl.constexpr, TRANS: tl.constexpr):
    """W, U, gamma and the decayed keys KD = diag(exp(gamma_C - gamma)) K of one chunk; a chunk of 128
    is two blocks of 64 whose inverses combine as [[T11, 0], [-T22 A21 T11, T22]]. With TRANS the chunk's
    transition P = KD^T W, B = KD^T U (as _transition) instead of KD."""
    c = tl.program_id(0)
    h = tl.program_id(1)
    seq, t0, t1 = _locate_chunk(cu_ptr, c, N, C, NP)
    if seq >= N:
        return
    HQ: tl.constexpr = HV // REP
    B: tl.constexpr = 64
    hk = h // REP
    r = tl.arange(0, B)
    kk = tl.arange(0, K)
    vv = tl.arange(0, V)
    ta = (t0 + r).to(tl.int64)
    la = ta < t1
    ga, ba = _gates(a_ptr, b_ptr, alog_ptr, dtb_ptr, ta, h, la, HV)
    gam_a = tl.cumsum(ga, axis=0)
    ka = tl.load(k_ptr + (ta * HQ + hk)[:, None] * K + kk[None, :], mask=la[:, None], other=0.0)
    va = tl.load(v_ptr + (ta * HV + h)[:, None] * V + vv[None, :], mask=la[:, None], other=0.0)
    taa = _inverse(_decay_block(ka, ka, ba, gam_a, gam_a, True, r), r, 6)
    kba = (ka.to(tl.float32) * (ba * tl.exp(gam_a))[:, None]).to(tl.float16)
    vba = (va.to(tl.float32) * ba[:, None]).to(tl.float16)
    wa = tl.dot(taa, kba)
    ua = tl.dot(taa, vba)
    if C == 128:
        tb = ta + B
        lb = tb < t1
        gb, bb = _gates(a_ptr, b_ptr, alog_ptr, dtb_ptr, tb, h, lb, HV)
        gam_b = tl.cumsum(gb, axis=0) + tl.sum(ga, axis=0)
        kb = tl.load(k_ptr + (tb * HQ + hk)[:, None] * K + kk[None, :], mask=lb[:, None], other=0.0)
        vb = tl.load(v_ptr + (tb * HV + h)[:, None] * V + vv[None, :], mask=lb[:, None], other=0.0)
        tbb = _inverse(_decay_block(kb, kb, bb, gam_b, gam_b, True, r), r, 6)
        a_ba = _decay_block(kb, ka, bb, gam_b, gam_a, False, r)
        tba = -tl.dot(tbb, tl.dot(a_ba.to(tl.float16), taa).to(tl.float16))
        tba = tba.to(tl.float16)
        kbb = (kb.to(tl.float32) * (bb * tl.exp(gam_b))[:, None]).to(tl.float16)
        vbb = (vb.to(tl.float32) * bb[:, None]).to(tl.float16)
        wb = tl.dot(tba, kba) + tl.dot(tbb, kbb)
        ub = tl.dot(tba, vba) + tl.dot(tbb, vbb)
        gl = tl.sum(ga, axis=0) + tl.sum(gb, axis=0)
        kdb = tl.where(lb[:, None], kb.to(tl.float32) * tl.exp(gl - gam_b)[:, None], 0.0)
        _store_rows(w_ptr, u_ptr, kd_ptr, gam_ptr, tb * HV + h, lb, wb, ub, kdb, gam_b, K, V, not TRANS)
    else:
        gl = tl.sum(ga, axis=0)
    kda = tl.where(la[:, None], ka.to(tl.float32) * tl.exp(gl - gam_a)[:, None], 0.0)
    _store_rows(w_ptr, u_ptr, kd_ptr, gam_ptr, ta * HV + h, la, wa, ua, kda, gam_a, K, V, not TRANS)
    tl.store(gl_ptr + c * HV + h, gl)
    if TRANS:  # P = KD^T W and B = KD^T U over the chunk's rows (fp16 operands as everywhere; masked rows are 0)
        ch = (c * HV + h).to(tl.int64)
        kda16 = tl.trans(kda.to(tl.float16))
        pm = tl.dot(kda16, wa.to(tl.float16))
        if C == 128:
            kdb16 = tl.trans(kdb.to(tl.float16))
            pm = tl.dot(kdb16, wb.to(tl.float16), pm)
        tl.store(p_ptr + ch * (K * K) + kk[:, None] * K + kk[None, :], pm.to(tl.float16))
        bm = tl.dot(kda16, ua.to(tl.float16))
        if C == 128:
            bm = tl.dot(kdb16, ub.to(tl.float16), bm)
        tl.store(bt_ptr + ch * (K * V) + kk[:, None] * V + vv[None, :], bm.to(tl.float16))


@triton.jit
def _state(s_ptr, cu_ptr, w_ptr, u_ptr, kd_ptr, gl_ptr, snap_ptr, vn_ptr, ns_ptr, p_ptr, bt_ptr, gs_ptr, N,
           HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
           C: tl.constexpr, BV: tl.constexpr, NP: tl.constexpr, HAS_STATE: tl.constexpr, STAGES: tl.constexpr,
           TRANS: tl.constexpr, TRANS_VN: tl.constexpr, GROUP: tl.constexpr):
    """The sequential part: per chunk Vn = U - W H, a snapshot of H, H' = exp(gamma_C) H + KD^T Vn; with
    TRANS the chunk's transition instead (P = KD^T W, B = KD^T U from _transition): a snapshot of H, then
    H' = exp(gamma_C) H - P H + B, and with TRANS_VN also Vn = U - W H for the output pass, off the chain.
    GROUP > 0 (one sequence, TRANS): program_id(0) is a group of GROUP chunks, started from the state
    _carry stored for it, and only the group holding the last chunk writes the final state."""
    if GROUP > 0:
        seq = 0
        grp = tl.program_id(0)
    else:
        seq = tl.program_id(0)
        grp = 0
    h = tl.program_id(1)
    vb = tl.program_id(2)
    start = tl.load(cu_ptr + seq)
    end = tl.load(cu_ptr + seq + 1)
    base = _first_chunk(cu_ptr, seq, N, C, NP)
    n = (end - start + C - 1) // C
    kk = tl.arange(0, K)
    cols = vb * BV + tl.arange(0, BV)
    r = tl.arange(0, C)
    # the state block as H = S^T: hs[k, j] = S[seq, h, cols[j], k]
    s_offs = (seq * HV + h).to(tl.int64) * (V * K) + cols[None, :] * K + kk[:, None]
    if GROUP > 0:
        j0 = grp * GROUP
        j1 = tl.minimum(n, j0 + GROUP)
        hs = tl.load(gs_ptr + (grp * HV + h).to(tl.int64) * (K * V) + kk[:, None] * V + cols[None, :])
    else:
        j0 = 0
        j1 = n
        if HAS_STATE:
            hs = tl.load(s_ptr + s_offs)
        else:
            hs = tl.zeros([K, BV], dtype=tl.float32)
    for j in tl.range(j0, j1, num_stages=STAGES):
        cidx = base + j
        t = start + j * C + r
        live = t < end
        row = t.to(tl.int64) * HV + h
        # The chunk's tiles are loaded before the snapshot store, as the champion (PR #25) does: with the store
        # first, the many-sequence 64-token-chunk batches ran 3 % slower (H100, 2026-12-07, recording 37).
        if not TRANS or TRANS_VN:  # Vn = U - W H (with TRANS only for the output pass: off the chain)
            w = tl.load(w_ptr + row[:, None] * K + kk[None, :], mask=live[:, None], other=0.0)
            if not TRANS:
                kd = tl.load(kd_ptr + row[:, None] * K + kk[None, :], mask=live[:, None], other=0.0)
            u = tl.load(u_ptr + row[:, None] * V + cols[None, :], mask=live[:, None], other=0.0)
        gl = tl.load(gl_ptr + cidx * HV + h)
        hsh = hs.to(tl.float16)
        ch = (cidx * HV + h).to(tl.int64)
        tl.store(snap_ptr + ch * (K * V) + kk[:, None] * V + cols[None, :], hsh)
        if not TRANS or TRANS_VN:
            vnh = (u.to(tl.float32) - tl.dot(w, hsh)).to(tl.float16)
            tl.store(vn_ptr + row[:, None] * V + cols[None, :], vnh, mask=live[:, None])
        if TRANS:
            pm = tl.load(p_ptr + ch * (K * K) + kk[:, None] * K + kk[None, :])
            bt = tl.load(bt_ptr + ch * (K * V) + kk[:, None] * V + cols[None, :])
            hs = tl.exp(gl) * hs - tl.dot(pm, hsh) + bt.to(tl.float32)
        else:
            hs = tl.exp(gl) * hs + tl.dot(tl.trans(kd), vnh)
    # as the official definition: an empty sequence's final state is zeros
    hs = tl.where(end > start, hs, 0.0)
    if GROUP > 0:  # the group that ends the sequence
        if (j0 < n) & (j1 >= n):
            tl.store(ns_ptr + s_offs, hs)
    else:
        tl.store(ns_ptr + s_offs, hs)


@triton.jit
def _compose(gl_ptr, p_ptr, bt_ptr, comp_ptr, n, GROUP: tl.constexpr, HV: tl.constexpr, K: tl.constexpr,
             V: tl.constexpr, BW: tl.constexpr):
    """A group's GROUP chunks as one transition, every group (but the last) and head in parallel: with
    M_j = exp(gamma_C) I - P_j, the group maps its start state H to M H + B where M = M_last ... M_first
    and B is the group run from a zero state. X = [M | B] ([K, K + V], columns in blocks of BW) walks
    X <- exp(gamma_C) X - P_j X (+ [0 | B_j]) from [I | 0]: the chain's step, in parallel over groups."""
    g = tl.program_id(0)
    h = tl.program_id(1)
    cb = tl.program_id(2)
    kk = tl.arange(0, K)
    cols = cb * BW + tl.arange(0, BW)  # columns of [M | B]
    in_b = cols >= K  # a block is all M columns or all B columns (BW divides K)
    x = tl.where(kk[:, None] == cols[None, :], 1.0, 0.0)  # [I | 0]
    bcols = tl.where(in_b, cols - K, 0)
    for j in tl.range(g * GROUP, tl.minimum(n, (g + 1) * GROUP)):
        ch = (j * HV + h).to(tl.int64)
        pm = tl.load(p_ptr + ch * (K * K) + kk[:, None] * K + kk[None, :])
        bt = tl.load(bt_ptr + ch * (K * V) + kk[:, None] * V + bcols[None, :], mask=(kk[:, None] >= 0) & in_b[None, :],
                     other=0.0)
        x = tl.exp(tl.load(gl_ptr + j * HV + h)) * x - tl.dot(pm, x.to(tl.float16)) + bt.to(tl.float32)
    tl.store(comp_ptr + (g * HV + h).to(tl.int64) * (K * (K + V)) + kk[:, None] * (K + V) + cols[None, :], x)


@triton.jit
def _carry(s_ptr, comp_ptr, gs_ptr, G, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr,
           HAS_STATE: tl.constexpr):
    """The chain over groups (one sequence): stores each group's start state, H_{g+1} = M_g H_g + B_g."""
    h = tl.program_id(1)
    vb = tl.program_id(2)
    kk = tl.arange(0, K)
    cols = vb * BV + tl.arange(0, BV)
    if HAS_STATE:
        hs = tl.load(s_ptr + h.to(tl.int64) * (V * K) + cols[None, :] * K + kk[:, None])
    else:
        hs = tl.zeros([K, BV], dtype=tl.float32)
    for g in tl.range(0, G - 1):
        gh = (g * HV + h).to(tl.int64)
        tl.store(gs_ptr + gh * (K * V) + kk[:, None] * V + cols[None, :], hs)
        mg = tl.load(comp_ptr + gh * (K * (K + V)) + kk[:, None] * (K + V) + kk[None, :])
        bg = tl.load(comp_ptr + gh * (K * (K + V)) + kk[:, None] * (K + V) + K + cols[None, :])
        hs = tl.dot(mg.to(tl.float16), hs.to(tl.float16)) + bg
    tl.store(gs_ptr + ((G - 1) * HV + h).to(tl.int64) * (K * V) + kk[:, None] * V + cols[None, :], hs)


@triton.jit
def _transition(cu_ptr, w_ptr, u_ptr, kd_ptr, p_ptr, bt_ptr, N, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                C: tl.constexpr, NP: tl.constexpr):
    """One chunk's transition, every chunk and head in parallel: P = KD^T W [K, K] and B = KD^T U [K, V]
    (fp16 operands, float32 sums, stored fp16), so that H' = exp(gamma_C) H - P H + B."""
    c = tl.program_id(0)
    h = tl.program_id(1)
    seq, t0, t1 = _locate_chunk(cu_ptr, c, N, C, NP)
    if seq >= N:
        return
    r = tl.arange(0, C)
    kk = tl.arange(0, K)
    vv = tl.arange(0, V)
    t = t0 + r
    live = t < t1
    row = t.to(tl.int64) * HV + h
    kd = tl.load(kd_ptr + row[:, None] * K + kk[None, :], mask=live[:, None], other=0.0)
    w = tl.load(w_ptr + row[:, None] * K + kk[None, :], mask=live[:, None], other=0.0)
    ch = (c * HV + h).to(tl.int64)
    tl.store(p_ptr + ch * (K * K) + kk[:, None] * K + kk[None, :], tl.dot(tl.trans(kd), w).to(tl.float16))
    u = tl.load(u_ptr + row[:, None] * V + vv[None, :], mask=live[:, None], other=0.0)
    tl.store(bt_ptr + ch * (K * V) + kk[:, None] * V + vv[None, :], tl.dot(tl.trans(kd), u).to(tl.float16))


@triton.jit
def _output(q_ptr, k_ptr, cu_ptr, gam_ptr, snap_ptr, vn_ptr, w_ptr, u_ptr, o_ptr, scale, N,
            HV: tl.constexpr, REP: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
            C: tl.constexpr, BV: tl.constexpr, NP: tl.constexpr, TRANS: tl.constexpr):
    c = tl.program_id(0)
    h = tl.program_id(1)
    vb = tl.program_id(2)
    seq, t0, t1 = _locate_chunk(cu_ptr, c, N, C, NP)
    if seq >= N:
        return
    HQ: tl.constexpr = HV // REP
    hk = h // REP
    r = tl.arange(0, C)
    t = t0 + r
    live = t < t1
    tk = t.to(tl.int64)
    kk = tl.arange(0, K)
    cols = vb * BV + tl.arange(0, BV)
    row = tk * HV + h
    qc = tl.load(q_ptr + (tk * HQ + hk)[:, None] * K + kk[None, :], mask=live[:, None], other=0.0)
    kc = tl.load(k_ptr + (tk * HQ + hk)[:, None] * K + kk[None, :], mask=live[:, None], other=0.0)
    gam = tl.load(gam_ptr + row, mask=live, other=0.0)
    snap = tl.load(snap_ptr + (c * HV + h).to(tl.int64) * (K * V) + kk[:, None] * V + cols[None, :])
    if TRANS:  # the state pass stored no Vn: Vn = U - W H from the snapshot, as it would have
        w = tl.load(w_ptr + row[:, None] * K + kk[None, :], mask=live[:, None], other=0.0)
        u = tl.load(u_ptr + row[:, None] * V + cols[None, :], mask=live[:, None], other=0.0)
        vn = (u.to(tl.float32) - tl.dot(w, snap)).to(tl.float16)
    else:
        vn = tl.load(vn_ptr + row[:, None] * V + cols[None, :], mask=live[:, None], other=0.0)
    causal = r[:, None] >= r[None, :]
    qk = tl.dot(qc, tl.trans(kc))
    aqk = tl.where(causal, qk * tl.exp(tl.where(causal, gam[:, None] - gam[None, :], 0.0)), 0.0)
    o = tl.exp(gam)[:, None] * tl.dot(qc.to(tl.float16), snap) + tl.dot(aqk.to(tl.float16), vn)
    tl.store(o_ptr + row[:, None] * V + cols[None, :], (scale * o).to(o_ptr.dtype.element_ty), mask=live[:, None])


@triton.jit
def _recurrent(q_ptr, k_ptr, v_ptr, s_ptr, alog_ptr, a_ptr, dtb_ptr, b_ptr, cu_ptr, o_ptr, ns_ptr, scale,
               HV: tl.constexpr, REP: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr,
               HAS_STATE: tl.constexpr, PARALLEL_O: tl.constexpr):
    seq = tl.program_id(0)
    h = tl.program_id(1)
    vb = tl.program_id(2)
    HQ: tl.constexpr = HV // REP
    hk = h // REP
    start = tl.load(cu_ptr + seq)
    end = tl.load(cu_ptr + seq + 1)
    kk = tl.arange(0, K)
    rows = vb * BV + tl.arange(0, BV)
    offs = (seq * HV + h).to(tl.int64) * (V * K) + rows[:, None] * K + kk[None, :]
    if HAS_STATE:
        s = tl.load(s_ptr + offs)
    else:
        s = tl.zeros([BV, K], dtype=tl.float32)
    alpha = -tl.exp(tl.load(alog_ptr + h))
    dtb = tl.load(dtb_ptr + h)
    # the next token's inputs are loaded while the current one is applied (they never depend on the state)
    tk = start
    live = tk < end
    x = tl.load(a_ptr + tk * HV + h, mask=live, other=0.0).to(tl.float32)
    bb = tl.load(b_ptr + tk * HV + h, mask=live, other=0.0).to(tl.float32)
    q = tl.load(q_ptr + (tk * HQ + hk) * K + kk, mask=(tk + 0 * kk) < end, other=0.0).to(tl.float32)
    k = tl.load(k_ptr + (tk * HQ + hk) * K + kk, mask=(tk + 0 * kk) < end, other=0.0).to(tl.float32)
    v = tl.load(v_ptr + (tk * HV + h) * V + rows, mask=(tk + 0 * rows) < end, other=0.0).to(tl.float32)
    for i in tl.range(0, end - start):
        tn = tk + 1
        ln = tn < end
        xn = tl.load(a_ptr + tn * HV + h, mask=ln, other=0.0).to(tl.float32)
        bn = tl.load(b_ptr + tn * HV + h, mask=ln, other=0.0).to(tl.float32)
        qn = tl.load(q_ptr + (tn * HQ + hk) * K + kk, mask=(tn + 0 * kk) < end, other=0.0).to(tl.float32)
        kn = tl.load(k_ptr + (tn * HQ + hk) * K + kk, mask=(tn + 0 * kk) < end, other=0.0).to(tl.float32)
        vnx = tl.load(v_ptr + (tn * HV + h) * V + rows, mask=(tn + 0 * rows) < end, other=0.0).to(tl.float32)
        xs = x + dtb
        g = tl.exp(alpha * tl.where(xs > 20.0, xs, tl.log(1.0 + tl.exp(xs))))
        beta = 1.0 / (1.0 + tl.exp(-bb))
        if PARALLEL_O:
            sk = tl.sum(s * k[None, :], axis=1)
            sq = tl.sum(s * q[None, :], axis=1)
            u = beta * (v - g * sk)
            o = scale * (g * sq + u * tl.sum(k * q, axis=0))
            s = g * s + u[:, None] * k[None, :]
        else:
            u = beta * (v - g * tl.sum(s * k[None, :], axis=1))
            s = g * s + u[:, None] * k[None, :]
            o = scale * tl.sum(s * q[None, :], axis=1)
        tl.store(o_ptr + (tk * HV + h) * V + rows, o.to(o_ptr.dtype.element_ty))
        tk, x, bb, q, k, v = tn, xn, bn, qn, kn, vnx
    s = tl.where(end > start, s, 0.0)
    tl.store(ns_ptr + offs, s)


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
    s_in = state if state is not None else new_state
    rep = HV // HQ
    if T <= RECURRENT_MAX_LEN * N:
        _recurrent[(N, HV, V // REC_BV)](q, k, v, s_in, A_log, a, dt_bias, b, cu_seqlens, output, new_state, float(scale),
                                         HV=HV, REP=rep, K=K, V=V, BV=REC_BV, HAS_STATE=state is not None,
                                         PARALLEL_O=REC_PARALLEL_O, num_warps=REC_WARPS)
        return
    dev = q.device
    np2 = triton.next_power_of_2(N + 1)
    # Long sequences on average: the sequential pass dominates and longer chunks shorten it (at the cost
    # of a heavier parallel prep); otherwise the lighter 64-token prep and output win.
    chunk = LONG_CHUNK if T >= LONG_FROM * N else CHUNK
    n_chunks = triton.cdiv(T, chunk) + N  # an upper bound on sum_i ceil(len_i / chunk)
    trans = bool(TRANSITION_FROM) and T >= TRANSITION_FROM * N  # shapes only: no host sync
    w = torch.empty((T, HV, K), dtype=torch.float16, device=dev)
    kd = w if trans and TRANS_IN_PREP else torch.empty((T, HV, K), dtype=torch.float16, device=dev)  # in-prep: no KD
    u = torch.empty((T, HV, V), dtype=torch.float16, device=dev)
    out_vn = trans and not TRANS_VN  # the output pass forms Vn itself
    vn = w if out_vn else torch.empty((T, HV, V), dtype=torch.float16, device=dev)
    gam = torch.empty((T, HV), dtype=torch.float32, device=dev)
    glast = torch.empty((n_chunks, HV), dtype=torch.float32, device=dev)
    snap = torch.empty((n_chunks, HV, K, V), dtype=torch.float16, device=dev)
    long = chunk == 128
    if trans:  # each chunk's transition: P = KD^T W, B = KD^T U
        pm = torch.empty((n_chunks, HV, K, K), dtype=torch.float16, device=dev)
        bt = torch.empty((n_chunks, HV, K, V), dtype=torch.float16, device=dev)
    else:
        pm = bt = snap  # not read
    in_prep = trans and bool(TRANS_IN_PREP)
    _prep[(n_chunks, HV)](k, v, A_log, a, dt_bias, b, cu_seqlens, w, u, kd, gam, glast, pm, bt, N, HV=HV, REP=rep, K=K, V=V,
                          C=chunk, NP=np2, TRANS=in_prep, num_warps=LONG_PREP_WARPS if long else PREP_WARPS)
    if trans and not in_prep:
        _transition[(n_chunks, HV)](cu_seqlens, w, u, kd, pm, bt, N, HV=HV, K=K, V=V, C=chunk, NP=np2, num_warps=TRANS_WARPS)
    bv = FEW_SEQS_BV if N <= FEW_SEQS else MANY_SEQS_BV if N >= MANY_SEQS else BV
    state_warps = STATE_WARPS if bv * chunk < 64 * 128 else max(STATE_WARPS, 8)
    # One long sequence with transitions: the chain over its chunks as a two-level scan (groups of
    # SCAN_GROUP chunks composed in parallel, a short chain over the groups, then every group's own chain
    # in parallel): GROUP + ceil(n / GROUP) + GROUP dependent steps instead of n.
    n_seq_chunks = triton.cdiv(T, chunk)
    group = SCAN_GROUP if trans and N == 1 and SCAN_GROUP and n_seq_chunks > SCAN_GROUP else 0
    n_groups = triton.cdiv(n_seq_chunks, group) if group else 1
    gs = snap  # not read
    if group:
        comp = torch.empty((n_groups - 1, HV, K, K + V), dtype=torch.float32, device=dev)
        gs = torch.empty((n_groups, HV, K, V), dtype=torch.float32, device=dev)
        _compose[(n_groups - 1, HV, (K + V) // bv)](glast, pm, bt, comp, n_seq_chunks, GROUP=group, HV=HV, K=K, V=V,
                                                    BW=bv, num_warps=state_warps)
        _carry[(1, HV, V // bv)](s_in, comp, gs, n_groups, HV=HV, K=K, V=V, BV=bv, HAS_STATE=state is not None,
                                 num_warps=state_warps)
    _state[(n_groups if group else N, HV, V // bv)](
        s_in, cu_seqlens, w, u, kd, glast, snap, vn, new_state, pm, bt, gs, N, HV=HV, K=K, V=V, C=chunk, BV=bv, NP=np2,
        HAS_STATE=state is not None, STAGES=STATE_STAGES, TRANS=trans, TRANS_VN=bool(TRANS_VN), GROUP=group,
        num_warps=state_warps)
    _output[(n_chunks, HV, V // OUT_BV)](q, k, cu_seqlens, gam, snap, vn, w, u, output, float(scale), N, HV=HV, REP=rep,
                                         K=K, V=V, C=chunk, BV=OUT_BV, NP=np2, TRANS=out_vn,
                                         num_warps=LONG_OUT_WARPS if long else OUT_WARPS)
