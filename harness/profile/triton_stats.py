"""Triton compile statistics for sm_90, obtained ahead of time on a machine without a GPU.

``triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", 90, 32))``
runs the whole pipeline to a cubin without touching a device. From the result we read the metadata
(warps, stages, shared memory), the per-function resource usage of the cubin (registers, stack, local
memory) through ``cuobjdump --dump-resource-usage``, spill bytes through ``ptxas --verbose`` on the PTX,
and SASS facts (see :mod:`harness.profile.sass`).

The signature maps each kernel parameter to a Triton type string ("*fp32", "i32", "constexpr"...). It
can be given explicitly, or inferred: a parameter named like a definition tensor (``x`` or ``x_ptr``)
gets that tensor's dtype; other non-constexpr parameters are taken as 32-bit integers (sizes, strides)
or fp32 for names like ``eps``/``scale``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from . import Collected
from .sass import facts_evidence, find_tool, parse_resource_usage, parse_sass

__all__ = [
    "TRITON_DTYPES",
    "CompiledStats",
    "CompiledLaunch",
    "compile_for_sm90",
    "compiled_launches",
    "infer_signature",
    "load_kernel",
    "triton_evidence",
    "unwrap_jit",
]

TRITON_DTYPES = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5", "int64": "i64", "int32": "i32", "int16": "i16",
    "int8": "i8", "uint8": "u8", "bool": "i1",
    # float4 is stored packed in uint8 containers by every kernel we know of.
    "float4_e2m1": "u8",
}
_FLOAT_SCALAR_NAMES = re.compile(r"(eps|scale|alpha|beta|gamma|temperature|theta|factor)", re.I)


def unwrap_jit(fn: Any) -> Any:
    """The JITFunction under @triton.autotune / @triton.heuristics wrappers."""
    seen = 0
    while not hasattr(fn, "arg_names") or not hasattr(fn, "params"):
        if not hasattr(fn, "fn") or seen > 8:
            raise TypeError(f"{fn!r} is not a @triton.jit function")
        fn = fn.fn
        seen += 1
    return fn


def _autotune_first_config(fn: Any) -> dict[str, Any]:
    """kwargs + num_warps/num_stages of an autotuner's first config (the compile needs concrete values)."""
    configs = getattr(fn, "configs", None)
    if not configs:
        return {}
    c = configs[0]
    out = dict(getattr(c, "kwargs", {}) or {})
    for k in ("num_warps", "num_stages"):
        if getattr(c, k, None) is not None:
            out[f"__{k}"] = getattr(c, k)
    return out


def load_kernel(source: str | Path, kernel_name: str, module_name: str = "kbot_candidate_kernels") -> Any:
    """Import a solution's source file and return ``kernel_name`` from it (no GPU needed to import)."""
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such source file")
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = mod
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(path.parent))
    if not hasattr(mod, kernel_name):
        raise AttributeError(f"{path} has no kernel named {kernel_name!r}")
    return getattr(mod, kernel_name)


def infer_signature(fn: Any, tensor_dtypes: dict[str, str] | None = None, explicit: dict[str, str] | None = None,
                    constexprs: dict[str, Any] | None = None) -> tuple[dict[str, str], dict[str, Any]]:
    """(signature, constexprs) for ``fn``; raises ValueError naming any parameter it cannot type."""
    jit = unwrap_jit(fn)
    explicit = dict(explicit or {})
    tensor_dtypes = dict(tensor_dtypes or {})
    consts = dict(_autotune_first_config(fn))
    consts.update(constexprs or {})
    sig: dict[str, str] = {}
    unknown = []
    for p in jit.params:
        name = p.name
        if p.is_constexpr:
            sig[name] = "constexpr"
            if name not in consts:
                if getattr(p, "has_default", False):
                    consts[name] = p.default
                else:
                    unknown.append(f"{name} (constexpr: give its value)")
            continue
        if name in explicit:
            sig[name] = explicit[name]
            continue
        stem = name[:-4] if name.endswith("_ptr") else name
        for cand in (name, stem):
            if cand in tensor_dtypes:
                sig[name] = "*" + TRITON_DTYPES[tensor_dtypes[cand]]
                break
        else:
            if name.endswith("_ptr") or name.startswith("ptr_"):
                unknown.append(f"{name} (pointer: which dtype?)")
            elif _FLOAT_SCALAR_NAMES.search(name):
                sig[name] = "fp32"
            else:
                sig[name] = "i32"
    if unknown:
        raise ValueError(f"cannot infer the signature of {jit.__name__}: {', '.join(unknown)}; pass them explicitly")
    # ``__num_warps``/``__num_stages`` (from an autotune config) ride along for compile_for_sm90.
    keep = {k: v for k, v in consts.items() if (sig.get(k) == "constexpr") or k.startswith("__")}
    return sig, keep


