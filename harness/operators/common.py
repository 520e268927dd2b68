"""Helpers shared by the contest operators' generators: FP8 quantization and fast seeded random data.

All randomness is drawn on the CPU from the caller's seeded ``torch.Generator`` and moved afterwards,
as ``harness.inputs`` does, so a CPU run and a GPU run of the same seed see the same values.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..schema import SchemaError

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # largest finite float8_e4m3fn
# 0x8F in every byte (sign, lowest exponent bit, mantissa), written as the signed int64 it is.
_KEEP_BITS = 0x8F8F8F8F8F8F8F8F - (1 << 64)


def quantize_fp8_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row (last dim) FP8 quantization: ``x ~= fp8 * scale`` with ``scale = amax / 448``.

    Returns (fp8 tensor of x's shape, float32 scales of shape x.shape[:-1]). An all-zero row gets
    scale 1 so that dequantization never divides by zero.
    """
    amax = x.abs().amax(dim=-1).float()
    scale = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax))
    q = (x.float() / scale.unsqueeze(-1)).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return q, scale


def quantize_fp8_blocks_1d(x: torch.Tensor, block: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize ``x [rows, cols]`` in blocks of ``block`` columns: scales ``[rows, cols // block]``."""
    rows, cols = x.shape
    if cols % block:
        raise SchemaError(f"{cols} columns are not a multiple of the block size {block}")
    q, s = quantize_fp8_rows(x.reshape(rows, cols // block, block))
    return q.reshape(rows, cols), s


def random_fp8_bytes(n: int, gen: torch.Generator, device: torch.device | str = "cpu") -> torch.Tensor:
    """``n`` random finite FP8 (e4m3fn) values with random sign and magnitude in [0.5, 1.875], on ``device``.

    Full-size MoE weights are ~1.4 G elements; drawing normals and quantizing them takes tens of
    seconds on a CPU, and even drawing 1.4 GB of raw bits takes ~2 s there (once per trial). So an
    eighth of the bits is drawn on the CPU from ``gen`` and expanded on ``device``: each further
    eighth is the drawn words rotated by a random number of words and XORed with a random 64-bit word
    (exact integer operations: every device gets the same bytes). Then the bits are masked to a safe
    exponent range: the sign and the 3 mantissa bits stay random, the exponent field is 6 or 7 (never
    15, so never NaN). Per-block scales, drawn separately, give the blocks their magnitudes.
    """
    words = (n + 7) // 8
    k = (words + 7) // 8
    base = torch.randint(-(2**63), 2**63 - 1, (k,), generator=gen, dtype=torch.int64)
    shifts = torch.randint(1, max(k, 2), (8,), generator=gen).tolist()
    keys = torch.randint(-(2**63), 2**63 - 1, (8,), generator=gen, dtype=torch.int64).tolist()
    base = base.to(device)
    r = torch.empty(8 * k, dtype=torch.int64, device=device)
    r[:k] = base
    for j in range(1, 8):  # chunk j = base rotated right by shifts[j] words, XOR keys[j]
        c, sh = r[j * k:(j + 1) * k], shifts[j]
        c[:sh], c[sh:] = base[k - sh:], base[:k - sh]
        c.bitwise_xor_(keys[j])
    # keep sign (0x80), exponent low bit (0x08) and mantissa (0x07); force exponent bits 0x30 on.
    r.bitwise_and_(_KEEP_BITS).bitwise_or_(0x3030303030303030)  # in place: 1 GB temporaries are slow
    return r.view(torch.uint8)[:n].view(FP8)


def split_lengths(total: int, n: int, gen: torch.Generator, mix: str = "random", min_each: int = 1) -> list[int]:
    """``n`` positive lengths summing to ``total`` in one of a few shapes of mix.

    - ``equal``: as equal as possible;
    - ``random``: uniform random proportions;
    - ``skewed``: one long sequence holding about 3/4 of the tokens, the rest short.
    """
    if n <= 0:
        if total:
            raise SchemaError(f"cannot split {total} tokens over 0 sequences")
        return []
    if total < n * min_each:
        raise SchemaError(f"cannot split {total} tokens into {n} sequences of at least {min_each}")
    rest = total - n * min_each
    if mix == "equal":
        w = torch.ones(n)
    elif mix == "random":
        w = torch.rand(n, generator=gen) + 1e-3
    elif mix == "skewed":
        w = torch.rand(n, generator=gen) * 0.1 + 1e-3
        w[int(torch.randint(0, n, (1,), generator=gen))] = max(float(w.sum()) * 3.0, 1.0)
    else:
        raise SchemaError(f"unknown length mix '{mix}' (known: equal, random, skewed)")
    parts = torch.floor(w / w.sum() * rest).to(torch.int64)
    parts[torch.argmax(w)] += rest - int(parts.sum())
    return [int(p) + min_each for p in parts]


def require_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise SchemaError(f"{what} must be an integer, got {value!r}")
    return int(value)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def log_uniform(low: float, high: float, n: int, gen: torch.Generator) -> torch.Tensor:
    u = torch.rand(n, generator=gen, dtype=torch.float64)
    return torch.exp(math.log(low) + u * (math.log(high) - math.log(low))).float()
