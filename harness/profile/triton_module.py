"""Triton statistics for every kernel of a solution, without a GPU.

On a CPU-only machine (CI, a laptop) no kernel is ever compiled for the GPU, yet registers, spills,
tensor-core use and load widths are visible from an ahead-of-time sm_90 compile. What such a compile
needs beyond the kernel is each parameter's type and the value of each ``tl.constexpr`` parameter.

The first source of both is the evaluation itself: the worker records the signature of every launch
of the solution's own kernels during its correctness calls (harness/profile/launches.py,
``WorkloadResult.launches``), and :func:`recorded_launches` picks, per kernel, the last launch in the
workload that took the longest (the one that dominates the time). A kernel without a recorded launch
(``kbot explain --solution``, a workload that failed before launching it) falls back to the launch
sites in the source (``kernel[grid](x, y, BLOCK=1024, num_warps=4)``), read with :mod:`ast`: keyword
and positional constants, and names bound to integers at module level; pointer dtypes from the
definition's tensor names. A kernel that can be typed neither way is reported as missing, with the
names. Each kernel's details say which source its launch came from (and, for a recorded one, the
workload and the device: on the CPU the interpreter's launch, whose device-dependent constexprs have
their CPU values).

:func:`module_triton_evidence` works on an already-imported module (inside the harness worker, where
the candidate is imported anyway). :func:`solution_triton_evidence` imports the solution itself --
that runs the candidate's module-level code -- so the harness calls it through :func:`run_isolated`,
in a child process (``python -m harness.profile.triton_module JOB.json``).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from ..report import Report, WorkloadResult
from ..schema import Definition, Solution, Status
from . import Collected
from .triton_stats import TRITON_DTYPES, infer_signature, triton_evidence, unwrap_jit

__all__ = ["STATIC_VERSION", "launch_hints", "module_triton_evidence", "pointer_dtype_fallback", "recorded_launches", "run_isolated",
           "solution_triton_evidence"]

_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
# The shape of a kept static result (bot/campaign/harness_evaluator.py's static.json); older ones are compiled again.
STATIC_VERSION = 2
_TRITON_TYPE = re.compile(r"\*?(i1|i8|i16|i32|i64|u8|u16|u32|u64|fp8e4nv|fp8e5|fp16|bf16|fp32|fp64)|constexpr")


def recorded_launches(report: Report) -> list[dict[str, Any]]:
    """Per kernel of the solution's own (by source file and name), the launch to compile: its last
    launch in the workload that took the longest among those that launched it (passed workloads first,
    by median latency; then the others in order). Each carries ``workload``, ``device`` (where it was
    recorded) and ``distinct`` (how many different signatures of the kernel the evaluation saw)."""
    def rank(i_w: tuple[int, WorkloadResult]) -> tuple[int, float, int]:
        i, w = i_w
        passed = w.status is Status.PASSED and w.latency_ms is not None
        return (0 if passed else 1, -(w.latency_ms.median if passed and w.latency_ms else 0.0), i)

    chosen: dict[tuple[str, str], dict[str, Any]] = {}
    distinct: dict[tuple[str, str], set[str]] = {}
    for _, w in sorted(enumerate(report.workloads), key=rank):
        for rec in w.launches:
            key = (rec.source, rec.kernel)
            d = rec.model_dump(mode="json")
            distinct.setdefault(key, set()).add(json.dumps({k: v for k, v in d.items() if k != "count"}, sort_keys=True))
            if key not in chosen or chosen[key]["workload"] == w.uuid:  # the last launch of the first workload
                chosen[key] = {**d, "workload": w.uuid, "device": report.device.kind}
    return [{**v, "distinct": len(distinct[k])} for k, v in chosen.items()]


def _recorded_signature(jit: Any, rec: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any], dict[str, int], list[str]]:
    """(signature, constexprs, launch options, divisible) of a recorded launch, checked
    against the kernel it names (the record is data from the candidate's worker); ValueError if off."""
    sig = rec.get("signature") if isinstance(rec.get("signature"), dict) else {}
    if rec.get("unsupported"):
        raise ValueError(f"the recorded launch could not type {', '.join(map(str, rec['unsupported']))[:300]}")
    if set(sig) != set(jit.arg_names):
        raise ValueError(f"the recorded launch's parameters {sorted(sig)[:20]} are not the kernel's {jit.arg_names[:20]}")
    bad = [f"{k}: {v!r}" for k, v in sig.items() if not isinstance(v, str) or not _TRITON_TYPE.fullmatch(v)]
    if bad:
        raise ValueError(f"the recorded launch has types Triton does not take: {', '.join(bad)[:300]}")
    constexpr_names = {p.name for p in jit.params if p.is_constexpr}
    consts = dict(rec.get("constexprs") or {})
    for name, ty in sig.items():
        if (ty == "constexpr") != (name in consts):
            raise ValueError(f"the recorded launch's constexpr {name} has no value" if ty == "constexpr"
                             else f"the recorded launch gives {name} a constexpr value but types it {ty}")
    if not constexpr_names <= {k for k, v in sig.items() if v == "constexpr"}:
        raise ValueError(f"the recorded launch types constexprs {sorted(constexpr_names - set(consts))} as values")
    options = {k: int(v) for k, v in (rec.get("options") or {}).items() if k in _LAUNCH_OPTIONS and k != "num_ctas"}
    return dict(sig), consts, options, [str(x) for x in rec.get("divisible") or []]


def _const(node: ast.AST, module_ints: dict[str, int]) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
        return node.value
    if isinstance(node, ast.Name) and node.id in module_ints:
        return module_ints[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _const(node.operand, module_ints)
        return -v if isinstance(v, (int, float)) else None
    return None


def launch_hints(source: str, module_ints: dict[str, int] | None = None) -> dict[str, list[dict[str, Any]]]:
    """``{kernel_name: [{arg_or_option: constant, ..., "__positional": {index: constant}}, ...]}`` per launch site."""
    module_ints = dict(module_ints or {})
    tree = ast.parse(source)
    for node in tree.body:  # module-level NAME = <int> (BLOCK = 1024)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = _const(node.value, module_ints)
            if isinstance(v, int):
                module_ints.setdefault(node.targets[0].id, v)
    hints: dict[str, list[dict[str, Any]]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)):
            continue
        target = node.func.value
        name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else None
        if name is None:
            continue
        site: dict[str, Any] = {"__positional": {}}
        for i, a in enumerate(node.args):
            v = _const(a, module_ints)
            if v is not None:
                site["__positional"][i] = v
        for kw in node.keywords:
            if kw.arg is None:
                continue
            v = _const(kw.value, module_ints)
            if v is not None:
                site[kw.arg] = v
        hints.setdefault(name, []).append(site)
    return hints


def _jit_kernels(module: ModuleType) -> dict[str, Any]:
    out = {}
    for name, obj in vars(module).items():
        try:
            unwrap_jit(obj)
        except TypeError:
            continue
        out[name] = obj
    return out


def _tensor_dtypes(definition: Definition) -> dict[str, str]:
    return {n: s.dtype for group in (definition.inputs, definition.outputs) for n, s in group.items() if s.shape is not None}


def pointer_dtype_fallback(jit: Any, dtypes: dict[str, str]) -> dict[str, str]:
    """Pointer parameters whose name matches no tensor of the definition (``x_ptr`` for
    ``hidden_states``) get the definition's dtype when every tensor has the same one; with mixed dtypes
    they stay unknown and the compile is reported as missing (a guess could compile the wrong kernel)."""
    kinds = set(dtypes.values())
    if len(kinds) != 1:
        return {}
    (dtype,) = kinds
    if dtype not in TRITON_DTYPES:
        return {}
    out = {}
    for p in jit.params:
        stem = p.name[:-4] if p.name.endswith("_ptr") else p.name
        if not p.is_constexpr and (p.name.endswith("_ptr") or p.name.startswith("ptr_")) and p.name not in dtypes and stem not in dtypes:
            out[p.name] = "*" + TRITON_DTYPES[dtype]
    return out


def module_triton_evidence(module: ModuleType, source: str, definition: Definition,
                           launches: list[dict[str, Any]] | None = None) -> tuple[Collected, dict[str, Any]]:
    """(evidence of the largest kernel, per-kernel details) for every @triton.jit kernel of ``module``;
    ``launches``: recorded launch signatures of this module's kernels (``recorded_launches``), used
    before the launch sites of the source."""
    kernels = _jit_kernels(module)
    if not kernels:
        return Collected.unavailable("triton", "no @triton.jit kernel in the solution"), {}
    recorded = {r["kernel"]: r for r in launches or [] if isinstance(r, dict) and r.get("kernel") in kernels}
    module_ints = {k: v for k, v in vars(module).items() if isinstance(v, int) and not isinstance(v, bool)}
    hints = launch_hints(source, module_ints)
    launched = [k for k in kernels if k in hints or k in recorded]
    if launched:  # @triton.jit helpers called from inside kernels are not kernels of their own
        kernels = {k: kernels[k] for k in launched}
    dtypes = _tensor_dtypes(definition)
    details: dict[str, Any] = {}
    best: Collected | None = None

    def keep(name: str, c: Collected, detail: dict[str, Any]) -> None:
        nonlocal best
        details[name] = {"evidence": c.evidence, **detail}
        if best is None or c.evidence.get("sass_instructions", 0) > best.evidence.get("sass_instructions", 0):
            best = c

    for name, fn in kernels.items():
        jit = unwrap_jit(fn)
        problems = []
        rec = recorded.get(name)
        if rec is not None:
            try:
                sig, consts, options, divisible = _recorded_signature(jit, rec)
            except ValueError as e:
                problems.append(str(e))
            else:
                c = triton_evidence(fn, sig, consts, tensor_dtypes=dtypes, divisible=divisible, **options)
                if c.ok:
                    keep(name, c, {"launch": {**consts, **options}, "from": "recorded launch",
                                   **{k: rec[k] for k in ("workload", "device", "count", "distinct") if k in rec}})
                    continue
                problems.append(f"the recorded launch did not compile: {c.missing}")
        sites = hints.get(name) or [{"__positional": {}}]
        for site in sites:
            consts = {k: v for k, v in site.items() if k in jit.arg_names}
            for i, v in site["__positional"].items():
                if i < len(jit.arg_names):
                    consts.setdefault(jit.arg_names[i], v)
            constexpr_names = {p.name for p in jit.params if p.is_constexpr}
            consts = {k: v for k, v in consts.items() if k in constexpr_names}
            options = {k: site[k] for k in _LAUNCH_OPTIONS if k in site and k != "num_ctas"}
            try:
                sig, consts = infer_signature(fn, dtypes, explicit=pointer_dtype_fallback(jit, dtypes), constexprs=consts)
            except ValueError as e:
                problems.append(str(e))
                continue
            sig = {k: v for k, v in sig.items() if v != "constexpr"}
            c = triton_evidence(fn, sig, consts, tensor_dtypes=dtypes, **options)
            if c.ok:
                keep(name, c, {"launch": {**consts, **options}, "from": "launch site in the source"})
                break
            problems.append(c.missing or "compile failed")
        else:
            details[name] = {"missing": "; ".join(dict.fromkeys(problems)) or "no launch site found"}
    if best is None:
        reasons = "; ".join(f"{k}: {v.get('missing')}" for k, v in details.items())
        return Collected.unavailable("triton", f"no kernel could be compiled ahead of time ({reasons})"[:800]), details
    best.raw["kernels"] = details
    return best, details


def solution_triton_evidence(solution: Solution, definition: Definition, workdir: Path | None = None,
                             launches: list[dict[str, Any]] | None = None) -> Collected:
    """Import the solution's Python sources and compile its Triton kernels for sm_90 (runs candidate
    code); ``launches``: recorded launch signatures (``recorded_launches``)."""
    from ..build import write_sources

    tmp = tempfile.TemporaryDirectory() if workdir is None else None
    root = write_sources(solution, Path(tmp.name if tmp else workdir) / "src")  # type: ignore[union-attr]
    best: Collected | None = None
    reasons = []
    try:
        for i, src in enumerate(s for s in solution.sources if s.path.endswith(".py")):
            modname = f"kbot_triton_stats_{i}_{abs(hash(str(root)))}"
            spec = importlib.util.spec_from_file_location(modname, root / src.path)
            if spec is None or spec.loader is None:
                continue
            mod = importlib.util.module_from_spec(spec)
            sys.modules[modname] = mod
            sys.path.insert(0, str(root))
            try:
                spec.loader.exec_module(mod)
            except Exception as e:  # noqa: BLE001 -- a module that does not import is reported, not raised
                reasons.append(f"{src.path}: import failed: {type(e).__name__}: {e}")
                continue
            finally:
                sys.path.remove(str(root))
            mine = [r for r in launches or [] if isinstance(r, dict) and r.get("source") == src.path]
            c, _ = module_triton_evidence(mod, src.content, definition, mine)
            if c.ok and (best is None or c.evidence.get("sass_instructions", 0) > best.evidence.get("sass_instructions", 0)):
                best = c
            elif not c.ok:
                reasons.append(f"{src.path}: {c.missing}")
    finally:
        if tmp is not None:
            tmp.cleanup()
    return best or Collected.unavailable("triton", "; ".join(reasons) or "no Python sources")


def run_isolated(solution: Solution, definition: Definition, workdir: Path | None = None, *, timeout_s: float = 300,
                 python: str | None = None, sandbox_mode: str | None = None,
                 launches: list[dict[str, Any]] | None = None) -> Collected:
    """:func:`solution_triton_evidence` in a sandboxed child process with a private scratch folder (see
    harness/profile/child.py): the candidate's module code never runs here. ``workdir`` is unused (the
    child's folder is its own) and kept for callers that pass one. At ``timeout_s`` the child's process
    group is killed and the result is missing with ``raw["timed_out"]``."""
    import subprocess

    from .child import CandidateChild, run_bounded

    with CandidateChild(sandbox_mode) as child:
        cmd = child.command("harness.profile.triton_module", {"solution": solution.model_dump(mode="json", exclude_unset=True),
                                                               "definition": definition.model_dump(mode="json", exclude_unset=True),
                                                               "launches": list(launches or [])}, python)
        try:
            p = run_bounded(cmd, timeout=timeout_s, env=child.env(), cwd=str(child.scratch))
        except subprocess.TimeoutExpired:
            return Collected(source="triton", missing=f"ahead-of-time compile did not finish in {timeout_s:.1f} s",
                             raw={"timed_out": True})
        data = child.result()
        if data is None:
            return Collected.unavailable("triton", f"stats process failed ({p.returncode}): {p.stderr.strip()[-400:]}")
        ev, raw = data.get("evidence"), data.get("raw")
        missing = data.get("missing") if isinstance(data.get("missing"), str) else None
        return Collected(source="triton", evidence=ev if isinstance(ev, dict) else {}, missing=missing,
                         raw=raw if isinstance(raw, dict) else {})


def _main(argv: list[str]) -> int:
    import json

    from ..sandbox import seal_active

    job = json.loads(Path(argv[0]).read_text())
    sol = Solution.model_validate(job["solution"])
    d = Definition.model_validate(job["definition"])
    seal_active()  # started through harness.sandboxed: no sockets once candidate code is imported
    launches = job.get("launches") if isinstance(job.get("launches"), list) else []
    c = solution_triton_evidence(sol, d, Path(job["workdir"]), launches)
    Path(job["result"]).write_text(json.dumps({"evidence": c.evidence, "missing": c.missing, "raw": c.raw}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
