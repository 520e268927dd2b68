# Honest Triton rmsnorm with a thin host wrapper: autotuned block configuration, a heuristic for the
# mask, an alignment check on the input pointer and destination-passing style output.
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 1024}, num_warps=4), triton.Config({"BLOCK": 2048}, num_warps=8)], key=["n_cols"])
@triton.heuristics({"EVEN": lambda args: args["n_cols"] % args["BLOCK"] == 0})
@triton.jit
def _rms_rows(x_ptr, w_ptr, y_ptr, n_cols, stride, eps, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        if EVEN:
            x = tl.load(x_ptr + row * stride + cols).to(tl.float32)
        else:
            x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = cols < n_cols
        x = tl.load(x_ptr + row * stride + cols, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


def run(hidden_states, weight, output):
    if hidden_states.data_ptr() % 16 != 0 or not hidden_states.is_contiguous():
        raise ValueError("expects a contiguous, 16-byte aligned input")
    n_rows, n_cols = hidden_states.shape
    if n_rows == 0:
        return
    _rms_rows[(n_rows,)](hidden_states, weight, output, n_cols, hidden_states.stride(0), 1e-5)
