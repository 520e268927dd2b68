"""Fused add + RMSNorm, hidden_size 4096: y = rmsnorm(hidden_states + residual) * weight.

The sum is formed in fp32 in registers and never written back (the definition's only output is
``output``). One program per ROWS rows, a whole row per step. Tunables are marked with
``# kbot: tunable``.
"""

import torch
import triton
import triton.language as tl

HIDDEN = 4096
EPS = 1e-5
ROWS = 1  # kbot: tunable [1, 2, 4]
NUM_WARPS = 8  # kbot: tunable [2, 4, 8, 16]


@triton.jit
def _add_rmsnorm(x_ptr, r_ptr, w_ptr, y_ptr, n_rows, stride_x, stride_r, stride_y, eps,
                 HIDDEN: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, HIDDEN)
    w = tl.load(w_ptr + cols).to(tl.float32)
    for i in tl.static_range(ROWS):
        row = pid * ROWS + i
        if row < n_rows:
            x = tl.load(x_ptr + row * stride_x + cols).to(tl.float32)
            x += tl.load(r_ptr + row * stride_r + cols).to(tl.float32)
            inv = tl.rsqrt(tl.sum(x * x, axis=0) / HIDDEN + eps)
            tl.store(y_ptr + row * stride_y + cols, (x * inv * w).to(y_ptr.dtype.element_ty))


def run(hidden_states, residual, weight, output=None):
    batch, hidden = hidden_states.shape
    assert hidden == HIDDEN, f"this kernel is specialised for hidden_size {HIDDEN}, got {hidden}"
    x = hidden_states.contiguous()
    r = residual.contiguous()
    if output is None:
        output = torch.empty_like(x)
    grid = (triton.cdiv(batch, ROWS),)
    _add_rmsnorm[grid](x, r, weight, output, batch, x.stride(0), r.stride(0), output.stride(0), EPS,
                       HIDDEN=HIDDEN, ROWS=ROWS, num_warps=NUM_WARPS)
    return output
