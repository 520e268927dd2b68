"""DeepSeek-V3 MoE (one EP rank: 32 of 256 experts), FP8 block-scale weights and activations, in Triton.

Pipeline, everything on the GPU, no host synchronization (no .item()/.tolist()/.cpu(); grids are
sized by upper bounds and kernels read the real tile counts from device memory):

1. Routing: sigmoid scores, +bias for selection, top-2 sum per group of 32, top-4 groups, top-8
   experts inside them, weights from the unbiased scores normalized over the 8 times
   routed_scaling_factor. Then the (token, slot) pairs that chose a local expert are ordered
   expert-major: counts per expert, exclusive prefix sums, positions.
   - T <= SMALL_MAX_TOKENS: one single-program kernel does routing, counting and positions
     (deterministic one-hot prefix sums; no memset, one launch).
   - larger T: a multi-program routing kernel takes each pair's rank inside its expert with an atomic
     counter, a scatter kernel turns ranks into positions. Rows of one expert may come in any order;
     every row's arithmetic is independent of its neighbours and the final reduce sums a token's
     slots in slot order, so the output does not depend on that order.
2. GEMM1 per expert [rows_e, H] x W13_e^T with the block scales applied per 128-wide K step
   (``acc += dot(a, w) * a_scale[row] * w_scale[nblock]``, fp8 operands, fp32 accumulation), then
   SwiGLU ``up * silu(gate)`` with up = W13 rows [0, I), gate = rows [I, 2I) (the definition's order).
3. GEMM2 per expert [rows_e, I] x W2_e^T, block scales per K step, rows of bf16 expert outputs.
4. Reduce: out[t] = sum over the token's local slots of weight * row, in bf16 (tokens with no local
   expert get zeros).

Two paths for the GEMMs, chosen by token count (host-side shape, no sync):
- small (T <= SMALL_MAX_TOKENS): weight-bandwidth bound (only the touched experts' weights are read:
  ~44 MB per expert). Swap-AB: the weight tile is the MMA's M side (SMALL_BN rows), the few tokens its
  N side (SMALL_BT = 16, the tl.dot minimum), so wgmma runs with M = 64. GEMM1 is split along K
  (SMALL_SPLIT_K) so that one expert's 2048 intermediate columns still feed every SM; fp32 partials
  are summed by a small SwiGLU kernel into the intermediate: e4m3 with a scale per (row, 128 columns)
  by default (SMALL_INTER_FP8), so GEMM2 runs FP8 x FP8 from shared memory (measured 1.3-1.5x faster
  than converting each weight tile to bf16 in registers), or bf16 (per-token error ~0.3 % instead of
  ~2.5 %).
- large: persistent grouped GEMMs over (expert, m-tile, n-tile) with GROUP_M swizzling inside each
  expert (weights shared in L2 by the m-tiles running together), GEMM1's BLOCK_K = 128 = the scale
  block. GEMM1 fuses SwiGLU and, with INTER_FP8, requantizes the intermediate to FP8 with one scale per
  (row, G1_BN columns) (amax / 448, clamped: no overflow), so GEMM2 runs FP8 x FP8 too. Measured on
  CPU emulation at full size: per-token relative L2 error ~2.5 % with the FP8 intermediate (official
  rule: 96-99 % of elements within atol 1 / rtol 0.3, 90 % needed) and ~0.3 % with bf16.

Tunables (``# kbot: tunable``) list the best-known-good value first (the start configuration):
- SMALL_MAX_TOKENS: the small path up to this many tokens; SMALL_ROUTE_MAX: within it, routing in one
  program up to this many tokens (deterministic, one launch), above it the multi-program routing and
  scatter of the large path (more programs, two more launches);
- SMALL_ROUTE_BT: 0 routes the small path's tokens in one program (routing, counts and positions); n > 0
  routes them over T / n programs (_route_pairs_kernel) and takes the positions in one more program
  (_positions_kernel): the one-program kernel holds [64, 256] scores and spills at 33-64 tokens (ncu:
  0.39 MB of local-memory traffic on one SM), and one launch boundary costs ~1 us;
- SMALL_G2_STAGES / SMALL_STAGES: pipeline stages of the swap-AB GEMM2 / GEMM1. Memory-bound: each
  program keeps (stages - 1) weight tiles in flight (GEMM2 8 KB, GEMM1 16 KB a stage), and HBM needs
  ~40 KB in flight per SM to run at its copy rate; SMALL_PROGS_PER_SM: their persistent programs per SM
  (only as many as shared memory lets reside at once run together: more make a second wave);
- SMALL_G1_BT: the swap-AB GEMM1's token tile (0: SMALL_BT); 32 reads a hot expert's weight slab for
  half as many m-tiles (GEMM1 133 vs 141 us at 32 tokens on an H100, where 32 for both GEMMs slowed GEMM2);
- SMALL_INTER_FP8: the small path's intermediate in e4m3 with one scale per (row, 128 columns), written by
  the SwiGLU kernel, so the swap-AB GEMM2 runs FP8 x FP8 from shared memory instead of converting each
  weight tile to bf16 in registers (GEMM2 moved 191 MB in 112 us at 56 tokens on an H100: 1.7 TB/s, the
  small path's least efficient kernel); per-token error as the large path's (~2.5 %, token_l2 limit 8 %);
- BLOCK_M / G2_BLOCK_M: the m-tile of the large-batch GEMM1 / GEMM2. Per 128-wide K step a tile loads
  (BM + 2 * 128) * 128 B (GEMM1) or (BM + BLOCK_N2) * 128 B (GEMM2) from L2 for its MMAs, so BM = 128
  raises the FLOPs per L2 byte from 102 to 171 (GEMM1) and 85 to 128 (GEMM2). sm_90 AOT (Triton 3.6):
  GEMM1 BM 64 / 8 warps 178 registers, no spill, 123 KB shared; BM 128 255 registers, 24 B spill;
  GEMM2 BM 64 / 4 warps 234, no spill; BM 128 / 8 warps 200, no spill, 98 KB (scripts/moe_aot.py);
- G1_BN: GEMM1's up and gate columns per tile, and so the FP8 intermediate's requant block and GEMM2's
  K step (64: half the accumulator registers, so BM 128 fits without spilling or BM 64 with 4 warps
  runs 2-3 CTAs per SM, hiding the promotion; 2x the promotions in GEMM2);
- BIG_TILE_TOKENS: from this many tokens on, both large-batch GEMMs use 128-row m-tiles whatever
  BLOCK_M / G2_BLOCK_M say (many rows per expert: more FLOPs per L2 byte pays for the emptier tiles);
- G1_PROGS_PER_SM: persistent GEMM1 programs per SM (its shared memory fits one CTA per SM, so 2 makes
  a second wave that starts when the first ends); PROGS_PER_SM: the same for the other GEMMs.
- PREFETCH_SCALES: each K step loads the block scales of the next one (the first before the loop), so the
  promotion FMA does not wait on a load issued in its own step. ncu of the 64-row champion at 14107
  tokens (2026-12-03): GEMM1 3.22 ms, 51% of its stalls long-scoreboard, its only register loads the
  32-bit scale loads and the token ids. Not yet timed on the GPU, hence off by default.
- W_TMA / SMALL_W_TMA: the large / small path's GEMMs load the weight tiles (and GEMM2 its contiguous
  expert-major intermediate) with TMA (host-side tensor descriptors, one per operand and block shape)
  instead of per-thread pointer loads: one thread issues a tile's copy, no address registers per
  element (the large-tile GEMM1 sits at 255 registers), the tile lands swizzled for wgmma. The
  activations of GEMM1 stay pointer gathers (token rows in expert order: Hopper's TMA has no gather).
  Off where a base address or row stride is not 16-byte aligned (TMA's rule).
- W_SCALE_ONE: a tile's weight columns lie in one 128-wide scale block (BN <= 128), so a K step needs one
  weight scale, loaded as a 1-element vector, instead of a [BN] vector of the same value (in the wgmma
  layout each thread holds 32 of a 128-column vector: GEMM1's up and gate scales cost 64 registers, 128
  with PREFETCH_SCALES, and a 128-lane load each per step).
- SCALE_TMA: the large path's per-row activation scales through TMA descriptors, so Triton's pipeliner
  fetches them stages ahead like the tiles (a plain tl.load in the K loop is not pipelined: the TTGIR
  keeps it in the step that uses it). The scatter kernel writes GEMM1's scales expert-major, [P, H / 128]
  (BM rows of one box instead of BM gathers from [H / 128, T]); GEMM2 reads the intermediate's [P, I / G1_BN].
  A box is [BM, 4] (a TMA box's inner extent is at least 16 bytes, its start 16-byte aligned): a step
  takes its column of the four.
- BIG_G1_BLOCK_M: GEMM1's m-tile from BIG_TILE_TOKENS on (GEMM2's stays 128); G1_STAGES: GEMM1's pipeline
  depth (0: NUM_STAGES). With RESCALE_ACC, BIG_G1_BLOCK_M 64, G1_WARPS 4 and G1_STAGES 2 GEMM1 compiles to 239
  registers and 80 KB of shared memory: two CTAs per SM (G1_PROGS_PER_SM 2), one's promotion under the other's MMAs.
- RESCALE_ACC: the large GEMM1 keeps its accumulators divided by the current K step's scales and lets each
  step's wgmma accumulate into them in place (``acc = dot(a, w, acc * s_prev / s)``; the scales applied once
  after the loop): no second accumulator-sized register set for the dot's result, one multiply per element
  per step as before. The sum of a whole row then accumulates inside the tensor core across K steps (FP8
  wgmma's limited accumulation precision, DeepSeek-V3's report: ~14 bits) instead of being promoted to
  float32 registers every 128 of K: the error grows, to be measured against token_l2 (0.08) on the GPU.
Every K step of every GEMM waits for its wgmma before the scale FMA (SASS: WARPGROUP.DEPBAR 0): the
promotion overlaps MMAs only across CTAs resident on one SM.
"""

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

