"""Roofline model: minimum bytes, FLOPs, floor time and bottleneck class for one workload.

The floor is ``launch + max(bytes / bandwidth, flops / peak)``: the device's launch floor (the least
time an empty call takes as the harness times it, ``Ceilings.launch_floor``: measured once per runner
by ``kbot ceilings``, documented for the H200) plus the time the work needs at the bandwidth or at the
compute rate the algorithm can use. The rate is the spec's ``compute``: ``tensor`` (the tensor-core
matmul peak of ``compute_dtype``: matmuls, attention, MoE GEMMs) or ``simt`` (the fp32 CUDA-core peak:
norms, element-wise, scans); a variant or a definition entry may say otherwise for one definition.
The bound class is the largest of the three terms (``launch``, ``memory``, ``compute``), or
``latency`` when the measured time is 20x the floor or more (neither bandwidth nor math used). The
guard's impossibility checks use the work floor alone (``work_floor_ms``), so a launch floor read on a
slow day never rejects a kernel.

Defaults come from the definition alone: bytes = every input and output tensor read or written once
(fp8 = 1 byte, float4 = 0.5), FLOPs = one per output element on the CUDA cores. Where that is wrong
(matmuls, attention, norms, paged caches that are larger than what a call touches...) a formula in
``skills/roofline/<op_type>.yaml`` replaces it. Formulas are small arithmetic expressions over axis
names and a few derived values, evaluated by :mod:`harness.feedback.expr` (no ``eval``).

Spec file layout (all keys optional except ``op_type``)::

    op_type: gemm
    compute: tensor            # tensor (tensor-core peak of compute_dtype) | simt (fp32 CUDA-core peak)
    compute_dtype: auto        # auto = the floating dtype with the most input bytes
    flops: "2 * M * N * K"
    bytes: default             # or an expression
    variants:                  # by definition name (fnmatch pattern); first match wins, keys override
      - match: "fused_add_rmsnorm_*"
        flops: "5 * batch_size * hidden_size"
    definitions:               # by exact definition name; applied last
      gemm_n128_k2048: {note: "..."}

Names available to an expression: every axis; ``bytes_<tensor>`` and ``numel_<tensor>`` for each input
and output; ``input_bytes``, ``output_bytes``, ``default_bytes``, ``output_elements``.

Where what a call must move depends on an input's values (MoE: which experts the routing reaches), the
floor is a lower bound only when it is counted from the inputs the call was timed on. A spec then names
a counter and the least value each of its counts can take whatever the inputs are::

    from_inputs:
      counter: moe_local_routing           # registered in harness/input_counts.py's table
      lower_bounds: {local_pairs: 0, local_experts: 0}

The counts become names of the formulas. A caller with the timed inputs' counts
(:func:`harness.timed_counts.timed_input_counts`) passes them as ``given``; without them the lower
bounds stand in, so the floor stays a true lower bound (and may be small: the report says which).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import yaml

from .ceilings import Ceilings, peak_key_for_dtype
from .feedback.expr import ExprError, compile_expr
from .paths import shipped, skill
from .report import Roofline
from .schema import Definition

__all__ = [
    "DTYPE_BYTES",
    "LATENCY_FLOOR_MS",
    "LATENCY_FRACTION",
    "RooflineSpec",
    "counts",
    "given_counts",
    "input_counts",
    "physical_floor_ms",
    "load_spec",
    "roofline",
    "workload_roofline",
]

SPEC_DIR = shipped() / "skills" / "roofline"  # ours; a repository's skills/roofline/<op_type>.yaml replaces one

DTYPE_BYTES: dict[str, float] = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
    "float4_e2m1": 0.5, "int64": 8, "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
}
# Below ~5 us a launch (3-10 us of host + driver work per call) costs as much as the data movement:
# such a workload is latency-bound whatever its intensity says.
LATENCY_FLOOR_MS = 0.005
# A kernel 20x slower than its floor uses neither bandwidth nor math well: latency-bound in ncu's sense.
LATENCY_FRACTION = 0.05

_FLOAT = ("float", "bfloat")


@dataclass
class RooflineSpec:
    op_type: str
    flops: str | None = None
    bytes: str | None = None
    compute: str = "simt"
    compute_dtype: str = "auto"
    note: str = ""
    source: str = "default"  # which file / variant the formulas came from
    counter: str | None = None  # from_inputs.counter: what counts the inputs' values (None: axes decide)
    lower_bounds: dict[str, float] = field(default_factory=dict)  # from_inputs.lower_bounds: count -> least value

    def merged(self, over: dict[str, Any], source: str) -> "RooflineSpec":
        keys = {"flops", "bytes", "compute", "compute_dtype", "note", "from_inputs"}
        unknown = set(over) - keys - {"match"}
        if unknown:
            raise ValueError(f"{source}: unknown roofline keys {sorted(unknown)} (allowed: {sorted(keys)})")
        data = {k: over[k] for k in keys - {"from_inputs"} if k in over}
        if "from_inputs" in over:
            data.update(_from_inputs(over["from_inputs"], source))
        return RooflineSpec(**{**self.__dict__, **data, "source": source})


def _from_inputs(v: Any, source: str) -> dict[str, Any]:
    """``from_inputs`` of a spec: a counter's name and the least value of each count (None: no counter)."""
    if v is None:
        return {"counter": None, "lower_bounds": {}}
    if not isinstance(v, dict) or set(v) != {"counter", "lower_bounds"} or not isinstance(v["counter"], str) \
            or not isinstance(v["lower_bounds"], dict) or not v["lower_bounds"]:
        raise ValueError(f"{source}: from_inputs must be {{counter: NAME, lower_bounds: {{COUNT: NUMBER, ...}}}}")
    bounds = {}
    for k, b in v["lower_bounds"].items():
        if not (isinstance(k, str) and k.isidentifier()) or isinstance(b, bool) or not isinstance(b, (int, float)) or not b >= 0:
            raise ValueError(f"{source}: from_inputs.lower_bounds: {k!r}: {b!r} is not a count name with a non-negative number")
        bounds[k] = float(b)
    return {"counter": v["counter"], "lower_bounds": bounds}


