"""Input generators: the named table a workload or a definition's sidecar points into, and the built-in
generators (normal, uniform, randint, arange, lengths, cu_seqlens, permutation, positive).

An operator module registers more with ``@generator("name")`` (harness/operators/); a name registered
twice is an error, so two modules cannot silently replace each other's generator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .dtypes import torch_dtype
from .registrar import registrar
from .schema import ABSENT, SchemaError, TensorSpec


@dataclass
class GenContext:
    """What a generator may look at. ``made`` holds the inputs generated so far, in definition order."""

    name: str
    spec: TensorSpec
    shape: tuple[int, ...] | None
    axes: dict[str, int]
    gen: torch.Generator  # on the CPU: small structured values (indices, lengths)
    device: torch.device
    made: dict[str, Any] = field(default_factory=dict)
    dgen: torch.Generator | None = None  # on the target device: bulk random values

    @property
    def dtype(self) -> torch.dtype:
        return torch_dtype(self.spec.dtype)


Generator = Callable[..., Any]
GENERATORS: dict[str, Generator] = {}


generator = registrar(GENERATORS, "generator")  # @generator("name") registers a structured input generator


def random_float(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator, device: torch.device, std: float = 1.0, mean: float = 0.0) -> torch.Tensor:
    # Drawn on the generator's own device: bulk inputs (hundreds of MB) are made on the GPU in
    # microseconds instead of seconds on the host. Values are reproducible per (seed, device).
    x = torch.randn(shape, generator=gen, dtype=torch.float32, device=gen.device) * std + mean
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        lim = torch.finfo(dtype).max
        x = x.clamp(-lim, lim)
    return x.to(device=device, dtype=dtype)


@generator("normal")
def gen_normal(ctx: GenContext, std: float = 1.0, mean: float = 0.0) -> torch.Tensor:
    return random_float(ctx.shape or (), ctx.dtype, ctx.dgen or ctx.gen, ctx.device, std=std, mean=mean)


@generator("uniform")
def gen_uniform(ctx: GenContext, low: float = 0.0, high: float = 1.0) -> torch.Tensor:
    x = torch.rand(ctx.shape or (), generator=ctx.gen, dtype=torch.float32) * (high - low) + low
    return x.to(device=ctx.device, dtype=ctx.dtype)


def _bound(value: Any, axes: dict[str, int]) -> int:
    """An integer bound given literally or as the name of an axis (or 'axis+1', 'axis-1')."""
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        for op, delta in (("+", 1), ("-", -1)):
            if op in value:
                base, _, n = value.partition(op)
                return axes[base.strip()] + delta * int(n)
        if value in axes:
            return axes[value]
    raise SchemaError(f"bound '{value}' is neither an integer nor an axis name")


@generator("randint")
def gen_randint(ctx: GenContext, low: Any = 0, high: Any = 2) -> torch.Tensor:
    lo, hi = _bound(low, ctx.axes), _bound(high, ctx.axes)
    if hi <= lo:
        raise SchemaError(f"{ctx.name}: randint needs high > low, got [{lo}, {hi})")
    return torch.randint(lo, hi, ctx.shape or (), generator=ctx.gen).to(device=ctx.device, dtype=ctx.dtype)


@generator("arange")
def gen_arange(ctx: GenContext, start: int = 0) -> torch.Tensor:
    n = math.prod(ctx.shape or ())
    return torch.arange(start, start + n).reshape(ctx.shape or ()).to(device=ctx.device, dtype=ctx.dtype)


@generator("lengths")
def gen_lengths(ctx: GenContext, low: Any = 1, high: Any = 2, total_axis: str | None = None) -> torch.Tensor:
    """Per-sequence lengths in [low, high]; with ``total_axis`` they sum exactly to that axis."""
    (n,) = ctx.shape or (1,)
    if total_axis is None:
        return torch.randint(_bound(low, ctx.axes), _bound(high, ctx.axes) + 1, (n,), generator=ctx.gen).to(ctx.device, ctx.dtype)
    total = ctx.axes[total_axis]
    return _split_total(total, n, ctx.gen, min_each=_bound(low, ctx.axes)).to(ctx.device, ctx.dtype)


def _split_total(total: int, n: int, gen: torch.Generator, min_each: int = 0) -> torch.Tensor:
    if n <= 0:
        return torch.zeros(0, dtype=torch.int64)
    if total < n * min_each:
        raise SchemaError(f"cannot split {total} into {n} parts of at least {min_each}")
    rest = total - n * min_each
    w = torch.rand(n, generator=gen) + 1e-3
    parts = torch.floor(w / w.sum() * rest).to(torch.int64)
    parts[torch.randint(0, n, (1,), generator=gen)] += rest - int(parts.sum())
    return parts + min_each


@generator("cu_seqlens")
def gen_cu_seqlens(ctx: GenContext, total_axis: str, min_len: int = 1) -> torch.Tensor:
    """Prefix sums [0, l0, l0+l1, ...] of lengths that add up to ``axes[total_axis]``."""
    (n1,) = ctx.shape or (1,)
    lens = _split_total(ctx.axes[total_axis], n1 - 1, ctx.gen, min_each=min_len)
    out = torch.zeros(n1, dtype=torch.int64)
    out[1:] = torch.cumsum(lens, 0)
    return out.to(ctx.device, ctx.dtype)


@generator("permutation")
def gen_permutation(ctx: GenContext, n_axis: str | None = None) -> torch.Tensor:
    """Distinct indices: the first prod(shape) entries of a random permutation of range(n)."""
    count = math.prod(ctx.shape or ())
    n = ctx.axes[n_axis] if n_axis else count
    if count > n:
        raise SchemaError(f"{ctx.name}: need {count} distinct indices from only {n}")
    return torch.randperm(n, generator=ctx.gen)[:count].reshape(ctx.shape or ()).to(ctx.device, ctx.dtype)


@generator(ABSENT)
def gen_absent(ctx: GenContext) -> None:
    """An optional input left out: the solution receives None (each definition says what that means)."""
    if not getattr(ctx.spec, "optional", False):
        raise SchemaError(f"{ctx.name}: only an optional input can be absent")
    return None


@generator("positive")
def gen_positive(ctx: GenContext, low: float = 0.5, high: float = 1.5) -> torch.Tensor:
    """Strictly positive floats (scales, norms)."""
    return gen_uniform(ctx, low=low, high=high)
