"""DSA top-k indexer (64 heads x 128, FP8 paged keys, page size 64, top 2048): FP8 tensor-core scores,
then an exact radix select on the GPU. No host synchronization: every choice below is made from shapes
on the host or per row on the GPU.

1. ``_score_pages`` — grid (batch, page groups). A program walks PAGES pages of one sequence through
   the block table; per page it loads the 64 tokens' FP8 keys (8 KiB, contiguous) and their float32
   scales (the 256 bytes after the page's FP8 data), computes ``q [64 heads, 128] @ k^T`` with one
   FP8 x FP8 -> FP32 ``tl.dot`` (M = 64 heads, N = 64 tokens, K = 128: ``wgmma m64n64k32 e4m3``),
   multiplies by the token's scale, applies relu, weights the heads and sums them: one float32 score
   per token into a scratch row. Rows no longer than top-k are skipped: they select every token,
   whatever the scores. SCORE_STAGES 0 walks the pages with a branch per tile (tiles past the row's end
   skipped, nothing pipelined); 2-3 make the loop branch-free (masked past the end) and pipelined, so
   the next pages' table lookups and key gathers are in flight while one is scored (CPU-checked, not
   yet ranked on a GPU: docs/measurements.md recording 30).
2. Selection, exact: a most-significant-digit radix select over the scores' order-preserving uint32
   keys (RADIX_BITS bits per pass: a ``tl.histogram`` per block, a cumulative sum to find the bucket
   holding the 2048th largest key) ends with the exact threshold key and how many keys equal to it to
   take; a last pass writes the ids of every key above the threshold and that many ties, through the
   block table. Rows of at most 2048 tokens pass through (token order, then -1). The ids are not in
   score order: the definition's comparator (as the official evaluator) compares the sorted scores.
   - ``_select_rows`` (batch >= SPLIT_BELOW_ROWS): one program per row does every pass (ties taken in
     token order). Also the only launch when the table is at most 2048 tokens wide (all pass-through).
   - ``_split_hist`` x passes + ``_split_gather`` (fewer rows): each row is cut into SPLIT_CHUNK-score
     chunks, one program each; a launch per pass merges the chunks' histograms with atomics, and the
     gather claims output slots with atomics (the order, and which ties, vary between runs).
   - ``_chain_select`` (CHAIN_SELECT, the default where the grid fits one program per SM): the same passes
     in one cooperative launch, the row's programs waiting for each other between passes.
   - ``_select_resident`` (RESIDENT_FROM_ROWS, off: measured slower): one program per row, its keys in
     registers for every pass.

Costs (see skills/operators/dsa_topk_indexer.md): the scorer is HBM-bound (124 FLOP per byte on
fp8 tensor cores); the selection re-reads the 4-byte scores ceil(32 / RADIX_BITS) + 1 times, mostly
from L2; few-row batches pay a launch per pass instead of idle SMs.

Why the split path with one block per chunk is the start: on the H200 (2026-12-02, CUPTI) the first
defaults (split below 32 rows, 8192-score chunks) took 60-69 us for one or two rows of 8k-128k tokens
whatever the length, against floors of 0.3-4 us: a chunk's program ran its 4 radix passes and the
gather as 20 dependent block iterations. With SPLIT_CHUNK = SELECT_BLOCK every program does one block
per launch, and splitting at any batch size keeps B x n / 2048 programs per pass instead of B (64
programs of 40 block iterations each at 64 rows of 16k tokens). Not yet measured.

FUSE_HIST0 = 1 moves the split path's first radix pass into the scorer (each program histograms the top
RADIX_BITS bits of its pages' scores and adds them with atomics: one launch fewer, at up to 64 atomics
per page instead of up to 2^RADIX_BITS per 2048 scores). On the H200 the champion's selection, not its
score pass, sets the time (41-46 us at 2560 pages against a 7.4 us floor; six selection launches), so
a launch less was the point. Measured on the H200 (2026-12-02, PRs #13/#14 through `kbot submit`,
docs/measurements.md recording 12): at the champion's other settings it is slower, 0.832x with 8-bit
digits and 0.308x with 11-bit ones (the scorer's histogram and atomics cost more than the launch saved).

ZERO_IN_SCORER = 1 (without FUSE_HIST0) zeroes each long row's histograms and slot counters in the scorer's
first program of that row instead of a ``torch.zeros`` memset before it: one kernel fewer per call. The
split passes only read them after the scorer's launch has finished.

TILE_PAGES: pages scored by one ``tl.dot`` (N = 64 x TILE_PAGES tokens, their keys gathered through the
block table in one load), so a program has TILE_PAGES pages in flight instead of one after another, and
loads q once for them. ncu of the champion (PAGES = 1) at 64 x 16k (recording 10): the scorer 72.7 us for
131 MB, 39% of DRAM peak, 8 programs of 4 warps per SM by registers (48% of warps active): latency, not
bandwidth. Measured (PR #28, 2026-12-03, recording 24, on top of the wide digits): 1.06x on the
786k / 1M-score workloads, 0.97-0.99x on the 98k-131k ones, 1.002x overall: rejected; default 1.

Carried state: every program of split pass p needs its row's (threshold prefix, keys still wanted)
after the p passes before it. Each program of pass p stores that state in a per-row slot, and pass p + 1
advances the slot by pass p's histogram: one histogram scan per program instead of p. ncu of the
champion at 64 x 16k (recording 10) had the passes at 7.9, 8.7, 9.6 and 10.4 us and the gather at 11.5:
~0.8 us more per earlier pass re-scanned. Measured with the chunk dispatch below (PR #26).

Chunk size by the call's size: each split pass costs a program's dependent chain (row length, the earlier
passes' histograms, a block of scores from L2, a ``tl.histogram`` of it, atomics), so short chunks make a
pass shorter while there are few scores, and long ones win once the programs outnumber the GPU's slots.
Tables of at most SMALL_CHUNK_MAX_SCORES scores (B x pages x 64) take SMALL_CHUNK-score chunks, larger
ones SPLIT_CHUNK. Rows that all pass through use one TOPK-wide block whatever SELECT_BLOCK says.
Measured on the H200 (2026-12-03, PRs #23/#24, paired against the champion, recording 22): 512-score
chunks everywhere made the 9 workloads of 98k-131k scores 1.06-1.18x faster, 1.11-1.26x with
ZERO_IN_SCORER, but the 786k- and 1M-score ones 0.81-0.83x slower and the pass-through ones 0.92-0.94x
(512-wide blocks there); the dispatch keeps the gains only. Measured as a whole with the carried state
(PR #26, 2026-12-03, recording 23): 1.181x over the champion of the time, 1.05x on the large ones.

WIDE_MAX_SCORES: tables of at most that many scores take three passes of 8, 12 and 12 bits instead of
four of 8 (``_wide_hist``): the first a ``tl.histogram`` of every key, the other two one atomic increment
per key still in the running into 4096 bins (few keys after the first pass, spread over many bins, so
the atomics hardly collide). One pass, one dependent chain, fewer per call. Measured (PR #27, recordings
23-24): 1.073x over #26, 1.08-1.16x on the 98k-131k-score workloads; the champion's setting, now the
default.

Filtered select (FILTER_BINS > 0, few rows): the split passes re-read a long row's scores once per digit
(four or five launches, each a dependent chain per program). Instead the scorer also stores each program's
largest and smallest score; ``_filter_hist`` counts the row's keys over FILTER_BINS linear buckets of its
[min, max] range (monotone in the score, so a higher bucket holds only larger keys) and ``_pick`` finds the
bucket holding the 2048th largest; ``_filter_gather`` writes every key above that bucket (slots claimed with
atomics) and appends the bucket's own (key, token) pairs to a FILTER_CAP-entry buffer; ``_filter_final``, one
program per row, selects the bucket's remaining ``want`` keys exactly (four 8-bit radix passes over at most
FILTER_CAP keys, in one block). When the bucket held more than FILTER_CAP keys (heavy ties, a few huge
outliers stretching the range) it selects over the whole row, keys of that bucket only: slow, exact. Three
launches after the scorer and two reads of the scores instead of four or five. FILTER_LAST: the row's last
gather program to finish (a chunks-done counter with acquire-release ordering) makes the exact select
itself, from the range and threshold bucket it already holds: one launch and its dependent loads fewer. On the small CPU workloads
the bucket holds 3-116 keys; for scores spread like a normal sample, ~0.1-1 % of a row. Timed on an H100
(docs/measurements.md recordings 39-40): slower on every long-row workload (equal where rows pass through),
0.76x the champion with 256 buckets, because the
final select (14 us at 1 x 131k: four radix passes in one program) and the range reduction in every
counting program cost more than the passes they replace; skills/operators/dsa_topk_indexer.md says what
would have to change.

Chained select (CHAIN_SELECT): the split path's select launches (with wide digits the 8-bit histogram, two
12-bit ones and the gather; else four 8-bit histograms and the gather) as one, ``_chain_select``: between two passes the row's programs wait for each other
on a counter (each adds 1 with release ordering, then reads it with acquire ordering until all have) instead
of waiting for the next launch. Sound only if every program of the grid is resident at once, so the host
doubles the chunks (up to CHAIN_MAX_CHUNK) until the grid fits one program per SM, and keeps the separate
launches otherwise. At 1 x 131k scores the four launches take 2.3 + 3.2 + 3.2 + 4.3 us for 0.5 MB of scores
(H100, docs/measurements.md recording 40), of which ~1 us per kernel boundary (the rest is each program's
dependent chain). The persistent form of this idea (the whole select in one launch looping over chunks, grid-
wide barriers) lost 0.751x on 2026-12-03 (recording 21): this one keeps one chunk per program and waits per
row, so it tests whether the barrier or the persistence lost. Under the Triton interpreter, which runs
programs one after another, the same kernel runs a pass per launch (the CPU check covers every pass, not
the wait). Measured (H100, 2026-12-07, recordings 42-43): the select 12.6 us in one kernel against 13.8 in
four; promoted as PR #39, 1.139x, with CHAIN_MAX_CHUNK 4096 (at 8192 the 786k / 1M-score tables chained in
4- and 2-chunk rows and were 1.12-1.21x slower: longer chains per program): the default since.

Resident select (RESIDENT_FROM_ROWS, off): with many rows the split select is five launches of ~6-7 us
each over a 4 MB score table (B = 64 x 16k scores: 35 us after a 72 us scorer, recording 46). One program
per row that loads its keys once and makes the radix passes and the gather in registers was predicted at
~12 us and measured 47 us (H100, recordings 47-48; 27 us at 16 x 8k against the chained select's 11): a
pass's `tl.histogram` over thousands of keys that share a few bins serializes on shared-memory atomics in
one CTA. Kept as a measured dead end. LARGE_FROM_SCORES gates the two-page scorer tiles to the large tables
(scorer 73 -> 65 us at 64 x 16k; the default).

Tunables (first listed = the best guess before any GPU measurement, the offline search's start): PAGES,
TILE_PAGES, SCORE_WARPS, SCORE_STAGES, SELECT_BLOCK, SELECT_WARPS, RADIX_BITS, SPLIT_BELOW_ROWS, SPLIT_CHUNK, FUSE_HIST0,
ZERO_IN_SCORER, SMALL_CHUNK, SMALL_CHUNK_MAX_SCORES, WIDE_MAX_SCORES, FILTER_BINS, FILTER_CAP, FILTER_LAST,
CHAIN_SELECT, CHAIN_MAX_CHUNK, RESIDENT_FROM_ROWS, RESIDENT_MAX, RESIDENT_BITS, RESIDENT_WARPS, LARGE_FROM_SCORES,
LARGE_PAGES, LARGE_TILE.
"""

