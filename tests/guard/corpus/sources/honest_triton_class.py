# Honest Triton rmsnorm behind a small launcher object built once at import: its settings are set in
# __init__ and only read afterwards (no state changes across calls).
import torch
import triton
import triton.language as tl


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=m, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * n_cols + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


class _Launcher:
    def __init__(self, eps: float, num_warps: int):
        self.eps = eps
        self.num_warps = num_warps

    def __call__(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        _rms[(n_rows,)](x, w, y, n_cols, self.eps, BLOCK=triton.next_power_of_2(n_cols), num_warps=self.num_warps)
        return y


_LAUNCH = _Launcher(1e-5, 8)


def run(hidden_states, weight):
    return _LAUNCH(hidden_states.contiguous(), weight)