@dataclass
class _SpecFile:
    base: RooflineSpec
    variants: list[dict[str, Any]] = field(default_factory=list)
    definitions: dict[str, dict[str, Any]] = field(default_factory=dict)


def _read_spec_file(path: str) -> _SpecFile | None:
    p = Path(path)
    if not p.is_file():
        return None
    st = p.stat()
    return _parse_spec_file(path, st.st_mtime_ns, st.st_size)  # re-read when the file changes


@lru_cache(maxsize=64)
def _parse_spec_file(path: str, _mtime: int, _size: int) -> _SpecFile:
    p = Path(path)
    data = yaml.safe_load(p.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{p}: must be a mapping")
    variants = data.pop("variants", []) or []
    definitions = data.pop("definitions", {}) or {}
    if data.get("compute", "simt") not in ("simt", "tensor"):
        raise ValueError(f"{p}: compute must be 'simt' or 'tensor'")
    base = RooflineSpec(op_type=str(data.pop("op_type", p.stem)), source=p.name).merged(data, p.name)
    # Check every formula now so a typo fails loudly at load, not silently at report time.
    for where, d in [("", data), *[(f" variant {v.get('match')}", v) for v in variants],
                     *[(f" definition {k}", v) for k, v in definitions.items()]]:
        for key in ("flops", "bytes"):
            if isinstance(d.get(key), str) and d[key] != "default":
                try:
                    compile_expr(d[key])
                except ExprError as e:
                    raise ExprError(f"{p}{where}: {key}: {e}") from None
        if "from_inputs" in d:
            _from_inputs(d["from_inputs"], f"{p}{where}")
    for v in variants:
        if "match" not in v:
            raise ValueError(f"{p}: every variant needs a 'match' pattern")
    return _SpecFile(base=base, variants=list(variants), definitions=dict(definitions))


def load_spec(definition: Definition, spec_dir: Path | str | None = None) -> RooflineSpec:
    """The formulas for a definition: op_type file, then name variant, then exact-name override."""
    name = f"{definition.op_type}.yaml"
    sf = _read_spec_file(str(Path(spec_dir) / name if spec_dir else skill(f"roofline/{name}")))
    if sf is None:
        return RooflineSpec(op_type=definition.op_type, source="default (no skills/roofline file)")
    spec = sf.base
    for v in sf.variants:
        if fnmatch.fnmatchcase(definition.name, v["match"]):
            spec = spec.merged(v, f"{sf.base.source} variant {v['match']}")
            break
    if definition.name in sf.definitions:
        spec = spec.merged(sf.definitions[definition.name], f"{sf.base.source} definition {definition.name}")
    return spec


def _env(definition: Definition, axes: dict[str, int], absent: frozenset[str] = frozenset()) -> tuple[dict[str, Any], dict[str, float]]:
    env: dict[str, Any] = dict(axes)
    in_bytes = out_bytes = 0.0
    out_elems = 0
    by_dtype: dict[str, float] = {}
    for group in ("inputs", "outputs"):
        for name, spec in getattr(definition, group).items():
            shape = definition.shape_of(spec, axes)
            numel = 1
            for s in shape or ():
                numel *= s
            # A python scalar (shape null) travels as a kernel argument, not through memory.
            # An optional input the workload leaves out (None) moves nothing.
            nbytes = numel * DTYPE_BYTES[spec.dtype] if shape is not None and name not in absent else 0.0
            env[f"numel_{name}"] = numel
            env[f"bytes_{name}"] = nbytes
            if group == "inputs":
                in_bytes += nbytes
                if spec.dtype.startswith(_FLOAT) and shape:
                    by_dtype[spec.dtype] = by_dtype.get(spec.dtype, 0.0) + nbytes
            else:
                out_bytes += nbytes
                out_elems += numel
    env.update(input_bytes=in_bytes, output_bytes=out_bytes, default_bytes=in_bytes + out_bytes,
               output_elements=out_elems)
    return env, by_dtype


def counts(definition: Definition, axes: dict[str, int], spec_dir: Path | str | None = None,
           absent: frozenset[str] = frozenset(), given: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Bytes, FLOPs and the peak key for one workload (axes already resolved; ``absent``: optional
    inputs the workload leaves out; ``given``: the spec's input counts for the timed inputs, else its
    lower bounds stand in)."""
    spec = load_spec(definition, spec_dir)
    env, by_dtype = _env(definition, axes, absent)
    used = input_counts(spec, given)
    env.update(used)

    def ev(kind: str, text: str | None, default: float) -> float:
        if text is None or text == "default":
            return float(default)
        try:
            v = compile_expr(text)(env)
        except ExprError as e:
            raise ValueError(f"roofline {kind} formula of {definition.name} ({spec.source}): {e}") from None
        if not isinstance(v, (int, float)) or v < 0:
            raise ValueError(f"roofline {kind} formula of {definition.name} gave {v!r}, not a non-negative number")
        return float(v)

    nbytes = ev("bytes", spec.bytes, env["default_bytes"])
    flops = ev("flops", spec.flops, env["output_elements"])
    if spec.compute == "tensor":
        dtype = spec.compute_dtype
        if dtype == "auto":
            dtype = max(by_dtype.items(), key=lambda kv: kv[1])[0] if by_dtype else "float32"
        peak_key = peak_key_for_dtype(dtype)
    else:
        peak_key = "fp32"
    return {"bytes": nbytes, "flops": flops, "peak_key": peak_key, "compute": spec.compute, "spec": spec.source,
            "note": spec.note, "input_counts": used,
            "input_counts_from": None if spec.counter is None else (COUNTED if given is not None else
                                                                   "lower bounds (the timed inputs were not counted)")}


def physical_floor_ms(roof: Roofline | None) -> float | None:
    """The floor of the work alone (no launch term): below it a time is impossible. Reports written
    before the launch term existed have only ``floor_ms``, which was this."""
    if roof is None:
        return None
    work = (roof.model_extra or {}).get("work_floor_ms")
    return float(work) if isinstance(work, (int, float)) else roof.floor_ms


COUNTED = "the timed inputs"  # a roofline's input_counts_from when its counts are the timed inputs' own


def given_counts(roof: Roofline | None) -> dict[str, float] | None:
    """The input counts a report's roofline was placed with, when they were counted from the timed
    inputs (so a later pass over the report, e.g. the profiler's, keeps the same floor)."""
    if roof is None or getattr(roof, "input_counts_from", None) != COUNTED:
        return None
    got = getattr(roof, "input_counts", None)
    return dict(got) if isinstance(got, dict) else None


def input_counts(spec: RooflineSpec, given: Mapping[str, float] | None) -> dict[str, float]:
    """The values of the spec's input counts: ``given`` (counted from the timed inputs) or the lower
    bounds. A given count below its lower bound, missing or unknown is an error: the floor must stay
    a lower bound, and a count the formulas never declared is a typo."""
    if given is None:
        return dict(spec.lower_bounds)
    if spec.counter is None:
        raise ValueError(f"{spec.source}: input counts were given but the spec counts nothing from the inputs")
    if set(given) != set(spec.lower_bounds):
        raise ValueError(f"{spec.source}: counter {spec.counter} gave {sorted(given)}, the spec declares {sorted(spec.lower_bounds)}")
    out = {}
    for k, v in given.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= spec.lower_bounds[k] or v != v or v == float("inf"):
            raise ValueError(f"{spec.source}: count {k} = {v!r} is not a number >= its lower bound {spec.lower_bounds[k]}")
        out[k] = float(v)
    return out


def roofline(
    definition: Definition,
    axes: dict[str, int],
    ceilings: Ceilings,
    measured_ms: float | None = None,
    *,
    spec_dir: Path | str | None = None,
    latency_floor_ms: float = LATENCY_FLOOR_MS,
    latency_fraction: float = LATENCY_FRACTION,
    absent: frozenset[str] = frozenset(),
    given: Mapping[str, float] | None = None,
    launch: bool = True,
) -> Roofline:
    """The report's Roofline for one workload; ``axes`` as from ``definition.resolve_axes(...)``;
    ``absent``: the optional inputs the workload leaves out (``Workload.absent_inputs()``); ``given``:
    the spec's input counts for the timed inputs (:mod:`harness.input_counts`); ``launch``: add the
    device's launch floor (True for a time measured as the harness does, between events or host
    clock reads; False for a GPU-side kernel duration such as ncu's, which has no launch in it)."""
    c = counts(definition, axes, spec_dir, absent, given)
    bw = ceilings.bandwidth_bytes_per_s
    peak, peak_used = ceilings.peak_flops(c["peak_key"])
    mem_ms = c["bytes"] / bw * 1e3
    comp_ms = c["flops"] / peak * 1e3
    work_ms = max(mem_ms, comp_ms)
    launch_ms, launch_source = ceilings.launch_floor() if launch else (None, "not added: a GPU-side kernel duration has no launch in it")
    floor_ms = work_ms + (launch_ms or 0.0)
    intrinsic = "compute" if comp_ms > mem_ms else "memory"
    fraction = None
    mem_frac = comp_frac = None
    if measured_ms is not None:
        if measured_ms <= 0:
            raise ValueError(f"measured time must be positive, got {measured_ms}")
        fraction = floor_ms / measured_ms
        mem_frac, comp_frac = mem_ms / measured_ms, comp_ms / measured_ms
    bound: str = intrinsic
    why = f"{intrinsic}-bound by intensity"
    if launch_ms is not None and launch_ms >= work_ms:
        bound, why = "launch", (f"launch floor {launch_ms * 1e3:.2f} us >= the work's {work_ms * 1e3:.2f} us "
                                f"({'memory' if intrinsic == 'memory' else 'compute'}): launching dominates")
    elif launch_ms is None and work_ms < latency_floor_ms:
        # No launch floor for this device: the fixed threshold stands in for it.
        bound, why = "launch", f"floor {work_ms * 1e3:.2f} us < {latency_floor_ms * 1e3:.0f} us: launch overhead dominates"
    if fraction is not None and fraction < latency_fraction:
        bound = "latency"
        why = (f"measured {measured_ms * 1e3:.1f} us is {1 / fraction:.0f}x the floor; memory ({mem_frac:.1%}) and "
               f"compute ({comp_frac:.1%}) fractions both low")
    return Roofline(
        bytes=c["bytes"],
        flops=c["flops"],
        intensity=c["flops"] / c["bytes"] if c["bytes"] else float("inf"),
        floor_ms=floor_ms,
        fraction=fraction,
        bound=bound,
        ceilings={**ceilings.to_report(), "peak_used": peak_used},
        # Extras (Roofline allows them): the two floors, the class by intensity alone, and why.
        memory_floor_ms=mem_ms,
        compute_floor_ms=comp_ms,
        work_floor_ms=work_ms,  # max(memory, compute): what the guard's impossibility checks use
        launch_floor_ms=launch_ms,
        launch_floor_source=launch_source,
        memory_fraction=mem_frac,
        compute_fraction=comp_frac,
        intrinsic_bound=intrinsic,
        compute_unit=c["compute"],  # "tensor": the op belongs on tensor cores; "simt": CUDA cores
        bound_reason=why,
        formula_source=c["spec"],
        **({"input_counts": c["input_counts"], "input_counts_from": c["input_counts_from"]} if c["input_counts_from"] else {}),
    )


def workload_roofline(definition: Definition, axes: dict[str, int], measured_ms: float | None, *,
                      device: str = "cuda", gpu_name: str | None = None, absent: frozenset[str] = frozenset()) -> Roofline | None:
    """The roofline a report carries for one workload, with this runner's ceilings.

    CUDA: the cached measurement for ``gpu_name`` (default: the current GPU), else documented defaults,
    else None (say so in the report rather than invent a floor). CPU: a rough entry measured once.
    """
    from .ceilings import ceilings_for, load_ceilings

    if device == "cpu":
        c = ceilings_for("cpu")
    else:
        if gpu_name is None:
            import torch

            if not torch.cuda.is_available():
                return None
            gpu_name = torch.cuda.get_device_name()
        c = load_ceilings(gpu_name)
        if c is None:
            return None
    return roofline(definition, axes, c, measured_ms if measured_ms and measured_ms > 0 else None, absent=absent)
