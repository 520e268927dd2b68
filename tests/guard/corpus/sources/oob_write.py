# Trick (or bug): a Triton kernel that writes far outside its output. On a GPU this is an illegal
# address that poisons the CUDA context; under the interpreter it is a wild host write. Either way the
# worker must die alone and the evaluation go on with a fresh one. Static checks cannot see it.
import torch
import triton
import triton.language as tl


@triton.jit
def _wild(x_ptr, y_ptr, n, off, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(y_ptr + off + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    _wild[(1,)](hidden_states, out, hidden_states.numel(), 1 << 40, BLOCK=1024)
    return out
