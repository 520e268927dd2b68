"""Inputs for the Gated Delta Net operators (``gdn_decode_qk4_v8_d128_k_last``, ``gdn_prefill_...``).

Ranges follow how Qwen3-Next feeds the kernel, so the recurrence is stable and every gate matters:

- ``q``, ``k``: L2-normalized per head (the model normalizes them before the kernel; with unit keys
  the delta-rule update ``S (I - beta k k^T)`` is a contraction, so the state cannot blow up);
- ``A_log = log(A)``, A log-uniform in [0.1, 16]; ``dt_bias = softplus^-1(dt)``, dt log-uniform in
  [1e-3, 0.1]; with ``a ~ N(0, 1)`` the decay ``g = exp(-A softplus(a + dt_bias))`` spreads over
  (0, 1), from heads that nearly keep their state to heads that nearly reset it;
- ``b ~ N(0, 1)`` so ``beta = sigmoid(b)`` spreads over (0, 1);
- ``state ~ N(0, 0.5)``: the size of a state accumulated from a few dozen unit-key updates; workloads
  also leave it out (the generic ``absent`` generator: None, which means zeros), the first-chunk case;
- ``cu_seqlens``: prefix sums of lengths in an ``equal``, ``random`` or ``skewed`` mix, optionally with
  ``empty`` sequences of length zero at random positions (their final state must be zeros).
"""

from __future__ import annotations

import math

import torch

from ..generators import GenContext, generator
from ..schema import SchemaError
from .common import log_uniform, split_lengths


@generator("unit_rows")
def gen_unit_rows(ctx: GenContext) -> torch.Tensor:
    """Normal vectors scaled to unit L2 norm along the last dimension."""
    x = torch.randn(ctx.shape, generator=ctx.gen)
    x = x / x.norm(dim=-1, keepdim=True).clamp_min(1e-6)
    return x.to(ctx.device, ctx.dtype)


@generator("gdn_A_log")
def gen_A_log(ctx: GenContext, low: float = 0.1, high: float = 16.0) -> torch.Tensor:
    (n,) = ctx.shape
    return torch.log(log_uniform(low, high, n, ctx.gen)).to(ctx.device, ctx.dtype)


@generator("gdn_dt_bias")
def gen_dt_bias(ctx: GenContext, low: float = 1e-3, high: float = 0.1) -> torch.Tensor:
    (n,) = ctx.shape
    dt = log_uniform(low, high, n, ctx.gen).double()
    inv_softplus = dt + torch.log(-torch.expm1(-dt))
    return inv_softplus.to(ctx.device, ctx.dtype)


@generator("gdn_state")
def gen_state(ctx: GenContext, std: float = 0.5) -> torch.Tensor:
    return (torch.randn(ctx.shape, generator=ctx.gen) * std).to(ctx.device, ctx.dtype)


@generator("gdn_cu_seqlens")
def gen_cu_seqlens(ctx: GenContext, mix: str = "random", total_axis: str = "total_seq_len", min_len: int = 1,
                   empty: int = 0) -> torch.Tensor:
    """``[0, l0, l0 + l1, ...]`` with the lengths in the given mix, summing to ``axes[total_axis]``;
    ``empty`` of the sequences (at random positions) have length zero."""
    (n1,) = ctx.shape
    if "num_seqs" in ctx.axes and ctx.axes["num_seqs"] != n1 - 1:
        raise SchemaError(f"{ctx.name}: len_cu_seqlens {n1} must be num_seqs + 1 = {ctx.axes['num_seqs'] + 1}")
    if not 0 <= empty < n1 - 1:
        raise SchemaError(f"{ctx.name}: empty must be in [0, num_seqs), got {empty}")
    lens = split_lengths(ctx.axes[total_axis], n1 - 1 - empty, ctx.gen, mix=mix, min_each=min_len)
    for pos in sorted(int(p) for p in torch.randperm(n1 - 1, generator=ctx.gen)[:empty]):
        lens.insert(pos, 0)
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int64).to(ctx.device, ctx.dtype)


def default_scale(head_size: int) -> float:
    return 1.0 / math.sqrt(head_size)
