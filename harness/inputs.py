"""Input generation: seeded, fresh for every trial, dtype-aware, with structured generators.

Every input of a workload is one of:

- ``random``: values drawn for the tensor's dtype (normal for floats, cast for fp8; integer tensors
  must name a structured generator in the definition's sidecar, because random integers over a dtype
  range are never valid indices),
- ``scalar``: the literal value,
- ``safetensors``: a tensor read from a file *relative to the dataset root* (paths may not escape it),
- ``generated`` (ours): a named generator from ``GENERATORS`` with parameters.

Structured inputs that depend on each other (sequence lengths, then a page table pointing at real
pages, then indices into it) come from a definition's ``builder`` function, which receives the axes,
a seeded ``torch.Generator`` and the inputs made so far, and returns the tensors it is responsible for.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from .defconfig import DefinitionConfig
from .registry import registrar
from .schema import ABSENT, Definition, GeneratedInput, RandomInput, SafetensorsInput, ScalarInput, SchemaError, TensorSpec, Workload

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
FLOAT8 = {"float8_e4m3fn", "float8_e5m2"}


def torch_dtype(name: str) -> torch.dtype:
    try:
        return TORCH_DTYPES[name]
    except KeyError:
        raise SchemaError(f"dtype '{name}' is not supported by this harness yet") from None


def dtype_size(name: str) -> float:
    """Bytes per element (float4 packs two per byte)."""
    if name == "float4_e2m1":
        return 0.5
    return torch.tensor([], dtype=torch_dtype(name)).element_size()


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


def _rand_float(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator, device: torch.device, std: float = 1.0, mean: float = 0.0) -> torch.Tensor:
    # Drawn on the generator's own device: bulk inputs (hundreds of MB) are made on the GPU in
    # microseconds instead of seconds on the host. Values are reproducible per (seed, device).
    x = torch.randn(shape, generator=gen, dtype=torch.float32, device=gen.device) * std + mean
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        lim = torch.finfo(dtype).max
        x = x.clamp(-lim, lim)
    return x.to(device=device, dtype=dtype)


@generator("normal")
def gen_normal(ctx: GenContext, std: float = 1.0, mean: float = 0.0) -> torch.Tensor:
    return _rand_float(ctx.shape or (), ctx.dtype, ctx.dgen or ctx.gen, ctx.device, std=std, mean=mean)


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


# ----------------------------------------------------------------------------------------- driver


def seed_for(base_seed: int, workload_uuid: str, trial: int, stream: str = "inputs") -> int:
    """A distinct, reproducible seed per (run seed, workload, trial)."""
    import hashlib

    h = hashlib.sha256(f"{base_seed}:{workload_uuid}:{trial}:{stream}".encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


def _load_trusted_fn(spec: str, root: Path | None) -> Callable[..., Any]:
    """Load ``file.py::fn`` from a definition's own folder (trusted: it ships with our definitions)."""
    if root is None:
        raise SchemaError(f"'{spec}' needs the definition's folder, which is unknown")
    file, _, fn = spec.partition("::")
    path = (root / file).resolve()
    if root.resolve() not in path.parents:
        raise SchemaError(f"'{spec}' points outside the definition folder")
    modname = f"kbot_def_{abs(hash(str(path)))}"
    mspec = importlib.util.spec_from_file_location(modname, path)
    if mspec is None or mspec.loader is None:
        raise SchemaError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(mspec)
    mspec.loader.exec_module(mod)
    try:
        return getattr(mod, fn)
    except AttributeError:
        raise SchemaError(f"{path} has no function '{fn}'") from None


def _safetensor(spec: SafetensorsInput, dataset_root: Path | None, device: torch.device) -> torch.Tensor:
    if dataset_root is None:
        raise SchemaError(f"input from '{spec.path}' needs a dataset root (--dataset-root)")
    root = Path(dataset_root).resolve()
    path = (root / spec.path).resolve()
    if root != path and root not in path.parents:
        raise SchemaError(f"safetensors path '{spec.path}' escapes the dataset root {root}")
    if not path.is_file():
        raise SchemaError(f"safetensors file not found: {path}")
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        if spec.tensor_key not in f.keys():
            raise SchemaError(f"{path} has no tensor '{spec.tensor_key}' (has {sorted(f.keys())[:10]})")
        return f.get_tensor(spec.tensor_key).to(device)