@dataclass
class CompiledStats:
    name: str
    metadata: dict[str, Any]
    cubin: bytes
    ptx: str
    resources: dict[str, int]
    ptxas: dict[str, int]
    sass: dict[str, Any]


def _ptxas_verbose(ptx: str, arch: int) -> dict[str, int]:
    """Registers and spill bytes as ptxas reports them (the authoritative spill count)."""
    exe = None
    try:  # the ptxas triton itself uses for this arch (3.9 ships a newer one as "ptxas-blackwell")
        from triton.backends.nvidia.compiler import get_ptxas

        exe = get_ptxas(arch).path
    except Exception:
        exe = find_tool("ptxas-blackwell") if arch >= 90 else None
        exe = exe or find_tool("ptxas")
    if exe is None:
        return {}
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.ptx"
        src.write_text(ptx)
        p = subprocess.run([exe, f"-arch=sm_{arch}a", "--verbose", str(src), "-o", str(Path(d) / "k.cubin")],
                           capture_output=True, text=True, timeout=120)
    text = p.stdout + p.stderr
    out: dict[str, int] = {}
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)
    if m:
        out["spill_store_bytes"], out["spill_load_bytes"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"Used (\d+) registers", text)
    if m:
        out["registers"] = int(m.group(1))
    m = re.search(r"(\d+) bytes stack frame", text)
    if m:
        out["stack_frame_bytes"] = int(m.group(1))
    return out


