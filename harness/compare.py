"""Correctness comparisons: candidate outputs against reference outputs.

The default rule is the official one: an element fails only if it exceeds *both* the absolute and the
relative tolerance, any NaN/Inf in the candidate where the reference is finite fails, and at least
``required_matched_ratio`` of the elements must pass. Definitions whose outputs are not comparable
element by element (top-k indices with ties, optional outputs) register their own comparator.

Extra checks (sidecar ``checks:``) are kbot's own, stricter rules run beside the official verdict on
outputs it passed: each reports a named outcome (``CompareResult.checks``) and never changes the
status, so the official verdict keeps its meaning and a reader sees both.
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
class CheckOutcome:
    """One extra check on one trial: passed or not, the measured value against its limit."""

    ok: bool
    value: float | None = None
    limit: float | None = None
    message: str = ""
    why: str = ""  # the sidecar's one line on what the check is for


@dataclass
class CompareResult:
    status: Status
    max_absolute_error: float = 0.0
    max_relative_error: float = 0.0
    matched_ratio: float | None = None
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, CheckOutcome] = field(default_factory=dict)  # by the sidecar's check name

    @property
    def ok(self) -> bool:
        return self.status is Status.PASSED


Comparator = Callable[..., CompareResult]
COMPARATORS: dict[str, Comparator] = {}


comparator = registrar(COMPARATORS, "comparator")  # @comparator("name") registers a comparator

Check = Callable[..., CheckOutcome]
CHECKS: dict[str, Check] = {}
check = registrar(CHECKS, "check")  # @check("name") registers an extra check


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


@check("rows_relative_l2")
def check_rows_relative_l2(outputs: dict[str, Any], reference: dict[str, Any], *, definition: Definition, output: str | None = None,
                           max_error: float, max_bad_fraction: float = 0.0, floor: float = 0.01, **_: Any) -> CheckOutcome:
    """Relative L2 error of each row (all but the last dimension index rows), ``|out - ref| / |ref|``:
    at most ``floor(max_bad_fraction * rows)`` rows may exceed ``max_error``.

    Elementwise tolerances with a matched ratio forgive a row that is uniformly off by a few tens of
    percent; a row's L2 error does not, and quantization noise (independent per element) averages out
    in it, so a limit a few times the honest noise still catches a systematic error of that size. The
    few rows allowed over the limit are for discrete decisions that flip on rounding (a near-tie in a
    top-k), which change a whole row; with fewer rows than ``1 / max_bad_fraction`` none may. A row
    whose reference is (near) zero is measured against ``floor`` times the largest row norm. The value
    reported is the error of the first row that is not allowed over the limit (pass: value <= limit).
    """
    name = output or next(iter(definition.outputs))
    a, b = outputs[name].detach().float(), reference[name].detach().to(device=outputs[name].device).float()
    if a.numel() == 0:
        return CheckOutcome(True, 0.0, max_error)
    a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    ref_norm = b.norm(dim=1)
    denom = ref_norm.clamp_min(max(float(ref_norm.max()) * floor, 1e-30))
    err = (a - b).norm(dim=1) / denom
    err = torch.where(torch.isnan(err), torch.full_like(err, float("inf")), err)
    allowed = int(max_bad_fraction * err.numel())
    top = torch.topk(err, min(allowed + 1, err.numel()))
    value, row = float(top.values[-1]), int(top.indices[-1])
    bad = int((err > max_error).sum())
    msg = (f"{name}: {bad} of {err.numel()} rows have a relative L2 error above {max_error:g} ({allowed} allowed); "
           f"row {row}: {value:.4g} (reference row norm {float(ref_norm[row]):.4g})")
    return CheckOutcome(value <= max_error, value, max_error, msg)


def run_checks(outputs: dict[str, Any], reference: dict[str, Any], *, definition: Definition, axes: dict[str, int], config: DefinitionConfig,
               inputs: dict[str, Any] | None = None) -> dict[str, CheckOutcome]:
    """The sidecar's extra checks on outputs the verdict passed; a check that raises is a failed outcome."""
    out: dict[str, CheckOutcome] = {}
    for name, ref in config.checks.items():
        fn = CHECKS.get(ref.check)
        if fn is None:
            raise KeyError(f"unknown check '{ref.check}' in checks.{name} (known: {sorted(CHECKS)})")
        try:
            out[name] = fn(outputs, reference, definition=definition, axes=axes, inputs=inputs, **ref.params)
        except Exception as e:  # noqa: BLE001 — a candidate's odd output must not crash the verdict
            out[name] = CheckOutcome(False, None, None, f"{type(e).__name__}: {e}")
        out[name].why = ref.why
    return out


def compare(outputs: dict[str, Any], reference: dict[str, Any], *, definition: Definition, axes: dict[str, int],
            config: DefinitionConfig, inputs: dict[str, Any] | None = None) -> CompareResult:
    fn = COMPARATORS.get(config.comparator)
    if fn is None:
        raise KeyError(f"unknown comparator '{config.comparator}' (known: {sorted(COMPARATORS)})")
    r = fn(outputs, reference, definition=definition, axes=axes, config=config, inputs=inputs, **config.comparator_params)
    if r.ok and config.checks:
        r.checks = run_checks(outputs, reference, definition=definition, axes=axes, config=config, inputs=inputs)
    return r


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
