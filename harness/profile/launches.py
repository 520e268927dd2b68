"""The launch signatures of a candidate's Triton kernels, recorded as the worker launches them.

The ahead-of-time compile (harness/profile/triton_module.py) needs, for every kernel, each parameter's
Triton type (``*bf16``, ``i32``, ``fp32``...) and the value of every ``tl.constexpr``. Read from the
source they are often unknowable: a constexpr passed as ``H=H`` where ``H`` comes from a shape, a
pointer whose dtype depends on how ``run`` builds the tensor. At the launch they are plain facts, so the
worker's launch counter (``harness.guard.runtime.LaunchCounter``) hands every launch of the solution's
own kernels to a :class:`LaunchRecorder` while the worker's correctness calls run (never while timing),
and each workload's result carries what it saw (``WorkloadResult.launches``).

Types follow the Triton JIT's own rules: a tensor (anything with ``data_ptr`` and a torch ``dtype``) is a
pointer to its dtype, a bool ``i1``, an int ``i32`` (``i64`` / ``u64`` when it does not fit), a float
``fp32``, ``None`` a constexpr; ``divisible`` names the pointers 16-byte aligned and the ints divisible
by 16 (the JIT specializes on both). On the CPU the launches are those of the Triton interpreter, so a
constexpr the solution sets for the interpreter (the contest seeds' ``WIDEN`` / ``INTERP`` workarounds)
has its interpreter value; the compile reports where its launch was recorded.
"""

from __future__ import annotations

import inspect
import json
import os
from typing import Any

from .triton_stats import TRITON_DTYPES

__all__ = ["LAUNCH_OPTIONS", "MAX_SIGNATURES", "LaunchRecorder", "launch_signature"]

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
MAX_SIGNATURES = 32  # distinct signatures kept per workload (a report line, not a log)
_MISSING = object()


def _annotation(p: inspect.Parameter) -> str:
    a = p.annotation
    if a is inspect.Parameter.empty:
        return ""
    return a if isinstance(a, str) else getattr(a, "__name__", repr(a))


def _scalar(v: Any) -> tuple[bool, Any]:
    """(ok, value) for a constexpr's value as JSON: a tl.constexpr is unwrapped; only scalars pass."""
    v = getattr(v, "value", v) if type(v).__name__ == "constexpr" else v
    if v is None or isinstance(v, (bool, int, float, str)):
        return True, v
    return False, None


def _int_type(v: int) -> str:
    if -(1 << 31) <= v < (1 << 31):
        return "i32"
    if v >= (1 << 63):
        return "u64"
    return "i64"


def launch_signature(kernel: Any, args: tuple, kwargs: dict[str, Any], src_root: str) -> dict[str, Any] | None:
    """The signature of one launch of ``kernel`` (a JITFunction or InterpretedFunction) with these
    arguments, or None when the kernel's code is not under ``src_root`` (not the solution's own)."""
    fn = getattr(kernel, "fn", None)
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    path = os.path.realpath(code.co_filename)
    root = os.path.realpath(src_root) + os.sep
    if not path.startswith(root):
        return None
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    names = {p.name for p in params}
    bound = sig.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in names}).arguments
    signature: dict[str, str] = {}
    constexprs: dict[str, Any] = {}
    divisible: list[str] = []
    unsupported: list[str] = []
    for p in params:
        v = bound.get(p.name, p.default if p.default is not inspect.Parameter.empty else _MISSING)
        if v is _MISSING:
            unsupported.append(f"{p.name} (not passed)")
            continue
        if "constexpr" in _annotation(p) or v is None:
            ok, value = _scalar(v)
            if not ok:
                unsupported.append(f"{p.name} (constexpr of type {type(v).__name__})")
                continue
            signature[p.name], constexprs[p.name] = "constexpr", value
        elif isinstance(v, bool):
            signature[p.name] = "i1"
        elif isinstance(v, int):
            signature[p.name] = _int_type(v)
            if v % 16 == 0:
                divisible.append(p.name)
        elif isinstance(v, float):
            signature[p.name] = "fp32"
        elif hasattr(v, "data_ptr") and hasattr(v, "dtype"):
            ty = TRITON_DTYPES.get(str(v.dtype).removeprefix("torch."))
            if ty is None:
                unsupported.append(f"{p.name} (pointer to {v.dtype})")
                continue
            signature[p.name] = "*" + ty
            if v.data_ptr() % 16 == 0:
                divisible.append(p.name)
        else:
            unsupported.append(f"{p.name} ({type(v).__name__})")
    options = {k: v for k, v in kwargs.items() if k in LAUNCH_OPTIONS and isinstance(v, int) and not isinstance(v, bool)}
    return {"kernel": fn.__name__, "source": os.path.relpath(path, root), "signature": signature, "constexprs": constexprs,
            "options": options, "divisible": divisible, "unsupported": unsupported}


class LaunchRecorder:
    """Distinct launch signatures of the solution's own kernels while open, each with how often it was
    launched, in the order of their last launch (an autotuner's benchmark runs come before its choice)."""

    def __init__(self, src_root: str | os.PathLike[str]):
        self.src_root = str(src_root)
        self._seen: dict[str, dict[str, Any]] = {}
        self.errors = 0  # launches whose signature could not be read (the launch itself is unaffected)

    def observe(self, kernel: Any, args: tuple, kwargs: dict[str, Any]) -> None:
        try:
            sig = launch_signature(kernel, args, kwargs, self.src_root)
        except Exception:  # noqa: BLE001 -- advice for the profiler: never a reason for a launch to fail
            self.errors += 1
            return
        if sig is None:
            return
        key = json.dumps(sig, sort_keys=True, default=str)
        entry = self._seen.pop(key, None)
        if entry is None:
            if len(self._seen) >= MAX_SIGNATURES:
                return
            entry = {**sig, "count": 0}
        entry["count"] += 1
        self._seen[key] = entry  # re-inserted: the dict's order is the order of last launch

    def take(self) -> list[dict[str, Any]]:
        """What was recorded since the last take, and forget it."""
        out = list(self._seen.values())
        self._seen.clear()
        return out
