"""Correctness comparisons: candidate outputs against reference outputs.

The default rule is the official one: an element fails only if it exceeds *both* the absolute and the
relative tolerance, any NaN/Inf in the candidate where the reference is finite fails, and at least
``required_matched_ratio`` of the elements must pass. Definitions whose outputs are not comparable
element by element (top-k indices with ties, optional outputs) register their own comparator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .defconfig import DefinitionConfig, Tolerance
from .dtypes import torch_dtype
from .registrar import registrar
from .schema import Definition, Status


@dataclass
class CompareResult:
    status: Status
    max_absolute_error: float = 0.0
    max_relative_error: float = 0.0
    matched_ratio: float | None = None
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is Status.PASSED


Comparator = Callable[..., CompareResult]
COMPARATORS: dict[str, Comparator] = {}


comparator = registrar(COMPARATORS, "comparator")  # @comparator("name") registers a comparator


def check_structure(name: str, out: Any, expected_shape: tuple[int, ...] | None, expected_dtype: torch.dtype | None) -> CompareResult | None:
    """Shape and dtype first: a wrong dtype or shape is its own status, not a numerical error."""
    if expected_shape is None:  # python scalar output
        if isinstance(out, torch.Tensor):
            return CompareResult(Status.INCORRECT_SHAPE, message=f"{name}: expected a Python scalar, got a tensor")
        return None
    if not isinstance(out, torch.Tensor):
        return CompareResult(Status.INCORRECT_SHAPE, message=f"{name}: expected a tensor, got {type(out).__name__}")
    if tuple(out.shape) != tuple(expected_shape):
        return CompareResult(Status.INCORRECT_SHAPE, message=f"{name}: shape {tuple(out.shape)}, expected {tuple(expected_shape)}")
    if expected_dtype is not None and out.dtype != expected_dtype:
        return CompareResult(Status.INCORRECT_DTYPE, message=f"{name}: dtype {out.dtype}, expected {expected_dtype}")
    return None


def elementwise(name: str, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> CompareResult:
    # On the outputs' own device, in float32 (float64 when either side is float64): exact enough for
    # every narrower dtype, and fast for outputs of hundreds of MB where a CPU float64 copy takes seconds.
    wide = torch.float64 if torch.float64 in (out.dtype, ref.dtype) else torch.float32
    a = out.detach().to(wide)
    b = ref.detach().to(device=a.device, dtype=wide)
    n = a.numel()
    if n == 0:
        return CompareResult(Status.PASSED, matched_ratio=1.0)
    ref_finite = torch.isfinite(b)
    bad_nonfinite = ~torch.isfinite(a) & ref_finite
    # where both are non-finite they must be the same non-finite value (inf == inf; nan vs nan ok)
    both_nonfinite = ~torch.isfinite(a) & ~ref_finite
    same_nonfinite = both_nonfinite & ((a == b) | (torch.isnan(a) & torch.isnan(b)))
    mismatch_nonfinite = (~torch.isfinite(b) & ~both_nonfinite) | (both_nonfinite & ~same_nonfinite)
    diff = (a - b).abs()
    diff = torch.where(torch.isfinite(a) & ref_finite, diff, torch.zeros_like(diff))
    rel = diff / b.abs().clamp_min(1e-12)
    fail = ((diff > tol.atol) & (rel > tol.rtol)) | bad_nonfinite | mismatch_nonfinite
    nfail = int(fail.sum())
    matched = 1.0 - nfail / n
    max_abs = float(diff.max())
    max_rel = float(rel.max())
    # A NaN/Inf where the reference is finite fails whatever the matched ratio: the poison written into
    # destination outputs is NaN, and skipped work must never hide inside the tolerated fraction.
    if int(bad_nonfinite.sum()):
        return CompareResult(
            Status.INCORRECT_NUMERICAL, max_abs, max_rel, matched, f"{name}: {int(bad_nonfinite.sum())} NaN/Inf values where the reference is finite"
        )
    if matched + 1e-12 < tol.required_matched_ratio:
        idx = int(fail.flatten().nonzero()[0])
        where = tuple(int(i) for i in torch.unravel_index(torch.tensor(idx), tuple(a.shape)))
        return CompareResult(
            Status.INCORRECT_NUMERICAL,
            max_abs,
            max_rel,
            matched,
            f"{name}: {nfail}/{n} elements outside atol={tol.atol}, rtol={tol.rtol} "
            f"(first at {where}: got {float(a.flatten()[idx]):.6g}, expected {float(b.flatten()[idx]):.6g})",
        )
    return CompareResult(Status.PASSED, max_abs, max_rel, matched)


@comparator("default")
def compare_default(outputs: dict[str, Any], reference: dict[str, Any], *, definition: Definition, axes: dict[str, int],
                    config: DefinitionConfig, inputs: dict[str, Any] | None = None, **_: Any) -> CompareResult:
    worst = CompareResult(Status.PASSED, matched_ratio=1.0)
    for name, spec in definition.outputs.items():
        out = outputs.get(name)
        if out is None and name in config.optional_outputs:
            continue
        shape = definition.shape_of(spec, axes)
        bad = check_structure(name, out, shape, torch_dtype(spec.dtype) if shape is not None else None)
        if bad is not None:
            return bad
        if shape is None:
            ok = abs(float(out) - float(reference[name])) <= config.tolerance.atol + config.tolerance.rtol * abs(float(reference[name]))
            if not ok:
                return CompareResult(Status.INCORRECT_NUMERICAL, message=f"{name}: got {out}, expected {reference[name]}")
            continue
        r = elementwise(name, out, reference[name], config.tolerance)
        if not r.ok:
            return r
        worst.max_absolute_error = max(worst.max_absolute_error, r.max_absolute_error)
        worst.max_relative_error = max(worst.max_relative_error, r.max_relative_error)
        worst.matched_ratio = min(worst.matched_ratio or 1.0, r.matched_ratio or 1.0)
    return worst


def compare(outputs: dict[str, Any], reference: dict[str, Any], *, definition: Definition, axes: dict[str, int],
            config: DefinitionConfig, inputs: dict[str, Any] | None = None) -> CompareResult:
    fn = COMPARATORS.get(config.comparator)
    if fn is None:
        raise KeyError(f"unknown comparator '{config.comparator}' (known: {sorted(COMPARATORS)})")
    return fn(outputs, reference, definition=definition, axes=axes, config=config, inputs=inputs, **config.comparator_params)


def normalize_outputs(result: Any, definition: Definition) -> dict[str, Any]:
    """Map a value-returning call's result onto output names (a single value, a tuple, or a dict)."""
    names = list(definition.outputs)
    if isinstance(result, dict):
        return dict(result)
    if isinstance(result, (tuple, list)):
        if len(result) != len(names):
            raise ValueError(f"returned {len(result)} values, definition has {len(names)} outputs {names}")
        return dict(zip(names, result))
    if len(names) != 1:
        raise ValueError(f"returned one value, definition has {len(names)} outputs {names}")
    return {names[0]: result}