import torch
import triton
import triton.language as tl

TOPK = 2048
HEADS = 64
DIM = 128
PAGE = 64
SCALE_BYTES = 4

PAGES = 1  # kbot: tunable [1, 2, 4, 8] role=block
TILE_PAGES = 1  # kbot: tunable [1, 2, 4] role=block
SCORE_WARPS = 4  # kbot: tunable [4, 8]
SCORE_STAGES = 0  # kbot: tunable [0, 2, 3] role=stages
SELECT_BLOCK = 2048  # kbot: tunable [2048, 1024, 4096, 512] role=block
SELECT_WARPS = 8  # kbot: tunable [8, 4, 16]
RADIX_BITS = 8  # kbot: tunable [8, 11] role=other
SPLIT_BELOW_ROWS = 1000000  # kbot: tunable [1000000, 32, 16, 64, 1] role=split
SPLIT_CHUNK = 2048  # kbot: tunable [2048, 1024, 4096, 8192, 16384, 32768, 512] role=split
FUSE_HIST0 = 0  # kbot: tunable [0, 1] role=other
ZERO_IN_SCORER = 1  # kbot: tunable [1, 0] role=other
SMALL_CHUNK = 512  # kbot: tunable [512, 1024, 2048] role=split
SMALL_CHUNK_MAX_SCORES = 262144  # kbot: tunable [262144, 0, 131072, 524288] role=split
WIDE_MAX_SCORES = 262144  # kbot: tunable [262144, 0, 1048576] role=other
WIDE_ROW = 256 + 2 * 4096  # a row's histograms with wide digits: 8, 12 and 12 bits
# The filtered select (FILTER_BINS > 0): one histogram pass over linear buckets of each row's score range,
# then every key above the threshold bucket written and the bucket's keys compacted into a FILTER_CAP buffer
# that one program per row selects from exactly (the whole row, restricted to the bucket, if it overflows;
# 16 is there to take that path on small rows).
FILTER_BINS = 0  # kbot: tunable [0, 256, 1024] role=other
FILTER_CAP = 2048  # kbot: tunable [2048, 1024, 4096, 16] role=other
# The exact select of the bucket's candidates by the row's last gather program to finish (an acq_rel counter)
# instead of a launch of its own.
FILTER_LAST = False  # kbot: tunable [False, True] role=other
# The split select's launches as one (``_chain_select``): the row's programs wait for each other between
# passes instead of for a launch, where the grid fits the SMs (chunks doubled up to CHAIN_MAX_CHUNK to fit:
# the 98k-131k-score tables fit at <= 1024; the 786k / 1M-score ones would need 8192, above the default 4096,
# and take the separate launches).
CHAIN_SELECT = True  # kbot: tunable [True, False] role=other
CHAIN_MAX_CHUNK = 4096  # kbot: tunable [4096, 8192, 2048, 16384] role=split
# The resident select (``_select_resident``): from RESIDENT_FROM_ROWS rows (0: never), tables at most
# RESIDENT_MAX scores wide get one program per row that loads its row's keys once and makes every radix pass
# and the gather on them in registers: one launch after the scorer instead of five, no global atomics.
RESIDENT_FROM_ROWS = 0  # kbot: tunable [0, 64, 32, 16, 1] role=split
RESIDENT_MAX = 16384  # kbot: tunable [16384, 8192, 32768] role=split
RESIDENT_BITS = 8  # kbot: tunable [8, 11] role=other
RESIDENT_WARPS = 16  # kbot: tunable [16, 8, 32] role=warps
# The scorer on large tables (at least LARGE_FROM_SCORES scores; 0: never): LARGE_PAGES pages a program in
# dots of LARGE_TILE pages (PR #28: TILE_PAGES = PAGES = 2 was 1.06x on the 786k / 1M-score tables, 0.97-0.99x
# on the smaller ones, so it is gated by size here).
LARGE_FROM_SCORES = 524288  # kbot: tunable [524288, 0, 1] role=other
LARGE_PAGES = 2  # kbot: tunable [2, 4] role=block
LARGE_TILE = 2  # kbot: tunable [2, 1] role=block


