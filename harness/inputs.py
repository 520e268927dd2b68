"""Input generation: seeded, fresh for every trial, dtype-aware, with structured generators.

Every input of a workload is one of:

- ``random``: values drawn for the tensor's dtype (normal for floats, cast for fp8; integer tensors
  must name a structured generator in the definition's sidecar, because random integers over a dtype
  range are never valid indices),
- ``scalar``: the literal value,
- ``safetensors``: a tensor read from a file *relative to the dataset root* (paths may not escape it),
- ``generated`` (ours): a named generator from ``harness.generators.GENERATORS`` with parameters.

Structured inputs that depend on each other (sequence lengths, then a page table pointing at real
pages, then indices into it) come from a definition's ``builder`` function, which receives the axes,
a seeded ``torch.Generator`` and the inputs made so far, and returns the tensors it is responsible for.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import torch

from . import operators
from .defconfig import DefinitionConfig
from .dtypes import torch_dtype
from .generators import GENERATORS, GenContext, random_float
from .schema import Definition, GeneratedInput, RandomInput, SafetensorsInput, ScalarInput, SchemaError, Workload
from .trusted_fn import load_trusted_fn

# Every place that makes inputs (worker, profiler driver, tests) knows the contest operators' generators
# and comparators.
operators.register_all()



# The trial number whose inputs the worker times a workload on (correctness trials are 0, 1, ...): the
# parent rebuilds the same inputs from it to count what a call must move (harness/input_counts.py).
TIMED_TRIAL = 10_000


def seed_for(base_seed: int, workload_uuid: str, trial: int, stream: str = "inputs") -> int:
    """A distinct, reproducible seed per (run seed, workload, trial)."""
    import hashlib

    h = hashlib.sha256(f"{base_seed}:{workload_uuid}:{trial}:{stream}".encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


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
    only: frozenset[str] | None = None,
) -> dict[str, Any]:
    """All inputs of one trial, in definition order, as keyword arguments for ``run``.

    ``only``: just these inputs, with the values a full build gives them (the builder gets ``only=``
    when it takes it). An input made here after one that is left out but would have drawn from the
    same random stream cannot be made alone: SchemaError."""
    device = torch.device(device)
    config = config or DefinitionConfig()
    axes = definition.resolve_axes(workload.axes)
    gen = torch.Generator().manual_seed(seed)
    dgen = torch.Generator(device=device).manual_seed(seed) if device.type != "cpu" else gen
    made: dict[str, Any] = {}

    built: dict[str, Any] = {}
    if config.builder:
        fn = load_trusted_fn(config.builder, config.root)
        kw = {"only": only} if only is not None and "only" in inspect.signature(fn).parameters else {}
        built = fn(axes=axes, gen=gen, device=device, workload=workload, definition=definition, **kw) or {}
        unknown = set(built) - set(definition.inputs)
        if unknown:
            raise SchemaError(f"builder {config.builder} returned unknown inputs {sorted(unknown)}")

    skipped_draw = ""  # an input left out (``only``) that may have drawn from the random stream
    for name, spec in definition.inputs.items():
        shape = definition.shape_of(spec, axes)
        src = workload.inputs.get(name, RandomInput())
        if only is not None and name not in only:
            if not isinstance(src, (ScalarInput, SafetensorsInput)):
                skipped_draw = skipped_draw or name
            continue
        if only is not None and skipped_draw and name not in built and not isinstance(src, (ScalarInput, SafetensorsInput)):
            raise SchemaError(f"{name} cannot be made alone: {skipped_draw}, left out, may draw from the same random stream before it")
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
            made[name] = random_float(shape, torch_dtype(spec.dtype), dgen, device)
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

