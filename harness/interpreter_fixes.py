"""Fixes for Triton's CPU interpreter (``TRITON_INTERPRET=1``), applied by the worker on CPU runs.

The interpreter stores bfloat16 tensors as their raw 16-bit patterns (``np.uint16``) and its
``tl.dot`` multiplies those integers: a bf16 x bf16 dot returns numbers around 1e11 instead of the
product (seen with triton 3.9; fp8 operands are converted first, bf16 ones are not). Every Triton
kernel that feeds bf16 tiles to ``tl.dot`` — the natural way to use tensor cores on bf16 inputs — would
fail on the CPU for a reason that has nothing to do with the kernel. The fix widens bf16 operands to
float32 (exact) before the product, which is what the tensor cores compute (bf16 products are exact in
float32, accumulated in float32).

Its float32 -> bfloat16 conversion (``x.to(tl.bfloat16)``, a store into a bf16 pointer) drops the low 16
bits, rounding toward zero, where the GPU's ``cvt.rn.bf16.f32`` rounds to nearest even. The bias is
one-sided, so it adds up: a sparse-attention kernel that rounds its softmax weights to bf16 for the
value product (as FlashMLA-style kernels do on the GPU) read 1.0547 on the CPU for an element whose
float64 value is 1.0666 (1.0672 with round-to-nearest weights), failing the official atol = rtol =
0.01 on one element of 2.5 million. The fix rounds to nearest even, as the GPU does.
"""

from __future__ import annotations

import numpy as np

_APPLIED: list[bool] = []


def _bf16_to_f32(data: np.ndarray) -> np.ndarray:
    return (data.astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16_rne(data: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), rounded to nearest even; NaN stays a (quiet) NaN."""
    bits = np.ascontiguousarray(data, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (bits & 0x7FFFFFFF) > 0x7F800000  # exponent all ones, mantissa not zero
    return np.where(nan, ((bits >> 16) | 0x0040).astype(np.uint16), rounded)


def apply() -> bool:
    """Patch the interpreter's dot and its float32 -> bfloat16 cast once; False when this Triton has no
    interpreter builder to patch."""
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
    original_cast = getattr(builder, "cast_impl", None)
    if original_cast is not None:

        def cast_impl(self, src, dst_type):
            if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
                return handle(_f32_to_bf16_rne(src.data), tl.bfloat16)
            return original_cast(self, src, dst_type)

        builder.cast_impl = cast_impl
    _APPLIED.append(True)
    return True
