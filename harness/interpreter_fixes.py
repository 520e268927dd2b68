"""Fixes for Triton's CPU interpreter (``TRITON_INTERPRET=1``), applied by the worker on CPU runs.

The interpreter stores bfloat16 tensors as their raw 16-bit patterns (``np.uint16``) and its
``tl.dot`` multiplies those integers: a bf16 x bf16 dot returns numbers around 1e11 instead of the
product (seen with triton 3.9; fp8 operands are converted first, bf16 ones are not). Every Triton
kernel that feeds bf16 tiles to ``tl.dot`` — the natural way to use tensor cores on bf16 inputs — would
fail on the CPU for a reason that has nothing to do with the kernel. The fix widens bf16 operands to
float32 (exact) before the product, which is what the tensor cores compute (bf16 products are exact in
float32, accumulated in float32).
"""

from __future__ import annotations

import numpy as np

_APPLIED: list[bool] = []


def _bf16_to_f32(data: np.ndarray) -> np.ndarray:
    return (data.astype(np.uint32) << 16).view(np.float32)


def apply() -> bool:
    """Patch the interpreter's dot once; False when this Triton has no interpreter builder to patch."""
    if _APPLIED:
        return True
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return False
    builder = getattr(interpreter, "InterpreterBuilder", None)
    original = getattr(builder, "create_dot", None)
    handle = getattr(interpreter, "TensorHandle", None)
    if builder is None or original is None or handle is None:
        return False

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.dtype.scalar == tl.bfloat16 or b.dtype.scalar == tl.bfloat16:
            a32 = _bf16_to_f32(a.data) if a.dtype.scalar == tl.bfloat16 else a.data.astype(np.float32)
            b32 = _bf16_to_f32(b.data) if b.dtype.scalar == tl.bfloat16 else b.data.astype(np.float32)
            a = handle(a32, tl.float32)
            b = handle(b32, tl.float32)
        return original(self, a, b, d, input_precision, max_num_imprecise_acc)

    builder.create_dot = create_dot
    _APPLIED.append(True)
    return True