@triton.jit
def _score_tile(q, w, k8_ptr, k32_ptr, bt_ptr, bt_stride, s_ptr, s_stride, b, first, i, n, rows, dims, h0, bins,
                H: tl.constexpr, D: tl.constexpr, PS: tl.constexpr, PAGES: tl.constexpr, HIST0: tl.constexpr,
                BITS: tl.constexpr):
    """Scores of the program's tile ``i`` (TILE pages, masked to the program's pages and to the row's n
    tokens): fp8 dot on tensor cores, the key scale before the relu, the head weights; with HIST0 the
    tile's top BITS bits added to ``h0``. Also returns the tile's largest and smallest valid score."""
    TT: tl.constexpr = rows.shape[0]
    lp = first + i + rows // PS  # each row's logical page
    own = ((i + rows // PS) < PAGES) & (lp * PS < n)  # pages of this program that exist
    page = tl.load(bt_ptr + b * bt_stride + lp, mask=own, other=0).to(tl.int64)
    # Page bytes: PS*D fp8 values (token-major), then PS float32 scales.
    k = tl.load(k8_ptr + page[:, None] * (PS * (D + 4)) + (rows % PS)[:, None] * D + dims[None, :],
                mask=own[:, None], other=0.0)  # fp8 [TT, D]
    sc = tl.load(k32_ptr + page * (PS * (D + 4) // 4) + (PS * D // 4) + rows % PS, mask=own, other=0.0)
    logits = tl.dot(q, tl.trans(k))  # [H, TT] fp32, fp8 tensor cores
    logits = logits * sc[None, :]  # scale before relu: exact for any sign of scale
    score = tl.sum(tl.maximum(logits, 0.0) * w[:, None], axis=0)  # [TT]
    pos = (first + i) * PS + rows
    ok = own & (pos < n)
    tl.store(s_ptr + b * s_stride + pos, score, mask=ok)
    tmax = tl.max(tl.where(ok, score, -float("inf")), axis=0)
    tmin = tl.min(tl.where(ok, score, float("inf")), axis=0)
    if HIST0:  # the top BITS bits of the order-preserving key (pass 0 of _split_hist)
        NB: tl.constexpr = 1 << BITS
        digit = (_ordered_key(score) >> (32 - BITS)).to(tl.int32)
        h0 += tl.histogram(tl.where(ok, digit, 0), NB)
        h0 -= tl.where(bins == 0, TT - tl.sum(ok.to(tl.int32), axis=0), 0)
    return h0, tmax, tmin


@triton.jit
def _score_pages(q_ptr, k8_ptr, k32_ptr, w_ptr, lens_ptr, bt_ptr, bt_stride, s_ptr, s_stride, hist_ptr, cnt_ptr, mm_ptr,
                 TOPK: tl.constexpr, H: tl.constexpr, D: tl.constexpr, PS: tl.constexpr,
                 PAGES: tl.constexpr, TILE: tl.constexpr, HIST0: tl.constexpr, ZERO: tl.constexpr,
                 ROW: tl.constexpr, BITS: tl.constexpr, STAGES: tl.constexpr, RANGE: tl.constexpr, NPROG,
                 CNT: tl.constexpr):
    """Scores of PAGES pages of one row; with RANGE also their largest and smallest score at
    mm[b, program, 0 / 1] (row b's programs that hold none of its tokens write nothing)."""
    b = tl.program_id(0)
    first = tl.program_id(1) * PAGES
    n = tl.load(lens_ptr + b)
    if (n > TOPK) & (first * PS < n):
        if ZERO:  # the split selection's scratch of this row (read only by later launches)
            if first == 0:  # ROW ints of histograms per row (a multiple of 256)
                zbins = tl.arange(0, 256)
                for i in tl.static_range(ROW // 256):
                    tl.store(hist_ptr + b * ROW + i * 256 + zbins, tl.zeros([256], dtype=tl.int32))
                ci = tl.arange(0, CNT)
                tl.store(cnt_ptr + b * CNT + ci, tl.zeros([CNT], dtype=tl.int32))
        heads = tl.arange(0, H)
        dims = tl.arange(0, D)
        TT: tl.constexpr = TILE * PS
        rows = tl.arange(0, TT)  # the tokens of TILE pages, gathered through the block table
        q = tl.load(q_ptr + b * (H * D) + heads[:, None] * D + dims[None, :])  # fp8 [H, D]
        w = tl.load(w_ptr + b * H + heads)  # f32 [H]
        NB: tl.constexpr = (1 << BITS) if HIST0 else 2  # the selection's first radix pass, on the scores in registers
        NPASS: tl.constexpr = (32 + BITS - 1) // BITS
        bins = tl.arange(0, NB)
        h0 = tl.zeros([NB], dtype=tl.int32)
        hi = tl.full([], -float("inf"), tl.float32)
        lo = tl.full([], float("inf"), tl.float32)
        if STAGES == 0:  # a branch per tile skips the tiles past the row's end (no pipelining)
            for i in range(0, PAGES, TILE):
                if (first + i) * PS < n:
                    h0, tmax, tmin = _score_tile(q, w, k8_ptr, k32_ptr, bt_ptr, bt_stride, s_ptr, s_stride, b, first, i, n,
                                                 rows, dims, h0, bins, H, D, PS, PAGES, HIST0, BITS)
                    hi = tl.maximum(hi, tmax)
                    lo = tl.minimum(lo, tmin)
        else:  # branch-free, so the next tiles' table lookups and key gathers are issued early (masked past n)
            for i in tl.range(0, PAGES, TILE, num_stages=STAGES):
                h0, tmax, tmin = _score_tile(q, w, k8_ptr, k32_ptr, bt_ptr, bt_stride, s_ptr, s_stride, b, first, i, n,
                                             rows, dims, h0, bins, H, D, PS, PAGES, HIST0, BITS)
                hi = tl.maximum(hi, tmax)
                lo = tl.minimum(lo, tmin)
        if RANGE:
            slot = mm_ptr + (b * NPROG + tl.program_id(1)) * 2
            tl.store(slot, hi)
            tl.store(slot + 1, lo)
        if HIST0:
            tl.atomic_add(hist_ptr + (b * NPASS) * NB + bins, h0, mask=h0 != 0, sem="relaxed")


@triton.jit
def _ordered_key(s):
    """float32 -> uint32 whose unsigned order is the float order (negative floats flipped)."""
    bits = s.to(tl.uint32, bitcast=True)
    return tl.where((bits & 0x80000000) != 0, ~bits, bits | 0x80000000)


@triton.jit
def _select_rows(s_ptr, s_stride, lens_ptr, bt_ptr, bt_stride, out_ptr, out_stride,
                 TOPK: tl.constexpr, PS: tl.constexpr, BLOCK: tl.constexpr, BITS: tl.constexpr):
    b = tl.program_id(0)
    n = tl.load(lens_ptr + b)
    out_row = out_ptr + b * out_stride
    bt_row = bt_ptr + b * bt_stride
    if n <= TOPK:
        _pass_through(bt_row, out_row, 0, n, TOPK, PS, TOPK, BLOCK)
    else:
        _select_exact(s_ptr + b * s_stride, s_ptr, bt_row, out_row, n, False, 0.0, 0.0, 0, TOPK, 0,
                      1, PS, BITS, BLOCK, False)


@triton.jit
def _select_resident(s_ptr, s_stride, lens_ptr, bt_ptr, bt_stride, out_ptr, out_stride,
                     TOPK: tl.constexpr, PS: tl.constexpr, BLOCK: tl.constexpr, BITS: tl.constexpr):
    """One program per row whose scores fit BLOCK: the row's keys are loaded once and stay in registers;
    each radix pass narrows the keys still in the running to the threshold digit's, then the ids of every
    key above the threshold key and of the first ``left`` keys equal to it are written."""
    b = tl.program_id(0)
    n = tl.load(lens_ptr + b)
    out_row = out_ptr + b * out_stride
    bt_row = bt_ptr + b * bt_stride
    if n <= TOPK:
        _pass_through(bt_row, out_row, 0, n, TOPK, PS, TOPK, TOPK)
    else:
        RB: tl.constexpr = 1 << BITS
        NPASS: tl.constexpr = (32 + BITS - 1) // BITS
        bins = tl.arange(0, RB)
        i = tl.arange(0, BLOCK)
        ok = i < n
        key = _ordered_key(tl.load(s_ptr + b * s_stride + i, mask=ok, other=0.0))
        live = ok  # keys whose digits so far equal the threshold key's
        prefix = tl.zeros([], dtype=tl.uint32)
        left = tl.full([], TOPK, tl.int32)  # how many keys of the running set are still to be taken
        for p in tl.static_range(NPASS):
            hi_b = 32 - p * BITS
            lo_b = hi_b - BITS if hi_b > BITS else 0
            W = hi_b - lo_b
            digit = ((key >> lo_b) & ((1 << W) - 1)).to(tl.int32)
            # Out-of-set lanes are counted in bin 0 and taken out again.
            hist = tl.histogram(tl.where(live, digit, 0), RB)
            hist -= tl.where(bins == 0, BLOCK - tl.sum(live.to(tl.int32), axis=0), 0)
            above = tl.sum(hist, axis=0) - tl.cumsum(hist, axis=0)  # keys in strictly higher bins
            sel = (above < left) & (above + hist >= left)  # exactly one bin
            d_star = tl.sum(tl.where(sel, bins, 0), axis=0)
            left -= tl.sum(tl.where(sel, above, 0), axis=0)
            prefix = (prefix << W) | d_star.to(tl.uint32)
            live = live & (digit == d_star)
        gt = ok & (key > prefix)
        eq = live  # = ok & (key == prefix)
        rank_eq = tl.cumsum(eq.to(tl.int32), axis=0) - 1
        take = gt | (eq & (rank_eq < left))
        pos = tl.where(gt, tl.cumsum(gt.to(tl.int32), axis=0) - 1, TOPK - left + rank_eq)
        page = tl.load(bt_row + i // PS, mask=take, other=0)
        tl.store(out_row + pos, page * PS + i % PS, mask=take)


@triton.jit
def _pass_through(bt_row, out_row, c0, n, TOPK: tl.constexpr, PS: tl.constexpr, CHUNK: tl.constexpr,
                  BLOCK: tl.constexpr):
    """A row of at most TOPK tokens, its share [c0, c0 + CHUNK): every token's physical id in token order,
    then -1 (BLOCK may exceed TOPK)."""
    ar = tl.arange(0, BLOCK)
    if c0 < TOPK:
        for start in range(c0, c0 + CHUNK, BLOCK):
            t = start + ar
            ok = t < n
            page = tl.load(bt_row + t // PS, mask=ok, other=0)
            tl.store(out_row + t, tl.where(ok, page * PS + t % PS, -1), mask=t < TOPK)


@triton.jit
def _keys(s_row, cand_row, i, length, from_buf, lo, scale, star, NB: tl.constexpr, FILTER: tl.constexpr):
    """Entries i < length of an exact select's input as (ordered key, token, in the running): a row's
    scores (with FILTER only those in linear bucket ``star``), or a candidate buffer of (key, token) pairs."""
    ok = i < length
    if from_buf:
        key = tl.load(cand_row + i * 2, mask=ok, other=0).to(tl.uint32, bitcast=True)
        tok = tl.load(cand_row + i * 2 + 1, mask=ok, other=0)
    else:
        sc = tl.load(s_row + i, mask=ok, other=0.0)
        key = _ordered_key(sc)
        tok = i
        if FILTER:
            ok = ok & (_bucket(sc, lo, scale, NB) == star)
    return key, tok, ok


@triton.jit
def _select_exact(s_row, cand_row, bt_row, out_row, length, from_buf, lo, scale, star, want, base,
                  NB: tl.constexpr, PS: tl.constexpr, BITS: tl.constexpr, BLOCK: tl.constexpr, FILTER: tl.constexpr):
    """One program writes the ids of the ``want`` largest keys among an input (``_keys``) at output slots
    ``base .. base + want - 1``: a most-significant-digit radix select of BITS bits a pass gives the exact
    threshold key and how many keys equal to it to take, then every key above it and that many ties (in
    input order) are written."""
    RB: tl.constexpr = 1 << BITS
    NPASS: tl.constexpr = (32 + BITS - 1) // BITS
    bins = tl.arange(0, RB)
    ar = tl.arange(0, BLOCK)
    prefix = tl.zeros([], dtype=tl.uint32)  # the threshold key's digits found so far
    left = want  # how many keys with that prefix are still to be taken
    for p in tl.static_range(NPASS):
        # This pass looks at bits [lo_b, hi_b) of the key; keys must match the prefix above hi_b.
        hi_b = 32 - p * BITS
        lo_b = hi_b - BITS if hi_b > BITS else 0
        W = hi_b - lo_b
        hist = tl.zeros([RB], dtype=tl.int32)
        for start in range(0, length, BLOCK):
            key, tok, ok = _keys(s_row, cand_row, start + ar, length, from_buf, lo, scale, star, NB, FILTER)
            if p > 0:
                ok = ok & ((key >> hi_b) == prefix)
            digit = ((key >> lo_b) & ((1 << W) - 1)).to(tl.int32)
            # Out-of-set lanes are counted in bin 0 and taken out again (no masked histogram needed).
            hist += tl.histogram(tl.where(ok, digit, 0), RB)
            hist -= tl.where(bins == 0, BLOCK - tl.sum(ok.to(tl.int32), axis=0), 0)
        total = tl.sum(hist, axis=0)
        above = total - tl.cumsum(hist, axis=0)  # keys in strictly higher bins
        sel = (above < left) & (above + hist >= left)  # exactly one bin
        digit_star = tl.sum(tl.where(sel, bins, 0), axis=0)
        left -= tl.sum(tl.where(sel, above, 0), axis=0)
        prefix = (prefix << W) | digit_star.to(tl.uint32)
    # prefix is now the exact threshold key; take every key above it and `left` keys equal to it.
    n_gt = tl.zeros([], dtype=tl.int32)
    n_eq = tl.zeros([], dtype=tl.int32)
    first_eq = base + want - left
    for start in range(0, length, BLOCK):
        key, tok, ok = _keys(s_row, cand_row, start + ar, length, from_buf, lo, scale, star, NB, FILTER)
        gt = ok & (key > prefix)
        eq = ok & (key == prefix)
        gt_i = gt.to(tl.int32)
        eq_i = eq.to(tl.int32)
        rank_eq = n_eq + tl.cumsum(eq_i, axis=0) - 1
        take = gt | (eq & (rank_eq < left))
        pos = tl.where(gt, base + n_gt + tl.cumsum(gt_i, axis=0) - 1, first_eq + rank_eq)
        page = tl.load(bt_row + tok // PS, mask=take, other=0)
        tl.store(out_row + pos, page * PS + tok % PS, mask=take)
        n_gt += tl.sum(gt_i, axis=0)
        n_eq += tl.sum(eq_i, axis=0)


@triton.jit
def _pick(bins_ptr, NB: tl.constexpr, want):
    """The digit of the bin holding the want-th largest key of a histogram, and how many keys of that
    bin are still wanted."""
    bins = tl.arange(0, NB)
    hist = tl.load(bins_ptr + bins)
    above = tl.sum(hist, axis=0) - tl.cumsum(hist, axis=0)  # keys in strictly higher bins
    sel = (above < want) & (above + hist >= want)  # exactly one bin
    return tl.sum(tl.where(sel, bins, 0), axis=0).to(tl.uint32), want - tl.sum(tl.where(sel, above, 0), axis=0)


@triton.jit
def _row_state(hist_ptr, st_ptr, b, P: tl.constexpr, TOPK: tl.constexpr, BITS: tl.constexpr,
               WIDE: tl.constexpr, ROW: tl.constexpr):
    """(prefix, want) of row b after its first P >= 1 radix passes: the threshold key's digits found so far
    and how many keys with that prefix are still to be taken. The state after P - 1 passes is read from
    the row's slot, which every program of pass P - 1 stored (all the same values), and advanced by pass
    P - 1's histogram: one histogram scan per program, not P."""
    slot = st_ptr + b * 8  # 4 slots of (prefix, want); slot p: the state after p passes
    if P == 1:
        prefix = tl.zeros([], dtype=tl.uint32)
        want = tl.full([], TOPK, tl.int32)
    else:
        prefix = tl.load(slot + 2 * (P - 1)).to(tl.uint32, bitcast=True)
        want = tl.load(slot + 2 * (P - 1) + 1)
    if WIDE:  # digits of 8, 12, 12 bits; histograms at 0, 256, 4352 of the row's ROW ints
        if P == 1:
            prefix, want = _pick(hist_ptr + b * ROW, 256, want)
        else:
            d, want = _pick(hist_ptr + b * ROW + 256 + (P - 2) * 4096, 4096, want)
            prefix = (prefix << 12) | d
    else:
        NB: tl.constexpr = 1 << BITS
        HI: tl.constexpr = 32 - (P - 1) * BITS  # pass P - 1 read bits [HI - W, HI)
        W: tl.constexpr = BITS if HI > BITS else HI
        d, want = _pick(hist_ptr + b * ROW + (P - 1) * NB, NB, want)
        prefix = (prefix << W) | d
    return prefix, want


@triton.jit
def _store_state(st_ptr, b, P: tl.constexpr, prefix, want):
    tl.store(st_ptr + b * 8 + 2 * P, prefix.to(tl.int32, bitcast=True))
    tl.store(st_ptr + b * 8 + 2 * P + 1, want)


@triton.jit
def _hist_pass(s_ptr, s_stride, hist_ptr, st_ptr, b, c0, n, P_NOW: tl.constexpr, TOPK: tl.constexpr,
               CHUNK: tl.constexpr, BLOCK: tl.constexpr, BITS: tl.constexpr, ROW: tl.constexpr):
    """Pass P_NOW of the radix select over one chunk [c0, c0 + CHUNK) of long row b: its histogram added
    to the row's with atomics (a row's histograms are ROW ints from b * ROW; the wide digits' pass 0 is
    this pass 0 at 8 bits)."""
    NB: tl.constexpr = 1 << BITS
    hi = 32 - P_NOW * BITS
    lo = hi - BITS if hi > BITS else 0
    W = hi - lo
    bins = tl.arange(0, NB)
    ar = tl.arange(0, BLOCK)
    if P_NOW > 0:
        prefix, want = _row_state(hist_ptr, st_ptr, b, P_NOW, TOPK, BITS, False, ROW)
        _store_state(st_ptr, b, P_NOW, prefix, want)
    else:
        prefix = tl.zeros([], dtype=tl.uint32)
    hist = tl.zeros([NB], dtype=tl.int32)
    for start in range(c0, c0 + CHUNK, BLOCK):
        t = start + ar
        ok = t < n
        key = _ordered_key(tl.load(s_ptr + b * s_stride + t, mask=ok, other=0.0))
        if P_NOW > 0:
            ok = ok & ((key >> hi) == prefix)
        digit = ((key >> lo) & ((1 << W) - 1)).to(tl.int32)
        hist += tl.histogram(tl.where(ok, digit, 0), NB)
        hist -= tl.where(bins == 0, BLOCK - tl.sum(ok.to(tl.int32), axis=0), 0)
    tl.atomic_add(hist_ptr + b * ROW + P_NOW * NB + bins, hist, mask=hist != 0, sem="relaxed")


@triton.jit
def _split_hist(s_ptr, s_stride, lens_ptr, hist_ptr, st_ptr, P_NOW: tl.constexpr,
                TOPK: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr, BITS: tl.constexpr, ROW: tl.constexpr):
    """Pass P_NOW of the radix select, one chunk of one row per program (``_hist_pass``)."""
    b = tl.program_id(0)
    c0 = tl.program_id(1) * CHUNK
    n = tl.load(lens_ptr + b)
    if (n > TOPK) & (c0 < n):
        _hist_pass(s_ptr, s_stride, hist_ptr, st_ptr, b, c0, n, P_NOW, TOPK, CHUNK, BLOCK, BITS, ROW)


@triton.jit
def _wide_pass(s_ptr, s_stride, hist_ptr, st_ptr, b, c0, n, P_NOW: tl.constexpr, TOPK: tl.constexpr,
               CHUNK: tl.constexpr, BLOCK: tl.constexpr, ROW: tl.constexpr):
    """Wide-digit pass P_NOW (1 or 2; pass 0 is ``_hist_pass``'s at 8 bits) over one chunk of long row b:
    the next 12 bits of the keys still in the running (higher digits equal to the prefix), one atomic
    increment per such key into a 4096-bin histogram: after pass 0 they are a fraction of the row spread
    over many bins, where a 4096-bin ``tl.histogram`` would cost ~16x a 256-bin one for every key."""
    HI: tl.constexpr = 36 - 12 * P_NOW  # 24, then 12
    row = hist_ptr + b * ROW
    ar = tl.arange(0, BLOCK)
    prefix, want = _row_state(hist_ptr, st_ptr, b, P_NOW, TOPK, 8, True, ROW)
    _store_state(st_ptr, b, P_NOW, prefix, want)
    for start in range(c0, c0 + CHUNK, BLOCK):
        t = start + ar
        ok = t < n
        key = _ordered_key(tl.load(s_ptr + b * s_stride + t, mask=ok, other=0.0))
        ok = ok & ((key >> HI) == prefix)
        digit = ((key >> (HI - 12)) & 4095).to(tl.int32)
        tl.atomic_add(row + 256 + (P_NOW - 1) * 4096 + digit, ok.to(tl.int32), mask=ok, sem="relaxed")


@triton.jit
def _wide_hist(s_ptr, s_stride, lens_ptr, hist_ptr, st_ptr, P_NOW: tl.constexpr,
               TOPK: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr, ROW: tl.constexpr):
    """Wide-digit pass P_NOW, one chunk of one row per program (``_wide_pass``)."""
    b = tl.program_id(0)
    c0 = tl.program_id(1) * CHUNK
    n = tl.load(lens_ptr + b)
    if (n > TOPK) & (c0 < n):
        _wide_pass(s_ptr, s_stride, hist_ptr, st_ptr, b, c0, n, P_NOW, TOPK, CHUNK, BLOCK, ROW)


@triton.jit
def _gather_pass(s_ptr, s_stride, bt_row, out_row, hist_ptr, cnt_ptr, st_ptr, b, c0, n, TOPK: tl.constexpr,
                 PS: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr, BITS: tl.constexpr, WIDE: tl.constexpr,
                 ROW: tl.constexpr, CNT: tl.constexpr):
    """One chunk's share of long row b's ids: every key above the threshold and the first ties (slots
    claimed with atomics on the row's first two of CNT counters)."""
    ar = tl.arange(0, BLOCK)
    NPASS: tl.constexpr = 3 if WIDE else (32 + BITS - 1) // BITS
    thr, want = _row_state(hist_ptr, st_ptr, b, NPASS, TOPK, BITS, WIDE, ROW)
    first_eq = TOPK - want
    for start in range(c0, c0 + CHUNK, BLOCK):
        t = start + ar
        ok = t < n
        key = _ordered_key(tl.load(s_ptr + b * s_stride + t, mask=ok, other=0.0))
        gt = (ok & (key > thr)).to(tl.int32)
        eq = (ok & (key == thr)).to(tl.int32)
        n_gt = tl.sum(gt, axis=0)
        n_eq = tl.sum(eq, axis=0)
        base_gt = tl.atomic_add(cnt_ptr + b * CNT, n_gt, mask=n_gt > 0, sem="relaxed")
        base_eq = tl.atomic_add(cnt_ptr + b * CNT + 1, n_eq, mask=n_eq > 0, sem="relaxed")
        rank_eq = base_eq + tl.cumsum(eq, axis=0) - 1
        take = (gt > 0) | ((eq > 0) & (rank_eq < want))
        pos = tl.where(gt > 0, base_gt + tl.cumsum(gt, axis=0) - 1, first_eq + rank_eq)
        page = tl.load(bt_row + t // PS, mask=take, other=0)
        tl.store(out_row + pos, page * PS + t % PS, mask=take)


@triton.jit
def _split_gather(s_ptr, s_stride, lens_ptr, bt_ptr, bt_stride, out_ptr, out_stride, hist_ptr, cnt_ptr, st_ptr,
                  TOPK: tl.constexpr, PS: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr, BITS: tl.constexpr,
                  WIDE: tl.constexpr, ROW: tl.constexpr):
    """Writes one chunk's share of a row's ids: pass-through rows in token order, long rows by
    ``_gather_pass``."""
    b = tl.program_id(0)
    c0 = tl.program_id(1) * CHUNK
    n = tl.load(lens_ptr + b)
    out_row = out_ptr + b * out_stride
    bt_row = bt_ptr + b * bt_stride
    if n <= TOPK:
        _pass_through(bt_row, out_row, c0, n, TOPK, PS, CHUNK, BLOCK)
    elif c0 < n:
        _gather_pass(s_ptr, s_stride, bt_row, out_row, hist_ptr, cnt_ptr, st_ptr, b, c0, n, TOPK, PS, CHUNK, BLOCK,
                     BITS, WIDE, ROW, 2)


@triton.jit
def _row_barrier(ctr_ptr, target):
    """Waits until row counter ``ctr`` reaches ``target``: each of the row's programs adds 1 when it has
    finished a pass (release: the pass's histogram atomics and state stores before it), then reads the
    counter (acquire) until every one has. Only sound when all the row's programs are resident at once:
    the host sizes the grid to the GPU's SMs and launches it cooperatively (the driver refuses a grid that
    cannot be resident). The spin is bounded besides, so a broken promise gives wrong ids, which the harness
    catches, after a stall rather than a hang."""
    tl.debug_barrier()  # every thread's atomics and stores of the pass issued before the release
    tl.atomic_add(ctr_ptr, 1, sem="release")
    seen = tl.atomic_add(ctr_ptr, 0, sem="acquire")
    spins = 0
    while (seen < target) & (spins < 1048576):  # well under a second per wait: a real wait is microseconds
        seen = tl.atomic_add(ctr_ptr, 0, sem="acquire")
        spins += 1
    tl.debug_barrier()


@triton.jit
def _chain_select(s_ptr, s_stride, lens_ptr, bt_ptr, bt_stride, out_ptr, out_stride, hist_ptr, cnt_ptr, st_ptr,
                  TOPK: tl.constexpr, PS: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr, ROW: tl.constexpr,
                  WIDE: tl.constexpr, FIRST: tl.constexpr, LAST: tl.constexpr):
    """Passes FIRST..LAST of the split select in one launch, one chunk per program: with WIDE 0 the 8-bit
    histogram, 1-2 the 12-bit ones, 3 the gather; else 0-3 the 8-bit histograms, 4 the gather. Between two
    passes the row's programs wait for each other (``_row_barrier`` on the row's third counter). The host
    launches every pass at once on a GPU, where the grid fits the SMs, and one pass per launch where
    programs run one after another (the CPU interpreter)."""
    NP: tl.constexpr = 3 if WIDE else 4  # the gather's pass
    b = tl.program_id(0)
    c0 = tl.program_id(1) * CHUNK
    n = tl.load(lens_ptr + b)
    out_row = out_ptr + b * out_stride
    bt_row = bt_ptr + b * bt_stride
    if n <= TOPK:
        if LAST == NP:
            _pass_through(bt_row, out_row, c0, n, TOPK, PS, CHUNK, BLOCK)
    elif c0 < n:
        live = (n + CHUNK - 1) // CHUNK  # the row's programs that hold scores: the barrier's party
        for p in tl.static_range(FIRST, LAST + 1):
            if p > FIRST:
                _row_barrier(cnt_ptr + b * 4 + 2, live * (p - FIRST))
            if p == NP:
                _gather_pass(s_ptr, s_stride, bt_row, out_row, hist_ptr, cnt_ptr, st_ptr, b, c0, n, TOPK, PS, CHUNK,
                             BLOCK, 8, WIDE, ROW, 4)
            elif (p == 0) or (not WIDE):
                _hist_pass(s_ptr, s_stride, hist_ptr, st_ptr, b, c0, n, p, TOPK, CHUNK, BLOCK, 8, ROW)
            else:
                _wide_pass(s_ptr, s_stride, hist_ptr, st_ptr, b, c0, n, p, TOPK, CHUNK, BLOCK, ROW)


@triton.jit
def _row_range(mm_ptr, b, n, NPROG, PAGES: tl.constexpr, PS: tl.constexpr, NPP2: tl.constexpr, NB: tl.constexpr):
    """Row b's smallest score and the factor that maps [lo, hi] onto NB linear buckets, from the scorer's
    per-program ranges (factor 0 when every score is equal: one bucket). Every kernel that buckets a row
    computes these the same way, so they agree on every key's bucket."""
    i = tl.arange(0, NPP2)
    live = i < (n + PAGES * PS - 1) // (PAGES * PS)  # the row's programs that held tokens
    hi = tl.max(tl.load(mm_ptr + (b * NPROG + i) * 2, mask=live, other=-float("inf")), axis=0)
    lo = tl.min(tl.load(mm_ptr + (b * NPROG + i) * 2 + 1, mask=live, other=float("inf")), axis=0)
    span = hi - lo
    return lo, tl.where(span > 1e-30, NB / tl.maximum(span, 1e-30), 0.0)


@triton.jit
def _bucket(s, lo, scale, NB: tl.constexpr):
    """Score s's linear bucket: monotone in s, so every key of a higher bucket is larger."""
    return tl.minimum(tl.maximum(((s - lo) * scale).to(tl.int32), 0), NB - 1)


@triton.jit
def _filter_hist(s_ptr, s_stride, lens_ptr, mm_ptr, hist_ptr, NPROG, TOPK: tl.constexpr, PS: tl.constexpr,
                 PAGES: tl.constexpr, NPP2: tl.constexpr, NB: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    """The filtered select's one counting pass: a chunk of a long row's keys per program, counted per linear
    bucket of the row's score range, summed over chunks by atomics."""
    b = tl.program_id(0)
    c0 = tl.program_id(1) * CHUNK
    n = tl.load(lens_ptr + b)
    if (n > TOPK) & (c0 < n):
        lo, scale = _row_range(mm_ptr, b, n, NPROG, PAGES, PS, NPP2, NB)
        bins = tl.arange(0, NB)
        ar = tl.arange(0, BLOCK)
        hist = tl.zeros([NB], dtype=tl.int32)
        for start in range(c0, c0 + CHUNK, BLOCK):
            t = start + ar
            ok = t < n
            d = _bucket(tl.load(s_ptr + b * s_stride + t, mask=ok, other=0.0), lo, scale, NB)
            hist += tl.histogram(tl.where(ok, d, 0), NB)
            hist -= tl.where(bins == 0, BLOCK - tl.sum(ok.to(tl.int32), axis=0), 0)
        tl.atomic_add(hist_ptr + b * NB + bins, hist, mask=hist != 0, sem="relaxed")


@triton.jit
def _filter_gather(s_ptr, s_stride, lens_ptr, bt_ptr, bt_stride, out_ptr, out_stride, mm_ptr, hist_ptr, cnt_ptr,
                   cand_ptr, NPROG, TOPK: tl.constexpr, PS: tl.constexpr, PAGES: tl.constexpr, NPP2: tl.constexpr,
                   NB: tl.constexpr, CAP: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr, LAST: tl.constexpr,
                   FBLOCK: tl.constexpr):
    """One chunk's share of a row: pass-through rows in token order; a long row's ids of every key above the
    threshold bucket (the bucket holding the TOPK-th largest key; slots claimed with atomics), and the
    bucket's own (key, token) pairs appended to the row's candidate buffer, whose count goes on past CAP so
    that the exact select sees an overflow. Counters per row: [keys above, candidates, chunks done, -]. With
    LAST the row's last program to finish (the chunks-done counter, acquire-release: every other program's
    candidates and counts are visible to it) makes the exact select itself, instead of _filter_final."""
    b = tl.program_id(0)
    c0 = tl.program_id(1) * CHUNK
    n = tl.load(lens_ptr + b)
    out_row = out_ptr + b * out_stride
    bt_row = bt_ptr + b * bt_stride
    if n <= TOPK:
        _pass_through(bt_row, out_row, c0, n, TOPK, PS, CHUNK, BLOCK)
    elif c0 < n:
        lo, scale = _row_range(mm_ptr, b, n, NPROG, PAGES, PS, NPP2, NB)
        star, want = _pick(hist_ptr + b * NB, NB, TOPK)
        star = star.to(tl.int32)
        ar = tl.arange(0, BLOCK)
        for start in range(c0, c0 + CHUNK, BLOCK):
            t = start + ar
            ok = t < n
            sc = tl.load(s_ptr + b * s_stride + t, mask=ok, other=0.0)
            d = _bucket(sc, lo, scale, NB)
            gt = (ok & (d > star)).to(tl.int32)
            eq = (ok & (d == star)).to(tl.int32)
            n_gt = tl.sum(gt, axis=0)
            n_eq = tl.sum(eq, axis=0)
            base_gt = tl.atomic_add(cnt_ptr + b * 4, n_gt, mask=n_gt > 0, sem="relaxed")
            base_eq = tl.atomic_add(cnt_ptr + b * 4 + 1, n_eq, mask=n_eq > 0, sem="relaxed")
            page = tl.load(bt_row + t // PS, mask=gt > 0, other=0)
            tl.store(out_row + base_gt + tl.cumsum(gt, axis=0) - 1, page * PS + t % PS, mask=gt > 0)
            cpos = base_eq + tl.cumsum(eq, axis=0) - 1
            keep = (eq > 0) & (cpos < CAP)
            slot = cand_ptr + (b * CAP + cpos) * 2
            tl.store(slot, _ordered_key(sc).to(tl.int32, bitcast=True), mask=keep)
            tl.store(slot + 1, t, mask=keep)
        if LAST:
            tl.debug_barrier()  # every thread's candidate stores before the release below
            done = tl.atomic_add(cnt_ptr + b * 4 + 2, 1, sem="acq_rel")
            if done == (n + CHUNK - 1) // CHUNK - 1:
                m = tl.atomic_add(cnt_ptr + b * 4 + 1, 0, sem="acquire")
                from_buf = m <= CAP
                _select_exact(s_ptr + b * s_stride, cand_ptr + b * (CAP * 2), bt_row, out_row, tl.where(from_buf, m, n),
                              from_buf, lo, scale, star, want, TOPK - want, NB, PS, 8, FBLOCK, True)


@triton.jit
def _filter_final(s_ptr, s_stride, lens_ptr, bt_ptr, bt_stride, out_ptr, out_stride, mm_ptr, hist_ptr, cnt_ptr,
                  cand_ptr, NPROG, TOPK: tl.constexpr, PS: tl.constexpr, PAGES: tl.constexpr, NPP2: tl.constexpr,
                  NB: tl.constexpr, CAP: tl.constexpr, BLOCK: tl.constexpr):
    """A long row's last ids, one program per row: the exact select of the threshold bucket's `want` largest
    keys, from the candidate buffer, or from the whole row (its keys of that bucket only) when the bucket
    held more than CAP keys; written after the keys above the bucket."""
    b = tl.program_id(0)
    n = tl.load(lens_ptr + b)
    if n > TOPK:
        lo, scale = _row_range(mm_ptr, b, n, NPROG, PAGES, PS, NPP2, NB)
        star, want = _pick(hist_ptr + b * NB, NB, TOPK)
        m = tl.load(cnt_ptr + b * 4 + 1)
        from_buf = m <= CAP
        _select_exact(s_ptr + b * s_stride, cand_ptr + b * (CAP * 2), bt_ptr + b * bt_stride, out_ptr + b * out_stride,
                      tl.where(from_buf, m, n), from_buf, lo, scale, star.to(tl.int32), want, TOPK - want,
                      NB, PS, 8, BLOCK, True)


def _resident_programs(dev) -> int:
    """Programs of the chained select that are surely resident at once: one per SM (132 where there is no
    GPU, so the CPU check sizes chunks as an H100 / H200 would). A property query (torch caches it), no
    synchronization; nothing kept between calls."""
    if dev.type != "cuda":
        return 132
    return torch.cuda.get_device_properties(dev).multi_processor_count


def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table, topk_indices=None):
    B, H, D = q_index_fp8.shape
    P, PS, KH, DW = k_index_cache_fp8.shape
    assert (H, D, PS, KH, DW) == (HEADS, DIM, PAGE, 1, DIM + SCALE_BYTES), "specialised for 64 x 128 heads, page 64"
    mp = block_table.shape[1]
    dev = q_index_fp8.device
    if topk_indices is None:
        topk_indices = torch.empty((B, TOPK), dtype=torch.int32, device=dev)
    if B == 0:
        return topk_indices
    cache = k_index_cache_fp8.contiguous()
    k8 = cache.view(torch.float8_e4m3fn)  # the same bytes, read as fp8 values ...
    k32 = cache.view(torch.float32)  # ... and as float32 scales (a page is 8448 bytes: 4-aligned)
    q = q_index_fp8.contiguous()
    w = weights.contiguous()
    if mp * PS <= TOPK:  # the table cannot hold a row longer than top-k: every row passes through
        unused = torch.empty((1,), dtype=torch.float32, device=dev)  # no scores are read
        _select_rows[(B,)](
            unused, 0, seq_lens, block_table, block_table.stride(0), topk_indices, topk_indices.stride(0),
            TOPK=TOPK, PS=PS, BLOCK=TOPK, BITS=RADIX_BITS, num_warps=SELECT_WARPS)
        return topk_indices
    scores = torch.empty((B, mp * PS), dtype=torch.float32, device=dev)
    resident = 0 < RESIDENT_FROM_ROWS <= B and mp * PS <= RESIDENT_MAX
    split = B < SPLIT_BELOW_ROWS and not resident
    npass = (32 + RADIX_BITS - 1) // RADIX_BITS
    fused = split and FUSE_HIST0 == 1
    zero_in_scorer = split and not fused and ZERO_IN_SCORER == 1
    filt = split and not fused and FILTER_BINS > 0
    wide = split and not fused and not filt and RADIX_BITS == 8 and B * mp * PS <= WIDE_MAX_SCORES
    row = FILTER_BINS if filt else WIDE_ROW if wide else npass * (1 << RADIX_BITS)  # histogram ints per row
    large = 0 < LARGE_FROM_SCORES <= B * mp * PS
    pages, tile = (LARGE_PAGES, LARGE_TILE) if large else (PAGES, TILE_PAGES)
    nprog = triton.cdiv(mp, pages)  # the scorer's programs per row
    # the filtered select: each scorer program's (largest, smallest) score, and each row's candidate buffer
    mm = torch.empty((B, nprog, 2) if filt else (1,), dtype=torch.float32, device=dev)
    chunk = SMALL_CHUNK if B * mp * PS <= SMALL_CHUNK_MAX_SCORES else SPLIT_CHUNK
    chain = split and not fused and not filt and RADIX_BITS == 8 and CHAIN_SELECT
    if chain:  # the chained select needs every program resident: chunks grown to fit the SMs, or not chained
        slots = _resident_programs(dev)
        grown = chunk
        while B * triton.cdiv(mp * PS, grown) > slots and grown < CHAIN_MAX_CHUNK:
            grown *= 2
        chain = B * triton.cdiv(mp * PS, grown) <= slots
        chunk = grown if chain else chunk  # not chained: the separate launches at their own chunk size
    # counters per row (the filtered select's: above, candidates, chunks done, -; the chain's: above, ties, barrier, -)
    ncnt = 4 if filt or chain else 2
    if split:  # the split path's histograms (+ counters per row): zero before pass 0 adds to them
        # + the counters and 4 (prefix, want) state slots per row (the slots are written before read)
        hist = (torch.empty if zero_in_scorer else torch.zeros)((B * row + B * (ncnt + 8),), dtype=torch.int32, device=dev)
        cnt = hist[B * row:]
        st = hist[B * row + B * ncnt:]
    else:
        hist = cnt = st = scores  # not read
    _score_pages[(B, nprog)](
        q, k8, k32, w, seq_lens, block_table, block_table.stride(0), scores, scores.stride(0), hist, cnt, mm,
        TOPK=TOPK, H=H, D=D, PS=PS, PAGES=pages, TILE=tile, HIST0=fused, ZERO=zero_in_scorer, ROW=row, BITS=RADIX_BITS,
        STAGES=SCORE_STAGES, RANGE=filt, NPROG=nprog, CNT=ncnt, num_warps=SCORE_WARPS)
    if resident:  # one program per row, its keys in registers
        _select_resident[(B,)](
            scores, scores.stride(0), seq_lens, block_table, block_table.stride(0), topk_indices, topk_indices.stride(0),
            TOPK=TOPK, PS=PS, BLOCK=triton.next_power_of_2(mp * PS), BITS=RESIDENT_BITS, num_warps=RESIDENT_WARPS)
        return topk_indices
    if not split:  # enough rows to fill the GPU with one program each
        _select_rows[(B,)](
            scores, scores.stride(0), seq_lens, block_table, block_table.stride(0), topk_indices, topk_indices.stride(0),
            TOPK=TOPK, PS=PS, BLOCK=SELECT_BLOCK, BITS=RADIX_BITS, num_warps=SELECT_WARPS)
        return topk_indices
    # Few rows: each row's selection spread over chunks of SPLIT_CHUNK scores (one pass per launch).
    grid = (B, triton.cdiv(mp * PS, chunk))
    block = min(SELECT_BLOCK, chunk)
    if chain:  # all passes in one launch; a pass per launch where programs run one after another (the interpreter)
        args = (scores, scores.stride(0), seq_lens, block_table, block_table.stride(0), topk_indices, topk_indices.stride(0),
                hist, cnt, st)
        gather = 3 if wide else 4  # the gather's pass: after 8 + 12 + 12-bit digits, or four 8-bit ones
        one_at_a_time = type(_chain_select).__name__ == "InterpretedFunction"
        if one_at_a_time:
            for p in range(gather + 1):
                _chain_select[grid](*args, TOPK=TOPK, PS=PS, CHUNK=chunk, BLOCK=block, ROW=row, WIDE=wide, FIRST=p,
                                    LAST=p, num_warps=SELECT_WARPS)
        else:  # a cooperative launch: the driver refuses a grid that cannot be resident at once, rather than hang
            _chain_select[grid](*args, TOPK=TOPK, PS=PS, CHUNK=chunk, BLOCK=block, ROW=row, WIDE=wide, FIRST=0,
                                LAST=gather, num_warps=SELECT_WARPS, launch_cooperative_grid=True)
        return topk_indices
    if filt:  # one counting pass, the ids above the threshold bucket and its candidates, the exact rest
        cand = torch.empty((B * FILTER_CAP * 2,), dtype=torch.int32, device=dev)
        common = dict(TOPK=TOPK, PS=PS, PAGES=pages, NPP2=triton.next_power_of_2(nprog), NB=FILTER_BINS)
        _filter_hist[grid](scores, scores.stride(0), seq_lens, mm, hist, nprog, CHUNK=chunk, BLOCK=block, **common,
                           num_warps=SELECT_WARPS)
        _filter_gather[grid](scores, scores.stride(0), seq_lens, block_table, block_table.stride(0), topk_indices,
                             topk_indices.stride(0), mm, hist, cnt, cand, nprog, CAP=FILTER_CAP, CHUNK=chunk, BLOCK=block,
                             LAST=FILTER_LAST, FBLOCK=max(FILTER_CAP, 1024), **common, num_warps=SELECT_WARPS)
        if FILTER_LAST:
            return topk_indices
        _filter_final[(B,)](scores, scores.stride(0), seq_lens, block_table, block_table.stride(0), topk_indices,
                            topk_indices.stride(0), mm, hist, cnt, cand, nprog, CAP=FILTER_CAP,
                            BLOCK=max(FILTER_CAP, 1024), **common, num_warps=SELECT_WARPS)
        return topk_indices
    for p in range(1 if fused else 0, 1 if wide else npass):  # wide: pass 0 at 8 bits, then 12 and 12 below
        _split_hist[grid](scores, scores.stride(0), seq_lens, hist, st, P_NOW=p,
                          TOPK=TOPK, CHUNK=chunk, BLOCK=block, BITS=RADIX_BITS, ROW=row, num_warps=SELECT_WARPS)
    for p in range(1, 3) if wide else ():
        _wide_hist[grid](scores, scores.stride(0), seq_lens, hist, st, P_NOW=p,
                         TOPK=TOPK, CHUNK=chunk, BLOCK=block, ROW=row, num_warps=SELECT_WARPS)
    _split_gather[grid](scores, scores.stride(0), seq_lens, block_table, block_table.stride(0), topk_indices,
                        topk_indices.stride(0), hist, cnt, st, TOPK=TOPK, PS=PS, CHUNK=chunk, BLOCK=block,
                        BITS=RADIX_BITS, WIDE=wide, ROW=row, num_warps=SELECT_WARPS)
    return topk_indices