def make_inputs(
    definition: Definition,
    workload: Workload,
    *,
    seed: int,
    device: torch.device | str = "cpu",
    config: DefinitionConfig | None = None,
    dataset_root: Path | None = None,
) -> dict[str, Any]:
    """All inputs of one trial, in definition order, as keyword arguments for ``run``."""
    device = torch.device(device)
    config = config or DefinitionConfig()
    axes = definition.resolve_axes(workload.axes)
    gen = torch.Generator().manual_seed(seed)
    dgen = torch.Generator(device=device).manual_seed(seed) if device.type != "cpu" else gen
    made: dict[str, Any] = {}

    built: dict[str, Any] = {}
    if config.builder:
        fn = _load_trusted_fn(config.builder, config.root)
        built = fn(axes=axes, gen=gen, device=device, workload=workload, definition=definition) or {}
        unknown = set(built) - set(definition.inputs)
        if unknown:
            raise SchemaError(f"builder {config.builder} returned unknown inputs {sorted(unknown)}")

    for name, spec in definition.inputs.items():
        shape = definition.shape_of(spec, axes)
        src = workload.inputs.get(name, RandomInput())
        if isinstance(src, ScalarInput):
            made[name] = src.value
            continue
        if isinstance(src, SafetensorsInput):
            t = _safetensor(src, dataset_root, device)
            if shape is not None and tuple(t.shape) != shape:
                raise SchemaError(f"{name}: file tensor has shape {tuple(t.shape)}, definition says {shape}")
            made[name] = t.to(torch_dtype(spec.dtype))
            continue
        if name in built:
            made[name] = built[name]
            continue
        ref = config.inputs.get(name)
        if isinstance(src, GeneratedInput):
            ref_name, params = src.generator, src.params
        elif ref is not None:
            ref_name, params = ref.generator, ref.params
        else:
            ref_name, params = None, {}
        ctx = GenContext(name=name, spec=spec, shape=shape, axes=axes, gen=gen, device=device, made=made, dgen=dgen)
        if ref_name is not None:
            if ref_name not in GENERATORS:
                raise SchemaError(f"{name}: unknown generator '{ref_name}' (known: {sorted(GENERATORS)})")
            made[name] = GENERATORS[ref_name](ctx, **params)
        elif shape is None:
            made[name] = float(torch.rand((), generator=gen)) if spec.dtype.startswith("float") else int(torch.randint(0, 2, (), generator=gen))
        elif spec.dtype == "bool":
            made[name] = torch.randint(0, 2, shape, generator=gen).to(device=device, dtype=torch.bool)
        elif spec.dtype.startswith(("int", "uint")):
            raise SchemaError(
                f"{definition.name}: integer input '{name}' is marked random; random integers are never valid "
                f"indices — give it a generator in definitions/{definition.name}/kbot.yaml"
            )
        else:
            made[name] = _rand_float(shape, torch_dtype(spec.dtype), dgen, device)
    return made


POISON_FLOAT = float("nan")


def allocate_outputs(definition: Definition, axes: dict[str, int], device: torch.device | str) -> dict[str, torch.Tensor]:
    """Output buffers for destination-passing calls, poisoned so a kernel that skips work is caught."""
    out = {}
    for name, spec in definition.outputs.items():
        shape = definition.shape_of(spec, axes)
        if shape is None:
            raise SchemaError(f"output '{name}' is a scalar; destination-passing style needs tensor outputs")
        dt = torch_dtype(spec.dtype)
        t = torch.empty(shape, dtype=dt, device=device)
        poison(t)
        out[name] = t
    return out


def poison(t: torch.Tensor) -> None:
    if t.dtype.is_floating_point:
        if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            t.view(torch.uint8).fill_(0x7F)  # NaN in e4m3fn, and NaN in e5m2
        else:
            t.fill_(POISON_FLOAT)
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(torch.iinfo(t.dtype).max)


def clone_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}

# The contest operators register their structured generators and comparators on import; importing them
# here means every place that makes inputs (worker, profiler driver, tests) knows them.
from . import operators as _operators  # noqa: E402,F401
