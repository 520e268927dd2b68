"""RMSNorm, hidden_size 4096: each program normalises ROWS rows, one whole row held in registers.

One read and one write of every element (the minimum traffic); the sum of squares is accumulated in
fp32. Tunables are marked with ``# kbot: tunable``.
"""

import torch
import triton
import triton.language as tl

HIDDEN = 4096
EPS = 1e-5
ROWS = 1  # kbot: tunable [1, 2, 4, 8]
NUM_WARPS = 8  # kbot: tunable [1, 2, 4, 8, 16, 32]


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, n_rows, stride_x, stride_y, eps,
                  HIDDEN: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, HIDDEN)
    w = tl.load(w_ptr + cols).to(tl.float32)
    for r in tl.static_range(ROWS):
        row = pid * ROWS + r
        if row < n_rows:
            x = tl.load(x_ptr + row * stride_x + cols).to(tl.float32)
            inv = tl.rsqrt(tl.sum(x * x, axis=0) / HIDDEN + eps)
            y = x * inv * w
            tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty))


def run(hidden_states, weight, output=None):
    batch, hidden = hidden_states.shape
    assert hidden == HIDDEN, f"this kernel is specialised for hidden_size {HIDDEN}, got {hidden}"
    x = hidden_states.contiguous()
    if output is None:
        output = torch.empty_like(x)
    grid = (triton.cdiv(batch, ROWS),)
    _rmsnorm_rows[grid](x, weight, output, batch, x.stride(0), output.stride(0), EPS,
                        HIDDEN=HIDDEN, ROWS=ROWS, num_warps=NUM_WARPS)
    return output