def compile_for_sm90(fn: Any, signature: dict[str, str], constexprs: dict[str, Any] | None = None, *,
                     num_warps: int | None = None, num_stages: int | None = None, arch: int = 90,
                     aligned_pointers: bool = True, int_divisible: bool | dict[str, bool] = True,
                     maxnreg: int | None = None, divisible: Iterable[str] | None = None) -> CompiledStats:
    """Compile ``fn`` for sm_``arch`` without a GPU and gather its statistics. ``divisible``: exactly the
    parameters that get the JIT's 16-divisibility hint (a recorded launch knows them); else pointers by
    ``aligned_pointers`` and integers by ``int_divisible``."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    jit = unwrap_jit(fn)
    consts = dict(constexprs or {})
    num_warps = num_warps or consts.pop("__num_warps", None) or 4
    num_stages = num_stages or consts.pop("__num_stages", None) or 3
    consts = {k: v for k, v in consts.items() if not k.startswith("__")}
    # Torch allocations are 16-byte aligned and the JIT specializes on it; do the same so the compiled
    # code matches what runs (vectorized loads need the alignment hint).
    # Integer arguments divisible by 16 are specialized the same way at run time; workload sizes almost
    # always are, so assume it unless told (``int_divisible={"n": False}`` or ``False``).
    attrs = {}
    known = None if divisible is None else set(divisible)
    for i, n in enumerate(jit.arg_names):
        ty = signature.get(n, "")
        if known is not None:
            hint = n in known and (ty.startswith("*") or ty in ("i32", "i64", "u32", "u64"))
        elif ty.startswith("*"):
            hint = aligned_pointers
        elif ty in ("i32", "i64", "u32", "u64"):
            hint = int_divisible.get(n, True) if isinstance(int_divisible, dict) else bool(int_divisible)
        else:
            hint = False
        if hint:
            attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(jit, signature, consts, attrs)
    options: dict[str, Any] = {"num_warps": num_warps, "num_stages": num_stages}
    if maxnreg:
        options["maxnreg"] = maxnreg
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # silence 3.9's default-change warning
    k = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=options)
    md = {kk: v for kk, v in k.metadata._asdict().items() if isinstance(v, (int, float, str, bool, type(None)))}
    cubin = k.asm["cubin"]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"{jit.__name__}.cubin"
        path.write_bytes(cubin)
        exe = find_tool("cuobjdump")
        resources: dict[str, int] = {}
        sass: dict[str, Any] = {}
        if exe:
            ru = subprocess.run([exe, "--dump-resource-usage", str(path)], capture_output=True, text=True, timeout=60)
            resources = parse_resource_usage(ru.stdout).get(k.name, {})
            sd = subprocess.run([exe, "--dump-sass", str(path)], capture_output=True, text=True, timeout=60)
            sass = parse_sass(sd.stdout).get(k.name, {})
    return CompiledStats(name=k.name, metadata=md, cubin=cubin, ptx=k.asm.get("ptx", ""), resources=resources,
                         ptxas=_ptxas_verbose(k.asm.get("ptx", ""), arch) if k.asm.get("ptx") else {}, sass=sass)


def triton_evidence(fn: Any, signature: dict[str, str] | None = None, constexprs: dict[str, Any] | None = None, *,
                    tensor_dtypes: dict[str, str] | None = None, **kw: Any) -> Collected:
    """Evidence (``triton_*`` and ``sass_*`` names) for one Triton kernel, or missing with the reason."""
    try:
        import triton  # noqa: F401
    except ImportError as e:
        return Collected.unavailable("triton", f"triton is not importable: {e}")
    try:
        if signature is None:
            signature, constexprs = infer_signature(fn, tensor_dtypes, constexprs=constexprs)
        else:
            _, inferred = infer_signature(fn, tensor_dtypes, explicit=signature, constexprs=constexprs)
            constexprs = inferred
        st = compile_for_sm90(fn, signature, constexprs, **kw)
    except Exception as e:  # a compile error is evidence about the candidate, reported, not raised
        return Collected.unavailable("triton", f"{type(e).__name__}: {str(e)[:500]}")
    ev: dict[str, Any] = {
        "triton_kernel": st.name,
        "triton_num_warps": st.metadata.get("num_warps"),
        "triton_num_stages": st.metadata.get("num_stages"),
        "triton_shared_bytes": st.metadata.get("shared"),
    }
    if "REG" in st.resources:
        ev["triton_registers"] = st.resources["REG"]
    if "LOCAL" in st.resources:
        ev["triton_local_bytes"] = st.resources["LOCAL"]
    if "STACK" in st.resources:
        ev["triton_stack_bytes"] = st.resources["STACK"]
    if "spill_store_bytes" in st.ptxas:
        ev["triton_spill_bytes"] = st.ptxas["spill_store_bytes"] + st.ptxas["spill_load_bytes"]
    if st.sass:
        ev.update(facts_evidence(st.sass))
        ev["sass_function"] = st.name
    ev = {k: v for k, v in ev.items() if v is not None}
    return Collected(source="triton", evidence=ev,
                     raw={"metadata": st.metadata, "resources": st.resources, "ptxas": st.ptxas, "signature": signature,
                          "constexprs": {k: v for k, v in (constexprs or {}).items() if isinstance(v, (int, float, str, bool))}})


@dataclass
class CompiledLaunch:
    """One distinct launch seen by :func:`compiled_launches`: the kernel, its constexprs and options as
    launched, and what compiling it for the target gave (``stats``) or the compiler's error (``error``)."""

    kernel: str
    constexprs: dict[str, Any]
    options: dict[str, Any]
    signature: dict[str, str] = field(repr=False)
    stats: CompiledStats | None = field(default=None, repr=False)
    error: str | None = None
    compile_s: float = 0.0  # wall seconds of compile_for_sm90: the compile plus its cuobjdump / ptxas reads


