"""RMSNorm for hidden_size 4096 on Hopper: one row per program, the whole row in registers.

Each element is read once and written once (the minimum traffic: 2 bytes in, 2 bytes out, plus the
8 KiB weight vector that stays in L2), so the kernel is bandwidth-bound for every batch worth timing.
With 4096 bf16 values per row and 8 warps, each thread holds 16 values: 2 x 128-bit loads, no spills.
The sum of squares is accumulated in float32 and the result rounded once, like the reference.
"""

import triton
import triton.language as tl

HIDDEN = 4096
EPS = 1e-5
NUM_WARPS = 8  # kbot: tunable [2, 4, 8, 16, 32]


@triton.jit
def _rmsnorm_row(x_ptr, w_ptr, y_ptr, stride_x, stride_y, eps, HIDDEN: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # int64: batch * stride can pass 2**31 for large batches
    cols = tl.arange(0, HIDDEN)
    x = tl.load(x_ptr + row * stride_x + cols).to(tl.float32)
    w = tl.load(w_ptr + cols).to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(x * x, axis=0) / HIDDEN + eps)
    tl.store(y_ptr + row * stride_y + cols, (x * inv_rms * w).to(y_ptr.dtype.element_ty))


def run(hidden_states, weight, output):
    """Destination-passing entry point: writes ``output`` in place."""
    batch, hidden = hidden_states.shape
    if hidden != HIDDEN:
        raise ValueError(f"this kernel is specialised for hidden_size {HIDDEN}, got {hidden}")
    if hidden_states.stride(1) != 1 or output.stride(1) != 1 or weight.stride(0) != 1:
        raise ValueError("rows must be contiguous")
    if batch == 0:
        return
    _rmsnorm_row[(batch,)](hidden_states, weight, output, hidden_states.stride(0), output.stride(0), EPS,
                           HIDDEN=HIDDEN, num_warps=NUM_WARPS)
