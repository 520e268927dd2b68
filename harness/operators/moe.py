"""Inputs for ``moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048`` (DeepSeek-V3 MoE, EP=8).

Everything is built jointly by :func:`build` (the definition's ``inputs.py::make`` calls it):

- routing logits with realistic, uneven expert loads: every expert has a popularity, a few experts
  are hot, and some of the hot ones lie in this rank's local range ``[offset, offset + 32)`` so the
  local experts actually receive tokens (some many, some none);
- a small, non-zero routing bias (it changes which experts are chosen but not their weights, which is
  a classic place to get the math wrong); the first token(s) of every batch are drawn until they
  reach the local experts and the bias visibly moves their combination weights (``visible_bias_*``),
  so a kernel that takes the weights from ``s + bias`` is wrong on a whole row of every workload;
- hidden states quantized from float activations in 1x128 blocks (scales stored transposed,
  ``[num_hidden_blocks, seq_len]``, as the definition says);
- weights as FP8 with random per-128x128-block scales.

Magnitudes: the official tolerance (atol 1, rtol 0.3, 90 % of elements) only means something when
outputs are well above 1. The defaults give per-element outputs with a standard deviation of a few
tens, so a wrong routing or a wrong activation moves most elements far outside the tolerance.
Workloads may tune everything through the ``params`` of a ``generated`` ``routing_logits`` input.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

import torch

from ..generators import GenContext, generator
from ..input_counts import input_counter
from ..schema import GeneratedInput, SafetensorsInput, ScalarInput, SchemaError, Workload
from .common import quantize_fp8_blocks_1d, random_fp8_bytes

BLOCK = 128
MOE_DEFAULTS: dict[str, Any] = {
    "hot_local": 4,        # hot experts inside the local range
    "hot_global": 8,       # hot experts anywhere
    "hot_boost": 2.0,      # added to a hot expert's logits
    "group_boost": 0.5,    # added to the logits of a token's preferred groups
    "local_share": 0.6,    # probability that a token prefers the local experts' group
    "popularity_std": 0.5,  # per-expert spread of the base popularity
    "noise_std": 1.0,      # per-token noise on the logits
    "bias_std": 0.1,       # routing bias (e_score_correction_bias)
    # Leading tokens redrawn until they choose a local expert and the weights s + bias would give their
    # local experts differ from the true ones (from s) by this relative L2 amount at least. Their logits
    # are offset (a token with lower router scores overall, sigmoid ~0.5 instead of ~0.9), where a bias
    # of std 0.1 moves weights by tens of percent; the other tokens keep the default regime.
    "visible_bias_tokens": 1,
    "visible_bias_min": 0.2,
    "visible_logit_offset": -3.0,
    "act_std": 1.0,        # hidden activations before quantization
    "w13_std": 4.0,        # dequantized gemm1 weight std times sqrt(hidden_size)
    "w2_std": 8.0,         # dequantized gemm2 weight std times sqrt(intermediate_size)
}
# random_fp8_bytes has magnitudes in [0.5, 1.875]: its standard deviation, to turn a target std into a
# block scale.
_FP8_BITS_STD = 1.1588


def _params(workload: Workload | None) -> dict[str, Any]:
    p = dict(MOE_DEFAULTS)
    src = workload.inputs.get("routing_logits") if workload is not None else None
    if isinstance(src, GeneratedInput):
        unknown = set(src.params) - set(MOE_DEFAULTS)
        if unknown:
            raise SchemaError(f"routing_logits: unknown parameters {sorted(unknown)} (known: {sorted(MOE_DEFAULTS)})")
        p.update(src.params)
    return p


def _local_offset(workload: Workload | None, num_experts: int, num_local: int, gen: torch.Generator) -> int:
    src = workload.inputs.get("local_expert_offset") if workload is not None else None
    if isinstance(src, ScalarInput):
        off = int(src.value)
        if not 0 <= off <= num_experts - num_local:
            raise SchemaError(f"local_expert_offset {off} leaves the local range outside [0, {num_experts})")
        return off
    # EP ranks own consecutive slices of num_local experts.
    ranks = num_experts // num_local
    return int(torch.randint(0, ranks, (1,), generator=gen)) * num_local


def expert_popularity(num_experts: int, local_offset: int, num_local: int, gen: torch.Generator, p: dict[str, Any]) -> torch.Tensor:
    """Per-expert base logit: a spread plus a few hot experts, some inside the local range."""
    pop = torch.randn(num_experts, generator=gen) * float(p["popularity_std"])
    local = torch.randperm(num_local, generator=gen)[: int(p["hot_local"])] + local_offset
    anywhere = torch.randperm(num_experts, generator=gen)[: int(p["hot_global"])]
    pop[local] += float(p["hot_boost"])
    pop[anywhere] += float(p["hot_boost"])
    return pop


def token_logits(pop: torch.Tensor, seq_len: int, local_offset: int, num_local: int, gen: torch.Generator, p: dict[str, Any], local_share: float | None = None) -> torch.Tensor:
    """Logits of ``seq_len`` tokens = expert popularity + token-group affinity + per-token noise.

    Tokens prefer 3 to 5 of the 8 expert groups (topic-like clustering); the local experts' group
    is among them with probability ``local_share``, so about that share of tokens reaches this rank.
    """
    num_experts = pop.numel()
    n_group = 8
    per_group = num_experts // n_group
    n_pref = torch.randint(3, 6, (seq_len, 1), generator=gen)
    rank = torch.rand(seq_len, n_group, generator=gen).argsort(dim=1).argsort(dim=1)
    pref = rank < n_pref
    g_local = local_offset // per_group
    if num_local == per_group and local_offset % per_group == 0:
        share = float(p["local_share"] if local_share is None else local_share)
        pref[:, g_local] = torch.rand(seq_len, generator=gen) < share
    affinity = pref.float().repeat_interleave(per_group, dim=1) * float(p["group_boost"])
    return pop + affinity + torch.randn(seq_len, num_experts, generator=gen) * float(p["noise_std"])


def routing_logits(seq_len: int, num_experts: int, local_offset: int, num_local: int, gen: torch.Generator, p: dict[str, Any]) -> torch.Tensor:
    """Logits with realistic, uneven loads (:func:`expert_popularity` then :func:`token_logits`).

    A few hot experts (some local, some anywhere) are strong on their own, which makes a strong
    expert in a group whose second-best is weak: exactly where group routing changes the choice.
    """
    pop = expert_popularity(num_experts, local_offset, num_local, gen, p)
    return token_logits(pop, seq_len, local_offset, num_local, gen, p)


def bias_shift(logits: torch.Tensor, bias: torch.Tensor, route: Callable[..., Any], local_offset: int, num_local: int) -> torch.Tensor:
    """Per token: how far weights taken from ``s + bias`` would be from the true ones (from ``s``) on
    its local experts, as relative L2 over those experts (0 for a token with no local expert)."""
    experts, w = route(logits, bias, 1.0)
    s = torch.sigmoid(logits.float())
    wb = (s + bias.float().reshape(1, -1)).gather(1, experts)
    wb = wb / wb.sum(dim=1, keepdim=True)
    local = ((experts >= local_offset) & (experts < local_offset + num_local)).float()
    den = (w * local).norm(dim=1)
    return torch.where(den > 0, ((wb - w) * local).norm(dim=1) / den.clamp_min(1e-30), torch.zeros_like(den))


_VISIBLE_TRIES = 2000


def visible_bias_rows(logits: torch.Tensor, pop: torch.Tensor, bias: torch.Tensor, route: Callable[..., Any], local_offset: int, num_local: int,
                      gen: torch.Generator, p: dict[str, Any]) -> torch.Tensor:
    """Redraw the first ``visible_bias_tokens`` rows of ``logits`` (tokens that prefer the local group)
    until each reaches a local expert and its :func:`bias_shift` is at least ``visible_bias_min``."""
    n = min(int(p["visible_bias_tokens"]), logits.shape[0])
    want = float(p["visible_bias_min"])
    for i in range(n):
        for _ in range(_VISIBLE_TRIES):
            row = token_logits(pop + float(p["visible_logit_offset"]), 1, local_offset, num_local, gen, p, local_share=1.0)
            if float(bias_shift(row, bias, route, local_offset, num_local)[0]) >= want:
                logits[i] = row[0]
                break
        else:
            raise SchemaError(f"no token in {_VISIBLE_TRIES} draws reached the local experts with a bias shift >= {want}: lower visible_bias_min")
    return logits


def quantized_weights(n_exp: int, rows: int, cols: int, std: float, gen: torch.Generator, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """FP8 weights ``[n_exp, rows, cols]`` (made on ``device``) and per-128x128-block scales giving a
    dequantized ``std``."""
    if rows % BLOCK or cols % BLOCK:
        raise SchemaError(f"weight shape {rows}x{cols} is not a multiple of {BLOCK}")
    w = random_fp8_bytes(n_exp * rows * cols, gen, device).reshape(n_exp, rows, cols)
    # Block scales vary by a factor of ~3 around the target, so a solution that applies the wrong
    # block's scale is visibly wrong.
    jitter = torch.exp((torch.rand(n_exp, rows // BLOCK, cols // BLOCK, generator=gen) - 0.5) * 1.2)
    return w, (jitter * (std / _FP8_BITS_STD)).float()


# What decides which local experts a call must read: drawn first by :func:`build`, so they can be made
# alone (``only``) with the values a full build gives them.
ROUTING_INPUTS = ("routing_logits", "routing_bias", "local_expert_offset")


def build(axes: dict[str, int], gen: torch.Generator, device: torch.device, workload: Workload | None = None, definition: Any = None,
          route: Callable[..., Any] | None = None, only: frozenset[str] | None = None) -> dict[str, Any]:
    """All inputs of one trial. ``route`` is the definition's routing (``reference.py::route``); it is
    needed when ``visible_bias_tokens`` > 0 (the default) to check the redrawn leading tokens.
    ``only`` within :data:`ROUTING_INPUTS`: the routing alone (drawn first, so the same values)."""
    T = axes["seq_len"]
    E, EL = axes["num_experts"], axes["num_local_experts"]
    H, I = axes["hidden_size"], axes["intermediate_size"]
    G1 = axes["gemm1_out_size"]
    if G1 != 2 * I:
        raise SchemaError(f"gemm1_out_size {G1} must be 2 * intermediate_size {I}")
    if H % BLOCK or I % BLOCK:
        raise SchemaError(f"hidden_size {H} and intermediate_size {I} must be multiples of {BLOCK}")
    p = _params(workload)
    off = _local_offset(workload, E, EL, gen)

    bias = (torch.randn(E, generator=gen) * float(p["bias_std"])).to(torch.bfloat16)
    pop = expert_popularity(E, off, EL, gen, p)
    logits = token_logits(pop, T, off, EL, gen, p)
    if int(p["visible_bias_tokens"]) > 0 and T > 0:
        if route is None:
            raise SchemaError("visible_bias_tokens needs the definition's routing function (pass route=)")
        logits = visible_bias_rows(logits, pop, bias, route, off, EL, gen, p)
    if only is not None and set(only) <= set(ROUTING_INPUTS):
        routing = {"routing_logits": logits.float().to(device), "routing_bias": bias.to(device), "local_expert_offset": off}
        return {k: v for k, v in routing.items() if k in only}

    # Per-token loudness varies (some tokens have much larger activations), as in real hidden states.
    # Drawn on the CPU, quantized on the device (exactly rounded arithmetic: same bytes everywhere).
    loud = torch.exp(torch.randn(T, 1, generator=gen) * 0.5) * float(p["act_std"])
    act = torch.randn(T, H, generator=gen).to(device) * loud.to(device)
    hs, hs_scale = quantize_fp8_blocks_1d(act, BLOCK)  # [T, H], [T, H/128]

    w13, s13 = quantized_weights(EL, G1, H, float(p["w13_std"]) / math.sqrt(H), gen, device)
    w2, s2 = quantized_weights(EL, H, I, float(p["w2_std"]) / math.sqrt(I), gen, device)

    out = {
        "routing_logits": logits.float(),
        "routing_bias": bias,
        "hidden_states": hs,
        "hidden_states_scale": hs_scale.t().contiguous(),
        "gemm1_weights": w13,
        "gemm1_weights_scale": s13,
        "gemm2_weights": w2,
        "gemm2_weights_scale": s2,
        "local_expert_offset": off,
        "routed_scaling_factor": 2.5,
    }
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in out.items()}


@input_counter("moe_local_routing", reads=ROUTING_INPUTS)
def local_routing_counts(inputs: dict[str, Any], axes: dict[str, int], config: Any) -> dict[str, float]:
    """What the routing makes a call move on this rank (skills/roofline/moe.yaml's names): the local
    (token, expert) pairs, the tokens with at least one local expert, the local experts reached. The
    routing is the definition's own (``route`` beside its reference function)."""
    from ..trusted_fn import load_trusted_fn

    if not config.reference_fn:
        raise SchemaError("counting the local routing needs the definition's reference.py (reference_fn) and its route()")
    route = load_trusted_fn(config.reference_fn.partition("::")[0] + "::route", config.root)
    experts, _ = route(inputs["routing_logits"], inputs["routing_bias"], 1.0)
    off, n_local = int(inputs["local_expert_offset"]), axes["num_local_experts"]
    local = (experts >= off) & (experts < off + n_local)
    return {"local_pairs": float(local.sum()), "local_tokens": float(local.any(dim=1).sum()),
            "local_experts": float(torch.unique(experts[local]).numel())}


@generator("moe_routing_logits")
def gen_routing_logits(ctx: GenContext, local_offset: int | None = None, **params: Any) -> torch.Tensor:
    """Standalone routing logits (the builder normally makes them together with the offset)."""
    unknown = set(params) - set(MOE_DEFAULTS)
    if unknown:
        raise SchemaError(f"{ctx.name}: unknown parameters {sorted(unknown)}")
    p = {**MOE_DEFAULTS, **params}
    E, EL = ctx.axes["num_experts"], ctx.axes["num_local_experts"]
    off = local_offset if local_offset is not None else int(torch.randint(0, E // EL, (1,), generator=ctx.gen)) * EL
    return routing_logits(ctx.axes["seq_len"], E, off, EL, ctx.gen, p).to(ctx.device, ctx.dtype)


@generator("moe_routing_bias")
def gen_routing_bias(ctx: GenContext, bias_std: float = MOE_DEFAULTS["bias_std"]) -> torch.Tensor:
    return (torch.randn(ctx.shape, generator=ctx.gen) * bias_std).to(ctx.device, ctx.dtype)


# ------------------------------------------------------------------------------ official workloads


def official_workloads(path: str | Path, dataset_root: str | Path | None = None) -> list[Workload]:
    """The official MoE workloads (their axes and scalars), read in place from ``path``.

    Their ``routing_logits`` / ``routing_bias`` come from safetensors blobs that are not shipped with
    the definitions. Where a blob is missing under ``dataset_root`` the input is replaced by our
    generator (``generated`` ``routing_logits``; the bias comes from the same builder), so the axes and
    local offsets are the official ones but the routing data is synthetic. The substitution is
    recorded in the workload's ``kbot_substituted`` field.
    """
    out = []
    root = Path(dataset_root) if dataset_root else None
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        data = json.loads(line)
        w = Workload.model_validate(data["workload"] if "workload" in data else data)
        inputs = dict(w.inputs)
        replaced = []
        for name, spec in w.inputs.items():
            if isinstance(spec, SafetensorsInput):
                blob = (root / spec.path) if root else None
                if blob is None or not blob.is_file():
                    replaced.append(name)
                    inputs[name] = GeneratedInput(type="generated", generator="moe_routing_logits" if name == "routing_logits" else "moe_routing_bias")
        w2 = Workload(uuid=w.uuid, axes=dict(w.axes), inputs=inputs)
        if replaced:
            w2.kbot_substituted = sorted(replaced)  # type: ignore[attr-defined]
        out.append(w2)
    return out