SMALL_MAX_TOKENS = 64  # kbot: tunable [64, 0, 16, 32, 128] role=other
SMALL_BT = 16  # kbot: tunable [16, 32] role=block
SMALL_BN = 64  # kbot: tunable [64, 32, 128] role=block
SMALL_SPLIT_K = 4  # kbot: tunable [4, 1, 2, 7, 8] role=split
SMALL_WARPS = 4  # kbot: tunable [4, 8] role=warps
SMALL_STAGES = 4  # kbot: tunable [4, 3, 5, 6] role=stages
SMALL_ROUTE_MAX = 64  # kbot: tunable [64, 0, 16, 32] role=other
SMALL_ROUTE_BT = 4  # kbot: tunable [4, 0, 2, 8, 16] role=block
# The large path's routing: tokens per program. A program's routing is a chain of ~14 dependent reductions
# over its [ROUTE_BT, 256] scores, so its time grows with the tokens it holds (H100, recording 35: 33 us at
# 80 tokens in 5 programs of 16, 104 us at 14107; the small path's 4-token programs took 7-9 us at 16-62).
# 4 tokens a program: 7.9 us at 80 tokens, 50 at 14107 (recording 45; PR #40, 1.010x: too little to promote).
ROUTE_BT = 4  # kbot: tunable [4, 16, 8] role=block
SMALL_G2_STAGES = 4  # kbot: tunable [4, 6, 8] role=stages
SMALL_PROGS_PER_SM = 3  # kbot: tunable [3, 2, 4] role=other
SMALL_G1_BT = 0  # kbot: tunable [0, 16, 32] role=block
SMALL_INTER_FP8 = True  # kbot: tunable [True, False] role=other
BLOCK_M = 64  # kbot: tunable [64, 128] role=block
G1_BN = 128  # kbot: tunable [128, 64] role=block
G2_BLOCK_M = 64  # kbot: tunable [64, 128] role=block
BLOCK_N2 = 128  # kbot: tunable [128, 64, 256] role=block
GROUP_M = 8  # kbot: tunable [8, 1, 4, 16] role=group
INTER_FP8 = True  # kbot: tunable [True, False] role=other
G1_WARPS = 8  # kbot: tunable [8, 4, 16] role=warps
G2_WARPS = 4  # kbot: tunable [4, 8] role=warps
NUM_STAGES = 3  # kbot: tunable [3, 4, 2] role=stages
PROGS_PER_SM = 2  # kbot: tunable [2, 1, 4] role=other
G1_PROGS_PER_SM = 2  # kbot: tunable [2, 1] role=other
BIG_TILE_TOKENS = 512  # kbot: tunable [512, 256, 2048, 1000000] role=other
PREFETCH_SCALES = 0  # kbot: tunable [0, 1] role=other
W_TMA = False  # kbot: tunable [False, True] role=other
SMALL_W_TMA = False  # kbot: tunable [False, True] role=other
SCALE_TMA = False  # kbot: tunable [False, True] role=other
W_SCALE_ONE = False  # kbot: tunable [False, True] role=other
RESCALE_ACC = False  # kbot: tunable [False, True] role=other
BIG_G1_BLOCK_M = 128  # kbot: tunable [128, 64] role=block
G1_STAGES = 0  # kbot: tunable [0, 2, 3, 4] role=stages
# From BIG_TILE_TOKENS tokens on, both large-batch GEMMs take 128-row m-tiles (GEMM2 with 8 warps): the
# H200 measured them 25% faster at 14107 tokens (4.66 vs 6.23 ms) and 7% at 901, 11% slower at 80
# tokens, where ~35 rows per expert leave a 128-row tile mostly empty (docs/measurements/h200-2026-12-01,
# moe_dev phase A, do_bench medians). GEMM1 at BM 128 spills 24 bytes (scripts/moe_aot.py).
BIG_G2_BLOCK_M, BIG_G2_WARPS = 128, 8

TOP_K = 8
N_GROUP = 8
TOPK_GROUP = 4
QBLOCK = 128  # the scale block of every FP8 input (and GEMM1's BLOCK_K; GEMM2's is G1_BN)
FP8_MAX = 448.0


# --------------------------------------------------------------------- CPU interpreter workarounds
# On CPU (TRITON_INTERPRET=1, how the harness checks Triton solutions without a GPU) two operations are
# wrong in Triton's interpreter: a bf16 tl.dot (numpy has no bf16) and the float32 -> float8e4nv
# conversion when rounding carries into the exponent, on ties and for subnormals. INTERP (set when the
# interpreter runs the kernels, not from the tensors' device: ``compiled_launches`` compiling CPU-shaped
# calls must see the GPU's code) takes the same products in fp32 (what a bf16 MMA computes: exact products,
# fp32 sums) and rounds to the e4m3 grid (nearest, ties to even) before converting, so the CPU runs
# the same math as the GPU's native instructions.


@triton.jit
def _dot_bf16(a, b, INTERP: tl.constexpr):
    if INTERP:
        return tl.dot(a.to(tl.float32), b.to(tl.float32))
    else:
        return tl.dot(a, b)


@triton.jit
def _to_e4m3(v, dtype, INTERP: tl.constexpr):
    """v (already within +-448) to float8e4nv, rounding to nearest even."""
    if INTERP:
        a = tl.abs(v)
        e = tl.maximum(tl.floor(tl.log2(tl.maximum(a, 1e-30))), -6.0)  # below 2^-6 the grid is 2^-9
        ulp = tl.exp2(e - 3.0)
        r = ((a / ulp + 8388608.0) - 8388608.0) * ulp  # fp32 addition rounds to nearest even
        v = tl.where(v < 0, -r, r)
    return v.to(dtype)