def _launch_signature(jit: Any, args: tuple, kwargs: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any], set[str]]:
    """(signature, constexprs, names divisible by 16) of one launch, from the values it passes."""
    import torch

    by_dtype = {getattr(torch, k): v for k, v in TRITON_DTYPES.items() if hasattr(torch, k)}
    values = dict(zip(jit.arg_names, args))
    values.update(kwargs)
    sig: dict[str, str] = {}
    consts: dict[str, Any] = {}
    divisible: set[str] = set()
    for p in jit.params:
        name = p.name
        if name not in values:
            if not getattr(p, "has_default", False):
                raise TypeError(f"{jit.__name__}() missing argument {name!r}")
            values[name] = p.default
        v = values[name]
        specialize = not getattr(p, "do_not_specialize", False)
        if p.is_constexpr or v is None or (specialize and type(v) is int and v == 1):
            sig[name], consts[name] = "constexpr", v  # the JIT compiles an integer 1 as the constant 1
        elif isinstance(v, torch.Tensor):
            if v.dtype not in by_dtype:
                raise TypeError(f"{jit.__name__}({name}=...): no Triton type for {v.dtype}")
            sig[name] = "*" + by_dtype[v.dtype]
            if v.data_ptr() % 16 == 0 and not getattr(p, "do_not_specialize_on_alignment", False):
                divisible.add(name)
        elif type(v).__name__ == "TensorDescriptor" and isinstance(getattr(v, "base", None), torch.Tensor):
            if v.base.dtype not in by_dtype:  # a host-side TMA descriptor (triton.tools.tensor_descriptor)
                raise TypeError(f"{jit.__name__}({name}=...): no Triton type for {v.base.dtype}")
            sig[name] = f"tensordesc<{by_dtype[v.base.dtype]}[{','.join(str(int(d)) for d in v.block_shape)}]>"
        elif isinstance(v, bool):
            sig[name] = "u1"
        elif isinstance(v, int):
            sig[name] = "i32" if -(2**31) <= v < 2**31 else "i64" if v < 2**63 else "u64"
            if v % 16 == 0 and specialize:
                divisible.add(name)
        elif isinstance(v, float):
            sig[name] = "fp32"
        else:
            raise TypeError(f"{jit.__name__}({name}=...): cannot type a {type(v).__name__}")
    return sig, consts, divisible


@contextmanager
def compiled_launches(arch: int = 90) -> Iterator[list[CompiledLaunch]]:
    """Inside the block, every ``kernel[grid](...)`` launch of a ``@triton.jit`` function is compiled for
    sm_<arch> (the whole pipeline to a cubin, no GPU needed) instead of run; the list it yields gets one
    :class:`CompiledLaunch` per distinct (kernel, constexprs, options, signature). The host code around
    the launches runs for real (on CPU tensors), so every launch a call makes on that path is seen; the
    kernels' outputs are left unwritten, so host code that reads them follows garbage (the compile
    coverage is still that of the launches it reaches). For a kernel the Triton interpreter accepts and
    the compiler rejects (a type that changes across a loop, a layout the backend cannot lower).
    Arguments are typed as the JIT specializes them (an integer 1 becomes the constant, 16-divisible
    integers and 16-aligned tensors get the hint); launch options other than warps, stages and maxnreg
    (``launch_cooperative_grid``, ``num_ctas``...) are recorded, not compiled in. Launches through
    ``@triton.autotune`` / ``@triton.heuristics`` wrappers go through ``.run`` and are not captured."""
    from triton.runtime.jit import JITFunction

    seen: dict[str, CompiledLaunch] = {}
    out: list[CompiledLaunch] = []

    def getitem(self: Any, grid: Any) -> Any:
        def launch(*args: Any, **kwargs: Any) -> None:
            opts = {k: kwargs.pop(k) for k in ("num_warps", "num_stages", "maxnreg") if k in kwargs}
            params = {p.name for p in self.params}
            extra = {k: kwargs.pop(k) for k in list(kwargs) if k not in params}  # other launch options
            sig, consts, divisible = _launch_signature(self, args, kwargs)
            key = repr((id(self), sorted(sig.items()), sorted((k, repr(v)) for k, v in consts.items()),
                        sorted(opts.items()), sorted(divisible)))
            if key in seen:
                return
            rec = CompiledLaunch(self.__name__, consts, {**opts, **extra}, sig)
            t0 = time.monotonic()
            try:
                rec.stats = compile_for_sm90(self, sig, consts, num_warps=opts.get("num_warps"),
                                             num_stages=opts.get("num_stages"), maxnreg=opts.get("maxnreg"),
                                             arch=arch, divisible=divisible)
            except Exception as e:  # the compiler's verdict on this launch, reported by the caller
                rec.error = f"{type(e).__name__}: {str(e)[:2000]}"
            rec.compile_s = time.monotonic() - t0
            seen[key] = rec
            out.append(rec)

        return launch

    own = JITFunction.__dict__.get("__getitem__")  # usually inherited from KernelInterface
    JITFunction.__getitem__ = getitem
    try:
        yield out
    finally:
        if own is None:
            del JITFunction.__getitem__
        else:
            JITFunction.__getitem__ = own
