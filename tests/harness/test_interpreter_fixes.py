"""The Triton interpreter fixes (harness/interpreter_fixes.py): a CPU run computes what the GPU would."""

import numpy as np
import pytest
import torch

from harness.interpreter_fixes import _f32_to_bf16_rne

triton = pytest.importorskip("triton")


def test_f32_to_bf16_rounds_to_nearest_even_like_torch():
    vals = [1.0 + 2**-8 + 2**-10, 1.0 + 3 * 2**-9, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 0.35214428, 1.0666299526, -2.5e-39,
            3.3895e38, float("inf"), -float("inf"), 0.0, -0.0, 1e-45]
    x = torch.tensor(vals, dtype=torch.float32)
    got = _f32_to_bf16_rne(x.numpy())
    want = x.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert got.tolist() == want.tolist()
    nan = _f32_to_bf16_rne(np.array([float("nan")], dtype=np.float32))
    assert np.isnan(torch.from_numpy(nan.view(np.int16)).view(torch.bfloat16).float().numpy()).all()


def test_random_values_match_torch_rounding():
    x = torch.randn(100_000, generator=torch.Generator().manual_seed(1)) * torch.logspace(-30, 30, 100_000)
    got = _f32_to_bf16_rne(x.numpy())
    want = x.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert (got == want).all()


DRIVER = r"""
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, sys.argv[1])
import torch
import triton
import triton.language as tl
from harness.interpreter_fixes import apply
assert apply()

@triton.jit
def conv(x_ptr, y_ptr, z_ptr, N: tl.constexpr):
    o = tl.arange(0, N)
    v = tl.load(x_ptr + o)
    tl.store(y_ptr + o, v.to(tl.bfloat16))
    tl.store(z_ptr + o, v)  # a float32 value stored into a bf16 pointer: the implicit cast

x = torch.tensor([1.0 + 2**-8 + 2**-10, 1.0 + 3 * 2**-9, 1.0666299526, -1.0 - 3 * 2**-9], dtype=torch.float32)
y = torch.empty(4, dtype=torch.bfloat16)
z = torch.empty(4, dtype=torch.bfloat16)
conv[(1,)](x, y, z, N=4)
print(y.tolist(), z.tolist(), x.bfloat16().tolist())
assert y.tolist() == x.bfloat16().tolist() == z.tolist()
assert y[0].item() == 1.0078125  # rounding toward zero would give 1.0
"""


def test_interpreter_cast_and_store_round_like_the_gpu():
    """A kernel run by the interpreter (a fresh process: the interpreter is chosen when a kernel is
    decorated) rounds float32 -> bf16 to nearest even, in an explicit cast and in a store."""
    import subprocess
    import sys
    from pathlib import Path

    p = subprocess.run([sys.executable, "-c", DRIVER, str(Path(__file__).resolve().parents[2])], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