# ----------------------------------------------------------------------------------------- routing


@triton.jit
def _route_rows(logits_ptr, bias_ptr, t0, T, rsf, E: tl.constexpr, N_GROUP: tl.constexpr, TOPK_GROUP: tl.constexpr,
                TOP_K: tl.constexpr, BT: tl.constexpr):
    """Top-k global expert ids [BT, TOP_K] (int32) and combination weights [BT, TOP_K] of tokens t0..t0+BT."""
    GS: tl.constexpr = E // N_GROUP
    rows = t0 + tl.arange(0, BT)
    e_offs = tl.arange(0, E)
    x = tl.load(logits_ptr + rows[:, None].to(tl.int64) * E + e_offs[None, :], mask=(rows < T)[:, None], other=0.0)
    s = 1.0 / (1.0 + tl.exp(-x))
    sb = s + tl.load(bias_ptr + e_offs).to(tl.float32)[None, :]
    # group score: the sum of the two largest biased scores of the group
    sb3 = tl.reshape(sb, (BT, N_GROUP, GS))
    m1 = tl.max(sb3, axis=2)
    i1 = tl.argmax(sb3, axis=2)
    g_offs = tl.arange(0, GS)
    m2 = tl.max(tl.where(g_offs[None, None, :] == i1[:, :, None], float("-inf"), sb3), axis=2)
    gscore = m1 + m2
    grp = tl.arange(0, N_GROUP)
    keep = tl.zeros((BT, N_GROUP), dtype=tl.int32)
    for _ in tl.static_range(TOPK_GROUP):
        g = tl.argmax(gscore, axis=1)
        hit = grp[None, :] == g[:, None]
        keep = tl.where(hit, 1, keep)
        gscore = tl.where(hit, float("-inf"), gscore)
    keep_e = tl.reshape(tl.broadcast_to(keep[:, :, None], (BT, N_GROUP, GS)), (BT, E))
    cand = tl.where(keep_e != 0, sb, float("-inf"))
    k_offs = tl.arange(0, TOP_K)
    ids = tl.zeros((BT, TOP_K), dtype=tl.int32)
    wts = tl.zeros((BT, TOP_K), dtype=tl.float32)
    for k in tl.static_range(TOP_K):
        e = tl.argmax(cand, axis=1)
        hit = e_offs[None, :] == e[:, None]
        sk = tl.sum(tl.where(hit, s, 0.0), axis=1)  # the unbiased score of the chosen expert
        ids = tl.where(k_offs[None, :] == k, e[:, None], ids)
        wts = tl.where(k_offs[None, :] == k, sk[:, None], wts)
        cand = tl.where(hit, float("-inf"), cand)
    wts = wts / (tl.sum(wts, axis=1)[:, None] + 1e-20) * rsf
    return ids, wts


@triton.jit
def _expert_major(le, w, tok, T, counts_ptr, sorted_tok_ptr, row_of_ptr, w_ptr, E_LOCAL: tl.constexpr, NJ: tl.constexpr):
    """Pairs j (flat, [NJ]) with local expert le (outside [0, E_LOCAL): none) -> per-expert counts and
    expert-major positions by one-hot prefix sums (deterministic: a pair's rank is its order among its
    expert's pairs)."""
    j = tl.arange(0, NJ)
    valid = (le >= 0) & (le < E_LOCAL) & (tok < T)
    ex = tl.arange(0, E_LOCAL)
    oh = (valid[:, None] & (le[:, None] == ex[None, :])).to(tl.int32)  # [NJ, E_LOCAL]
    counts = tl.sum(oh, axis=0)
    starts = tl.cumsum(counts, axis=0) - counts
    rank = tl.sum(oh * tl.cumsum(oh, axis=0), axis=1) - 1
    dest = tl.sum(oh * starts[None, :], axis=1) + rank
    tl.store(counts_ptr + ex, counts)
    tl.store(sorted_tok_ptr + dest, tok, mask=valid)
    tl.store(row_of_ptr + j, tl.where(valid, dest, -1), mask=tok < T)
    tl.store(w_ptr + j, w, mask=tok < T)


@triton.jit
def _route_small_kernel(logits_ptr, bias_ptr, T, rsf, offset, counts_ptr, sorted_tok_ptr, row_of_ptr, w_ptr,
                        E: tl.constexpr, N_GROUP: tl.constexpr, TOPK_GROUP: tl.constexpr, TOP_K: tl.constexpr,
                        E_LOCAL: tl.constexpr, BT: tl.constexpr):
    """All T tokens in one program: routing, per-expert counts, expert-major positions (deterministic)."""
    ids, wts = _route_rows(logits_ptr, bias_ptr, 0, T, rsf, E, N_GROUP, TOPK_GROUP, TOP_K, BT)
    NJ: tl.constexpr = BT * TOP_K
    tok = tl.arange(0, NJ) // TOP_K
    _expert_major(tl.reshape(ids, (NJ,)) - offset, tl.reshape(wts, (NJ,)), tok, T, counts_ptr, sorted_tok_ptr, row_of_ptr,
                  w_ptr, E_LOCAL, NJ)


@triton.jit
def _route_pairs_kernel(logits_ptr, bias_ptr, T, rsf, offset, le_ptr, wpair_ptr, E: tl.constexpr, N_GROUP: tl.constexpr,
                        TOPK_GROUP: tl.constexpr, TOP_K: tl.constexpr, BT: tl.constexpr):
    """BT tokens per program: each pair's local expert (global id - offset; the positions kernel drops
    those outside the rank) and combination weight, flat [T * TOP_K]."""
    t0 = tl.program_id(0) * BT
    ids, wts = _route_rows(logits_ptr, bias_ptr, t0, T, rsf, E, N_GROUP, TOPK_GROUP, TOP_K, BT)
    rows = t0 + tl.arange(0, BT)
    flat = rows[:, None] * TOP_K + tl.arange(0, TOP_K)[None, :]
    tl.store(le_ptr + flat, ids - offset, mask=(rows < T)[:, None])
    tl.store(wpair_ptr + flat, wts, mask=(rows < T)[:, None])


@triton.jit
def _positions_kernel(le_ptr, wpair_ptr, T, counts_ptr, sorted_tok_ptr, row_of_ptr, w_ptr, TOP_K: tl.constexpr,
                      E_LOCAL: tl.constexpr, NJ: tl.constexpr):
    """One program: the pairs routed by _route_pairs_kernel to expert-major positions (as _route_small_kernel)."""
    j = tl.arange(0, NJ)
    tok = j // TOP_K
    m = tok < T
    le = tl.load(le_ptr + j, mask=m, other=-1)
    w = tl.load(wpair_ptr + j, mask=m, other=0.0)
    _expert_major(le, w, tok, T, counts_ptr, sorted_tok_ptr, row_of_ptr, w_ptr, E_LOCAL, NJ)


@triton.jit
def _route_kernel(logits_ptr, bias_ptr, T, rsf, offset, counts_ptr, le_ptr, rank_ptr, w_ptr,
                  E: tl.constexpr, N_GROUP: tl.constexpr, TOPK_GROUP: tl.constexpr, TOP_K: tl.constexpr,
                  E_LOCAL: tl.constexpr, BT: tl.constexpr):
    """BT tokens per program; each local pair takes its rank inside its expert from an atomic counter."""
    t0 = tl.program_id(0) * BT
    ids, wts = _route_rows(logits_ptr, bias_ptr, t0, T, rsf, E, N_GROUP, TOPK_GROUP, TOP_K, BT)
    rows = t0 + tl.arange(0, BT)
    rmask = (rows < T)[:, None]
    le = ids - offset
    valid = (le >= 0) & (le < E_LOCAL) & rmask
    rank = tl.atomic_add(counts_ptr + tl.where(valid, le, 0), 1, mask=valid)
    flat = rows[:, None] * TOP_K + tl.arange(0, TOP_K)[None, :]
    tl.store(le_ptr + flat, tl.where(valid, le, -1), mask=rmask)
    tl.store(rank_ptr + flat, rank, mask=valid)
    tl.store(w_ptr + flat, wts, mask=rmask)


