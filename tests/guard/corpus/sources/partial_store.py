# Trick: a Triton kernel that only writes the first half of each row and leaves the rest to whatever the
# allocator hands back (uninitialized memory). Poisoned outputs and fresh data expose it.
import torch
import triton
import triton.language as tl


@triton.jit
def _half(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols).to(tl.float32)
    half = cols < n_cols // 2
    tl.store(y_ptr + row * n_cols + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=half)


def run(hidden_states, weight):
    n_rows, n_cols = hidden_states.shape
    out = torch.empty_like(hidden_states)
    _half[(n_rows,)](hidden_states, weight, out, n_cols, 1e-5, BLOCK=4096)
    return out