@triton.jit
def _scatter_kernel(counts_ptr, le_ptr, rank_ptr, sorted_tok_ptr, row_of_ptr, hs_scale_ptr, sa_perm_ptr, NJ, T,
                    TOP_K: tl.constexpr, E_LOCAL: tl.constexpr, BLOCK: tl.constexpr, KB: tl.constexpr, PERM_SCALES: tl.constexpr):
    """Expert-major position of every local pair = start of its expert + its rank. With PERM_SCALES also
    the pair's activation scales in expert-major order: sa_perm[dest, kb] = hs_scale[kb, token] ([NJ, KB])."""
    j = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = j < NJ
    le = tl.load(le_ptr + j, mask=m, other=-1)
    valid = le >= 0
    rank = tl.load(rank_ptr + j, mask=valid, other=0)
    ex = tl.arange(0, E_LOCAL)
    counts = tl.load(counts_ptr + ex)
    starts = tl.cumsum(counts, axis=0) - counts
    dest = tl.sum(tl.where(le[:, None] == ex[None, :], starts[None, :], 0), axis=1) + rank
    tl.store(sorted_tok_ptr + dest, j // TOP_K, mask=valid)
    tl.store(row_of_ptr + j, tl.where(valid, dest, -1), mask=m)
    if PERM_SCALES:
        tok = j // TOP_K
        for kb in range(KB):
            sc = tl.load(hs_scale_ptr + kb * T + tok, mask=valid, other=0.0)
            tl.store(sa_perm_ptr + dest.to(tl.int64) * KB + kb, sc, mask=valid)


# ------------------------------------------------------------------------------------ tile schedule


@triton.jit
def _num_tiles(counts_ptr, E_LOCAL: tl.constexpr, BM: tl.constexpr, PER_M: tl.constexpr):
    cnt = tl.load(counts_ptr + tl.arange(0, E_LOCAL))
    return tl.sum((cnt + BM - 1) // BM, axis=0) * PER_M


@triton.jit
def _tile_of(tile, counts_ptr, E_LOCAL: tl.constexpr, BM: tl.constexpr, N_TILES: tl.constexpr, SPLIT: tl.constexpr,
             GROUP: tl.constexpr):
    """Tile id -> (expert, first row, end row of the expert, n tile, K split). Tiles are expert-major;
    inside an expert, groups of GROUP m-tiles walk the n-tiles with m fastest (weights shared in L2)."""
    ex = tl.arange(0, E_LOCAL)
    cnt = tl.load(counts_ptr + ex)
    mt = (cnt + BM - 1) // BM
    per = mt * (N_TILES * SPLIT)
    end = tl.cumsum(per, axis=0)
    e = tl.sum((end <= tile).to(tl.int32), axis=0)
    sel = ex == e
    t_start = tl.sum(tl.where(sel, end - per, 0), axis=0)
    m_e = tl.sum(tl.where(sel, mt, 0), axis=0)
    row0 = tl.sum(tl.where(sel, tl.cumsum(cnt, axis=0) - cnt, 0), axis=0)
    rows_e = tl.sum(tl.where(sel, cnt, 0), axis=0)
    local = tile - t_start
    split = local % SPLIT
    local = local // SPLIT
    per_group = GROUP * N_TILES
    first_m = (local // per_group) * GROUP
    gsize = tl.minimum(m_e - first_m, GROUP)
    within = local % per_group
    m = first_m + within % gsize
    n = within // gsize
    return e, row0 + m * BM, row0 + rows_e, n, split


# ------------------------------------------------------------------------------------ large batches


@triton.jit
def _scale_col(desc, r0, kb):
    """Column kb of a [rows, K blocks] fp32 scale array for the rows r0 .. r0 + BM, through a TMA descriptor
    of block [BM, 4] (the box starts at a multiple of 4 columns: 16-byte aligned)."""
    v = desc.load([r0, (kb // 4) * 4])
    c = tl.arange(0, 4)
    return tl.sum(tl.where(c[None, :] == kb % 4, v, 0.0), axis=1)


@triton.jit
def _gemm1_tile(hs_ptr, hs_scale_ptr, sa_desc, w_ptr, w_desc, ws_ptr, sorted_tok_ptr, e, r0, r_end, n, kb0, T,
                KSTEPS: tl.constexpr, H: tl.constexpr, I: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, QB: tl.constexpr,
                SWAP: tl.constexpr, PREFETCH: tl.constexpr, TMA: tl.constexpr, SCALE_TMA: tl.constexpr, WS1: tl.constexpr,
                RESCALE: tl.constexpr = False):
    """One GEMM1 tile over K blocks kb0 .. kb0 + KSTEPS: BM rows of expert e (their tokens' activations)
    against BN up rows and the BN matching gate rows of W13_e (gate = rows I..2I), the block scales
    applied per 128-wide K step: ``acc += dot(a, w) * a_scale[row] * w_scale[nblock, kblock]``.
    With TMA the weight tiles come through w_desc (W13 as [E_LOCAL * 2I, H], block [BN, QB]); with SCALE_TMA
    the rows' scales through sa_desc (expert-major [P, H / QB], block [BM, 4]; not with SWAP or PREFETCH).
    Returns rows, their mask, the BN columns and the up and gate accumulators, [BM, BN] or, with SWAP
    (weights as the MMA's M side, for a few rows), [BN, BM]. With RESCALE (not with SWAP) the accumulators hold
    the sum divided by the current step's scales, so each step's dot accumulates into them in place:
    ``acc = dot(a, w, acc * s_prev / s)``, and the scales are applied once after the loop."""
    HB: tl.constexpr = H // QB
    rows = r0 + tl.arange(0, BM)
    rmask = rows < r_end
    tok = tl.load(sorted_tok_ptr + rows, mask=rmask, other=0)
    cols = n * BN + tl.arange(0, BN)
    k = kb0 * QB + tl.arange(0, QB)
    a_ptrs = hs_ptr + tok[:, None].to(tl.int64) * H + k[None, :]
    wu_ptrs = w_ptr + e.to(tl.int64) * (2 * I * H) + cols[:, None].to(tl.int64) * H + k[None, :]
    wg_ptrs = wu_ptrs + I * H
    wrow = e * (2 * I) + n * BN  # the up tile's first row in W13 viewed as [E_LOCAL * 2I, H] (TMA)
    if WS1:  # BN <= QB: one weight scale block per tile (a 1-element vector broadcasts like a [BN] one)
        sblk = (n * BN) // QB + tl.arange(0, 1)
    else:
        sblk = cols // QB
    su_ptrs = ws_ptr + e * (2 * I // QB) * HB + sblk * HB
    sg_ptrs = su_ptrs + (I // QB) * HB
    if SWAP:
        acc_u = tl.zeros((BN, BM), dtype=tl.float32)
        acc_g = tl.zeros((BN, BM), dtype=tl.float32)
    else:
        acc_u = tl.zeros((BM, BN), dtype=tl.float32)
        acc_g = tl.zeros((BM, BN), dtype=tl.float32)
    if PREFETCH:  # the first step's scales before the loop; each step then loads the next one's
        sa = tl.load(hs_scale_ptr + kb0 * T + tok, mask=rmask, other=0.0)
        su = tl.load(su_ptrs + kb0)
        sg = tl.load(sg_ptrs + kb0)
    if RESCALE:  # the scales the accumulators are divided by (none before the first step: acc is 0)
        sa_p = tl.full([BM], 1.0, tl.float32)
        su_p = tl.full(sblk.shape, 1.0, tl.float32)
        sg_p = tl.full(sblk.shape, 1.0, tl.float32)
    for kk in range(KSTEPS):
        kb = kb0 + kk
        a = tl.load(a_ptrs, mask=rmask[:, None], other=0.0)
        if PREFETCH:
            nk = tl.minimum(kb + 1, kb0 + KSTEPS - 1)  # the last step reloads its own (in L1)
            sa_next = tl.load(hs_scale_ptr + nk * T + tok, mask=rmask, other=0.0)
            su_next = tl.load(su_ptrs + nk)
            sg_next = tl.load(sg_ptrs + nk)
        else:
            if SCALE_TMA:
                sa = _scale_col(sa_desc, r0, kb)
            else:
                sa = tl.load(hs_scale_ptr + kb * T + tok, mask=rmask, other=0.0)  # hidden_states_scale is [H / 128, T]
            su = tl.load(su_ptrs + kb)
            sg = tl.load(sg_ptrs + kb)
        if TMA:
            wu = w_desc.load([wrow, kb * QB])
            wg = w_desc.load([wrow + I, kb * QB])
        else:
            wu = tl.load(wu_ptrs)
            wg = tl.load(wg_ptrs)
        if SWAP:
            acc_u += tl.dot(wu, tl.trans(a)) * (su[:, None] * sa[None, :])
            acc_g += tl.dot(wg, tl.trans(a)) * (sg[:, None] * sa[None, :])
        elif RESCALE:
            # masked rows load a 0 scale: keep every divisor positive (a 0 scale's block contributes ~0 either way)
            sa_c = tl.maximum(sa, 1e-12)
            su_c = tl.maximum(su, 1e-12)
            sg_c = tl.maximum(sg, 1e-12)
            ra = sa_p / sa_c
            acc_u = tl.dot(a, tl.trans(wu), acc_u * (ra[:, None] * (su_p / su_c)[None, :]))
            acc_g = tl.dot(a, tl.trans(wg), acc_g * (ra[:, None] * (sg_p / sg_c)[None, :]))
            sa_p, su_p, sg_p = sa_c, su_c, sg_c
        else:
            acc_u += tl.dot(a, tl.trans(wu)) * (sa[:, None] * su[None, :])
            acc_g += tl.dot(a, tl.trans(wg)) * (sa[:, None] * sg[None, :])
        if PREFETCH:
            sa, su, sg = sa_next, su_next, sg_next
        a_ptrs += QB
        wu_ptrs += QB
        wg_ptrs += QB
    if RESCALE:
        acc_u = acc_u * (sa_p[:, None] * su_p[None, :])
        acc_g = acc_g * (sa_p[:, None] * sg_p[None, :])
    return rows, rmask, cols, acc_u, acc_g


@triton.jit
def _gemm1_kernel(hs_ptr, hs_scale_ptr, sa_desc, w_ptr, w_desc, ws_ptr, counts_ptr, sorted_tok_ptr, inter_ptr, inter_scale_ptr,
                  T, P, H: tl.constexpr, I: tl.constexpr, E_LOCAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                  GROUP: tl.constexpr, INTER_FP8: tl.constexpr, QB: tl.constexpr, FP8_MAX: tl.constexpr,
                  INTERP: tl.constexpr, PREFETCH: tl.constexpr, TMA: tl.constexpr, SCALE_TMA: tl.constexpr,
                  WS1: tl.constexpr, RESCALE: tl.constexpr):
    """[rows_e, H] x W13_e^T -> up * silu(gate), persistent over tiles of BM rows and BN up + BN gate
    columns (BN divides QB: a tile's weight columns share one scale block). With INTER_FP8 the tile's
    BN intermediate columns are one requant block (scale per (row, BN columns)): inter_scale [P, I / BN]."""
    N_TILES: tl.constexpr = I // BN
    KB: tl.constexpr = H // QB
    total = _num_tiles(counts_ptr, E_LOCAL, BM, N_TILES)
    for tile in range(tl.program_id(0), total, tl.num_programs(0)):
        e, r0, r_end, n, _s = _tile_of(tile, counts_ptr, E_LOCAL, BM, N_TILES, 1, GROUP)
        rows, rmask, cols, acc_u, acc_g = _gemm1_tile(hs_ptr, hs_scale_ptr, sa_desc, w_ptr, w_desc, ws_ptr, sorted_tok_ptr, e, r0,
                                                      r_end, n, 0, T, KB, H, I, BM, BN, QB, False, PREFETCH, TMA, SCALE_TMA,
                                                      WS1, RESCALE)
        c = acc_u * (acc_g / (1.0 + tl.exp(-acc_g)))
        o_ptrs = inter_ptr + rows[:, None].to(tl.int64) * I + cols[None, :]
        if INTER_FP8:
            scale = tl.maximum(tl.max(tl.abs(c), axis=1), 1e-30) / FP8_MAX
            q = tl.clamp(c / scale[:, None], -FP8_MAX, FP8_MAX)
            tl.store(o_ptrs, _to_e4m3(q, inter_ptr.dtype.element_ty, INTERP), mask=rmask[:, None])
            tl.store(inter_scale_ptr + rows * N_TILES + n, scale, mask=rmask)
        else:
            tl.store(o_ptrs, c.to(inter_ptr.dtype.element_ty), mask=rmask[:, None])


@triton.jit
def _gemm2_kernel(inter_ptr, a_desc, inter_scale_ptr, sa_desc, w_ptr, w_desc, ws_ptr, counts_ptr, y_ptr, H: tl.constexpr,
                  I: tl.constexpr, E_LOCAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, GROUP: tl.constexpr,
                  INTER_FP8: tl.constexpr, QB: tl.constexpr, IQB: tl.constexpr, INTERP: tl.constexpr,
                  PREFETCH: tl.constexpr, TMA: tl.constexpr, SCALE_TMA: tl.constexpr, WS1: tl.constexpr):
    """[rows_e, I] x W2_e^T -> bf16 rows of expert outputs, persistent over tiles; K steps of IQB (the
    intermediate's scale block, dividing QB: W2's scale is that of the QB block holding the step). With TMA
    the intermediate's tiles come through a_desc ([P, I], block [BM, IQB]: rows past the expert's end are
    another expert's or zeros, computed and not stored) and W2's through w_desc ([E_LOCAL * H, I], block
    [BN, IQB]). With SCALE_TMA (and INTER_FP8, no PREFETCH) the intermediate's scales come through sa_desc
    ([P, I / IQB], block [BM, 4])."""
    N_TILES: tl.constexpr = H // BN
    KB: tl.constexpr = I // IQB
    KBW: tl.constexpr = I // QB
    total = _num_tiles(counts_ptr, E_LOCAL, BM, N_TILES)
    k = tl.arange(0, IQB)
    for tile in range(tl.program_id(0), total, tl.num_programs(0)):
        e, r0, r_end, n, _s = _tile_of(tile, counts_ptr, E_LOCAL, BM, N_TILES, 1, GROUP)
        rows = r0 + tl.arange(0, BM)
        rmask = rows < r_end
        cols = n * BN + tl.arange(0, BN)
        a_ptrs = inter_ptr + rows[:, None].to(tl.int64) * I + k[None, :]
        w_ptrs = w_ptr + e.to(tl.int64) * (H * I) + cols[:, None].to(tl.int64) * I + k[None, :]
        if WS1:  # BN <= QB: one weight scale block per tile
            s_ptrs = ws_ptr + e * (H // QB) * KBW + ((n * BN) // QB + tl.arange(0, 1)) * KBW
        else:
            s_ptrs = ws_ptr + e * (H // QB) * KBW + (cols // QB) * KBW
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        if PREFETCH:  # the first step's scales before the loop; each step then loads the next one's
            sw = tl.load(s_ptrs)
            if INTER_FP8:
                sa = tl.load(inter_scale_ptr + rows * KB, mask=rmask, other=0.0)
        for kb in range(KB):
            if TMA:
                a = a_desc.load([r0, kb * IQB])
                w = w_desc.load([e * H + n * BN, kb * IQB])
            else:
                a = tl.load(a_ptrs, mask=rmask[:, None], other=0.0)
                w = tl.load(w_ptrs)
            if PREFETCH:
                nk = tl.minimum(kb + 1, KB - 1)
                sw_next = tl.load(s_ptrs + (nk * IQB) // QB)
                if INTER_FP8:
                    sa_next = tl.load(inter_scale_ptr + rows * KB + nk, mask=rmask, other=0.0)
            else:
                sw = tl.load(s_ptrs + (kb * IQB) // QB)
            if INTER_FP8:
                if SCALE_TMA:
                    sa = _scale_col(sa_desc, r0, kb)
                elif not PREFETCH:
                    sa = tl.load(inter_scale_ptr + rows * KB + kb, mask=rmask, other=0.0)
                acc += tl.dot(a, tl.trans(w)) * (sa[:, None] * sw[None, :])
            else:
                acc += _dot_bf16(a, tl.trans(w.to(tl.bfloat16)), INTERP) * sw[None, :]
            if PREFETCH:
                sw = sw_next
                if INTER_FP8:
                    sa = sa_next
            a_ptrs += IQB
            w_ptrs += IQB
        tl.store(y_ptr + rows[:, None].to(tl.int64) * H + cols[None, :], acc.to(tl.bfloat16), mask=rmask[:, None])


# ------------------------------------------------------------------------------------ small batches


@triton.jit
def _gemm1_swap_kernel(hs_ptr, hs_scale_ptr, w_ptr, w_desc, ws_ptr, counts_ptr, sorted_tok_ptr, part_ptr, T, P,
                       H: tl.constexpr, I: tl.constexpr, E_LOCAL: tl.constexpr, BT: tl.constexpr, BN: tl.constexpr,
                       SPLIT: tl.constexpr, QB: tl.constexpr, PREFETCH: tl.constexpr, TMA: tl.constexpr, WS1: tl.constexpr):
    """Swap-AB GEMM1: (W13 rows) x (tokens)^T per K split; fp32 partials part[split, row, 0:2I]."""
    N_TILES: tl.constexpr = I // BN
    KB_PER: tl.constexpr = H // QB // SPLIT
    total = _num_tiles(counts_ptr, E_LOCAL, BT, N_TILES * SPLIT)
    for tile in range(tl.program_id(0), total, tl.num_programs(0)):
        e, r0, r_end, n, sp = _tile_of(tile, counts_ptr, E_LOCAL, BT, N_TILES, SPLIT, 1)
        kb0 = sp * KB_PER
        rows, rmask, cols, acc_u, acc_g = _gemm1_tile(hs_ptr, hs_scale_ptr, hs_scale_ptr, w_ptr, w_desc, ws_ptr, sorted_tok_ptr, e,
                                                      r0, r_end, n, kb0, T, KB_PER, H, I, BT, BN, QB, True, PREFETCH, TMA, False, WS1)
        p_ptrs = part_ptr + sp.to(tl.int64) * P * (2 * I) + rows[None, :].to(tl.int64) * (2 * I) + cols[:, None]
        tl.store(p_ptrs, acc_u, mask=rmask[None, :])
        tl.store(p_ptrs + I, acc_g, mask=rmask[None, :])


@triton.jit
def _swiglu_kernel(part_ptr, counts_ptr, inter_ptr, inter_scale_ptr, P, I: tl.constexpr, E_LOCAL: tl.constexpr,
                   SPLIT: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr, A_FP8: tl.constexpr, FP8_MAX: tl.constexpr,
                   INTERP: tl.constexpr):
    """Sum the K-split partials and apply up * silu(gate) -> intermediate rows: bf16, or with A_FP8 e4m3
    with one scale per (row, BC columns) (amax / FP8_MAX, clamped: no overflow), as the large path's GEMM1."""
    n_valid = tl.sum(tl.load(counts_ptr + tl.arange(0, E_LOCAL)), axis=0)
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    m = (r < n_valid)[:, None]
    up = tl.zeros((BR, BC), dtype=tl.float32)
    gate = tl.zeros((BR, BC), dtype=tl.float32)
    for sp in tl.static_range(SPLIT):
        base = part_ptr + sp * P * (2 * I) + r[:, None].to(tl.int64) * (2 * I) + c[None, :]
        up += tl.load(base, mask=m, other=0.0)
        gate += tl.load(base + I, mask=m, other=0.0)
    out = up * (gate / (1.0 + tl.exp(-gate)))
    o_ptrs = inter_ptr + r[:, None].to(tl.int64) * I + c[None, :]
    if A_FP8:
        scale = tl.maximum(tl.max(tl.abs(out), axis=1), 1e-30) / FP8_MAX
        q = tl.clamp(out / scale[:, None], -FP8_MAX, FP8_MAX)
        tl.store(o_ptrs, _to_e4m3(q, inter_ptr.dtype.element_ty, INTERP), mask=m)
        tl.store(inter_scale_ptr + r * (I // BC) + tl.program_id(1), scale, mask=r < n_valid)
    else:
        tl.store(o_ptrs, out.to(tl.bfloat16), mask=m)


@triton.jit
def _gemm2_swap_kernel(inter_ptr, a_desc, inter_scale_ptr, w_ptr, w_desc, ws_ptr, counts_ptr, y_ptr, H: tl.constexpr,
                       I: tl.constexpr, E_LOCAL: tl.constexpr, BT: tl.constexpr, BN: tl.constexpr, QB: tl.constexpr,
                       A_FP8: tl.constexpr, INTERP: tl.constexpr, TMA: tl.constexpr, WS1: tl.constexpr):
    """Swap-AB GEMM2: (W2 rows) x (intermediate)^T. A bf16 intermediate: the weights FP8 -> bf16 with their block
    scale, a 16-bit MMA; with A_FP8 (e4m3 intermediate, scale per (row, QB columns)): FP8 x FP8, both scales
    applied per K step."""
    N_TILES: tl.constexpr = H // BN
    KB: tl.constexpr = I // QB
    total = _num_tiles(counts_ptr, E_LOCAL, BT, N_TILES)
    k = tl.arange(0, QB)
    for tile in range(tl.program_id(0), total, tl.num_programs(0)):
        e, r0, r_end, n, _s = _tile_of(tile, counts_ptr, E_LOCAL, BT, N_TILES, 1, 1)
        rows = r0 + tl.arange(0, BT)
        rmask = rows < r_end
        cols = n * BN + tl.arange(0, BN)
        a_ptrs = inter_ptr + rows[:, None].to(tl.int64) * I + k[None, :]
        w_ptrs = w_ptr + e.to(tl.int64) * (H * I) + cols[:, None].to(tl.int64) * I + k[None, :]
        if WS1:  # BN <= QB: one weight scale block per tile
            s_ptrs = ws_ptr + e * (H // QB) * KB + ((n * BN) // QB + tl.arange(0, 1)) * KB
        else:
            s_ptrs = ws_ptr + e * (H // QB) * KB + (cols // QB) * KB
        acc = tl.zeros((BN, BT), dtype=tl.float32)
        for kb in range(KB):
            if TMA:  # as _gemm2_kernel's: block [BT, QB] of the intermediate, [BN, QB] of W2
                a = a_desc.load([r0, kb * QB])
                w = w_desc.load([e * H + n * BN, kb * QB])
            else:
                a = tl.load(a_ptrs, mask=rmask[:, None], other=0.0)
                w = tl.load(w_ptrs)
            sw = tl.load(s_ptrs + kb)
            if A_FP8:
                sa = tl.load(inter_scale_ptr + rows * KB + kb, mask=rmask, other=0.0)
                acc += tl.dot(w, tl.trans(a)) * (sw[:, None] * sa[None, :])
            else:
                acc += _dot_bf16(w.to(tl.bfloat16), tl.trans(a), INTERP) * sw[:, None]
            a_ptrs += QB
            w_ptrs += QB
        tl.store(y_ptr + rows[None, :].to(tl.int64) * H + cols[:, None], acc.to(tl.bfloat16), mask=rmask[None, :])


# ---------------------------------------------------------------------------------------- combine


@triton.jit
def _reduce_kernel(y_ptr, row_of_ptr, w_ptr, out_ptr, H: tl.constexpr, TOP_K: tl.constexpr, BH: tl.constexpr):
    """out[t] = sum over the token's slots k (in order) of w[t, k] * y[row_of[t, k]] (none: zeros)."""
    t = tl.program_id(0)
    c = tl.program_id(1) * BH + tl.arange(0, BH)
    cm = c < H
    acc = tl.zeros((BH,), dtype=tl.float32)
    for k in tl.static_range(TOP_K):
        r = tl.load(row_of_ptr + t * TOP_K + k)
        wk = tl.load(w_ptr + t * TOP_K + k)
        y = tl.load(y_ptr + r.to(tl.int64) * H + c, mask=cm & ((c * 0 + r) >= 0), other=0.0)
        acc += wk * y.to(tl.float32)
    tl.store(out_ptr + t.to(tl.int64) * H + c, acc.to(tl.bfloat16), mask=cm)


# ------------------------------------------------------------------------------------------ host


def _num_sms(device):
    if device.type != "cuda":
        return 4  # the CPU interpreter runs programs one after another: a few persistent ones suffice
    return torch.cuda.get_device_properties(device).multi_processor_count


def _grid(tiles_ub, device, per_sm=None):
    return (max(1, min(tiles_ub, _num_sms(device) * (PROGS_PER_SM if per_sm is None else per_sm))),)


def _tma_ok(t):
    """TMA's rules for a 2-D operand: unit inner stride, base address and row stride multiples of 16 bytes."""
    return t.dim() == 2 and t.stride(1) == 1 and t.data_ptr() % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0


def _operands(use, *pairs):
    """(operands, tma): for each (2-D tensor, block shape) a TMA descriptor when `use` and every tensor meets
    TMA's alignment rules, else the tensors themselves (the kernels' pointer paths ignore them)."""
    tma = bool(use) and all(_tma_ok(t) for t, _ in pairs)
    return [TensorDescriptor.from_tensor(t, list(block)) if tma else t for t, block in pairs], tma


def _route_small_warps(bt):
    """[bt, 256] score tiles: 16 warps at 64 tokens keep them in registers."""
    return max(4, min(16, bt // 4))


def _gemm1_consts(H, I, E_LOCAL, interp, bm=None):
    """The large-batch GEMM1's constexprs for the current tunables (also what scripts/moe_aot.py compiles)."""
    return dict(H=H, I=I, E_LOCAL=E_LOCAL, BM=bm or BLOCK_M, BN=G1_BN, GROUP=GROUP_M, INTER_FP8=INTER_FP8, QB=QBLOCK, FP8_MAX=FP8_MAX,
                INTERP=interp, PREFETCH=bool(PREFETCH_SCALES), WS1=bool(W_SCALE_ONE) and G1_BN <= QBLOCK,
                RESCALE=bool(RESCALE_ACC))


def _gemm2_consts(H, I, E_LOCAL, interp, bm=None):
    return dict(H=H, I=I, E_LOCAL=E_LOCAL, BM=bm or G2_BLOCK_M, BN=BLOCK_N2, GROUP=GROUP_M, INTER_FP8=INTER_FP8, QB=QBLOCK, IQB=G1_BN,
                INTERP=interp, PREFETCH=bool(PREFETCH_SCALES), WS1=bool(W_SCALE_ONE) and BLOCK_N2 <= QBLOCK)


def _m_tiles_ub(pairs, bm, n_experts):
    """Upper bound of sum over experts of ceil(rows_e / bm) for `pairs` rows in total."""
    return max(1, min(pairs, triton.cdiv(pairs, bm) + n_experts))


def _route_multi(logits, bias, T, rsf, offset, sorted_tok, row_of, wflat, P, E_LOCAL, consts, dev, hs_scale=None, sa_perm=None):
    """Routing over T/ROUTE_BT programs (each local pair's rank in its expert from an atomic counter), then the
    expert-major positions: fills sorted_tok, row_of, wflat (and, given sa_perm [P, H / 128], the pairs'
    activation scales in expert-major order); returns the per-expert counts."""
    counts = torch.zeros(E_LOCAL, dtype=torch.int32, device=dev)  # the routing kernel's atomic counters
    le = torch.empty(P, dtype=torch.int32, device=dev)
    rank = torch.empty(P, dtype=torch.int32, device=dev)
    _route_kernel[(triton.cdiv(T, ROUTE_BT),)](logits, bias, T, rsf, offset, counts, le, rank, wflat, BT=ROUTE_BT, **consts)
    perm = sa_perm is not None
    _scatter_kernel[(triton.cdiv(P, 256),)](counts, le, rank, sorted_tok, row_of, hs_scale if perm else row_of, sa_perm if perm else row_of,
                                            P, T, TOP_K=TOP_K, E_LOCAL=E_LOCAL, BLOCK=256, KB=sa_perm.shape[1] if perm else 1,
                                            PERM_SCALES=perm)
    return counts


def run(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights, gemm1_weights_scale,
        gemm2_weights, gemm2_weights_scale, local_expert_offset, routed_scaling_factor, output=None):
    """Destination-passing: writes every element of ``output`` [T, H] bf16 (allocated when None) and returns it."""
    T, H = hidden_states.shape
    E_LOCAL, G1, _ = gemm1_weights.shape
    I = G1 // 2
    E = routing_logits.shape[1]
    dev = hidden_states.device
    assert H % QBLOCK == 0 and I % QBLOCK == 0 and E % N_GROUP == 0, "sizes must be multiples of the 128 scale block"
    out = output if output is not None else torch.empty((T, H), dtype=torch.bfloat16, device=dev)
    if T == 0:
        return out
    P = T * TOP_K  # (token, slot) pairs: an upper bound of the local ones
    offset, rsf = int(local_expert_offset), float(routed_scaling_factor)
    logits = routing_logits.contiguous()
    bias = routing_bias.contiguous()
    hs, hs_scale = hidden_states.contiguous(), hidden_states_scale.contiguous()
    sorted_tok = torch.empty(P, dtype=torch.int32, device=dev)
    row_of = torch.empty(P, dtype=torch.int32, device=dev)
    wflat = torch.empty(P, dtype=torch.float32, device=dev)
    y = torch.empty((P, H), dtype=torch.bfloat16, device=dev)
    # the weights as 2-D row blocks for TMA descriptors (views: W13 [E_LOCAL * 2I, H], W2 [E_LOCAL * H, I])
    w13v, w2v = gemm1_weights.view(E_LOCAL * 2 * I, H), gemm2_weights.view(E_LOCAL * H, I)
    interp = type(_gemm1_kernel).__name__ == "InterpretedFunction"  # TRITON_INTERPRET=1: the CPU workarounds
    consts = dict(E=E, N_GROUP=N_GROUP, TOPK_GROUP=TOPK_GROUP, TOP_K=TOP_K, E_LOCAL=E_LOCAL)

    if T <= SMALL_MAX_TOKENS:
        if T <= SMALL_ROUTE_MAX:
            counts = torch.empty(E_LOCAL, dtype=torch.int32, device=dev)  # written whole by the routing kernel
            bt = max(2, triton.next_power_of_2(T))
            if SMALL_ROUTE_BT and bt > SMALL_ROUTE_BT:
                # routing over T / SMALL_ROUTE_BT programs, then the positions in one program
                le = torch.empty(P, dtype=torch.int32, device=dev)
                wpair = torch.empty(P, dtype=torch.float32, device=dev)
                _route_pairs_kernel[(triton.cdiv(T, SMALL_ROUTE_BT),)](logits, bias, T, rsf, offset, le, wpair, BT=SMALL_ROUTE_BT,
                                                                        **{k: consts[k] for k in ("E", "N_GROUP", "TOPK_GROUP", "TOP_K")},
                                                                        num_warps=_route_small_warps(SMALL_ROUTE_BT))
                nj = bt * TOP_K
                _positions_kernel[(1,)](le, wpair, T, counts, sorted_tok, row_of, wflat, TOP_K=TOP_K, E_LOCAL=E_LOCAL, NJ=nj,
                                        num_warps=max(4, min(16, nj // 32)))
            else:
                _route_small_kernel[(1,)](logits, bias, T, rsf, offset, counts, sorted_tok, row_of, wflat, BT=bt, **consts,
                                          num_warps=_route_small_warps(bt))
        else:
            counts = _route_multi(logits, bias, T, rsf, offset, sorted_tok, row_of, wflat, P, E_LOCAL, consts, dev)
        # the largest split <= SMALL_SPLIT_K that divides the K blocks (H = 7168: 56 blocks; smaller H in tests)
        split = max(d for d in range(1, SMALL_SPLIT_K + 1) if (H // QBLOCK) % d == 0)
        part = torch.empty((split, P, 2 * I), dtype=torch.float32, device=dev)
        g1_bt = SMALL_G1_BT or SMALL_BT  # GEMM1's token tile (its own row tiling; GEMM2 tiles by SMALL_BT)
        (w1_desc,), tma1 = _operands(SMALL_W_TMA, (w13v, (SMALL_BN, QBLOCK)))
        _gemm1_swap_kernel[_grid(_m_tiles_ub(P, g1_bt, E_LOCAL) * (I // SMALL_BN) * split, dev, SMALL_PROGS_PER_SM)](
            hs, hs_scale, gemm1_weights, w1_desc, gemm1_weights_scale, counts, sorted_tok, part, T, P, H=H, I=I,
            E_LOCAL=E_LOCAL, BT=g1_bt, BN=SMALL_BN, SPLIT=split, QB=QBLOCK, PREFETCH=bool(PREFETCH_SCALES), TMA=tma1,
            WS1=bool(W_SCALE_ONE) and SMALL_BN <= QBLOCK,
            num_warps=SMALL_WARPS, num_stages=SMALL_STAGES)
        inter = torch.empty((P, I), dtype=torch.float8_e4m3fn if SMALL_INTER_FP8 else torch.bfloat16, device=dev)
        inter_scale = torch.empty((P, I // QBLOCK), dtype=torch.float32, device=dev)
        _swiglu_kernel[(triton.cdiv(P, 16), I // QBLOCK)](part, counts, inter, inter_scale, P, I=I, E_LOCAL=E_LOCAL, SPLIT=split,
                                                           BR=16, BC=QBLOCK, A_FP8=SMALL_INTER_FP8, FP8_MAX=FP8_MAX,
                                                           INTERP=interp, num_warps=4)
        (a_desc, w2_desc), tma2 = _operands(SMALL_W_TMA and SMALL_INTER_FP8, (inter, (SMALL_BT, QBLOCK)), (w2v, (SMALL_BN, QBLOCK)))
        _gemm2_swap_kernel[_grid(_m_tiles_ub(P, SMALL_BT, E_LOCAL) * (H // SMALL_BN), dev, SMALL_PROGS_PER_SM)](
            inter, a_desc, inter_scale, gemm2_weights, w2_desc, gemm2_weights_scale, counts, y, H=H, I=I, E_LOCAL=E_LOCAL,
            BT=SMALL_BT, BN=SMALL_BN, QB=QBLOCK, A_FP8=SMALL_INTER_FP8, INTERP=interp, TMA=tma2,
            WS1=bool(W_SCALE_ONE) and SMALL_BN <= QBLOCK, num_warps=SMALL_WARPS,
            num_stages=SMALL_G2_STAGES)
    else:
        big = T >= BIG_TILE_TOKENS  # a host-side shape: no sync
        bm1, bm2, w2 = (BIG_G1_BLOCK_M, BIG_G2_BLOCK_M, BIG_G2_WARPS) if big else (BLOCK_M, G2_BLOCK_M, G2_WARPS)
        # SCALE_TMA: the activation scales expert-major [P, H / 128] (written by the scatter kernel), read as
        # [BM, 4] boxes like the intermediate's [P, I / G1_BN]
        stma = bool(SCALE_TMA) and not PREFETCH_SCALES and (I // G1_BN) % 4 == 0 and (H // QBLOCK) % 4 == 0
        sa_perm = torch.empty((P, H // QBLOCK), dtype=torch.float32, device=dev) if stma else None
        counts = _route_multi(logits, bias, T, rsf, offset, sorted_tok, row_of, wflat, P, E_LOCAL, consts, dev, hs_scale, sa_perm)
        inter = torch.empty((P, I), dtype=torch.float8_e4m3fn if INTER_FP8 else torch.bfloat16, device=dev)
        inter_scale = torch.empty((P, I // G1_BN), dtype=torch.float32, device=dev)
        (w1_desc,), tma1 = _operands(W_TMA, (w13v, (G1_BN, QBLOCK)))
        # one layout decision for both kernels (fresh allocations with P = 8T rows meet TMA's rules)
        sa1_desc = TensorDescriptor.from_tensor(sa_perm, [bm1, 4]) if stma else hs_scale
        _gemm1_kernel[_grid(_m_tiles_ub(P, bm1, E_LOCAL) * (I // G1_BN), dev, G1_PROGS_PER_SM)](
            hs, hs_scale, sa1_desc, gemm1_weights, w1_desc, gemm1_weights_scale, counts, sorted_tok, inter, inter_scale, T, P,
            **_gemm1_consts(H, I, E_LOCAL, interp, bm1), TMA=tma1, SCALE_TMA=stma, num_warps=G1_WARPS,
            num_stages=G1_STAGES or NUM_STAGES)
        (a_desc, w2_desc), tma2 = _operands(W_TMA and INTER_FP8, (inter, (bm2, G1_BN)), (w2v, (BLOCK_N2, G1_BN)))
        sa2_desc = TensorDescriptor.from_tensor(inter_scale, [bm2, 4]) if stma and INTER_FP8 else inter_scale
        _gemm2_kernel[_grid(_m_tiles_ub(P, bm2, E_LOCAL) * triton.cdiv(H, BLOCK_N2), dev)](
            inter, a_desc, inter_scale, sa2_desc, gemm2_weights, w2_desc, gemm2_weights_scale, counts, y,
            **_gemm2_consts(H, I, E_LOCAL, interp, bm2), TMA=tma2, SCALE_TMA=stma and INTER_FP8, num_warps=w2, num_stages=NUM_STAGES)
    _reduce_kernel[(T, triton.cdiv(H, 1024))](y, row_of, wflat, out, H=H, TOP_K=TOP_K, BH=1024, num_warps=4)
    return out
