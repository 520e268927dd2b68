"""Static guard: refuse a solution before any of its code runs.

``check_solution`` scans every ``.py`` source with the AST scanner (harness/guard/pyscan.py) and, for
``cuda`` solutions, every C/C++/CUDA source lexically (comments removed) against the language policy in
``skills/guard/`` merged with the definition's override. Every finding is an error that makes the
solution REJECTED; the finding names the rule, the file and line, and why the rule matters.

The static guard is the first wall, not the only one: what it cannot see (values computed at run time,
native code behaviour) is covered by the runtime checks in harness/guard/runtime.py and by the
harness's measurement protocol. docs/guard.md lists which layer catches which trick.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..report import Finding
from ..schema import Definition, Language, Solution
from .policy import load_policy, why
from .pyscan import Hit, SolutionScan, module_name_of

NATIVE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".inl")
_KERNEL_DEF = re.compile(r"\b__global__\b")


def check_solution(
    solution: Solution, definition: Definition | None = None, policy_dir: Path | None = None
) -> list[Finding]:
    """Findings for every policy violation in the solution's sources (empty list = nothing found).

    Deterministic: the same solution and policy give the same findings in the same order.
    """
    if definition is not None and definition.name != solution.definition:
        raise ValueError(f"solution '{solution.name}' is for '{solution.definition}', not '{definition.name}'")
    language = solution.spec.language.value if isinstance(solution.spec.language, Language) else str(solution.spec.language)
    policy = load_policy(language, solution.definition, policy_dir)

    py_files = {s.path: s.content for s in solution.sources if s.path.endswith(".py")}
    native_files = {s.path: s.content for s in solution.sources if s.path.endswith(NATIVE_SUFFIXES)}

    tensor_names: set[str] = set()
    input_names: set[str] = set()
    scalar_names: set[str] = set()
    written = set(policy.get("inputs_written") or [])  # in/out buffers the definition fills in place
    if definition is not None:
        for n, spec in definition.inputs.items():
            (tensor_names if spec.shape is not None else scalar_names).add(n)
            if spec.shape is not None and n not in written:
                input_names.add(n)
        for n, spec in definition.outputs.items():
            (tensor_names if spec.shape is not None else scalar_names).add(n)

    scan = SolutionScan(
        policy, py_files, solution.spec.entry_file, solution.spec.entry_function,
        tensor_names, input_names, scalar_names,
    )
    try:
        hits: list[Hit] = scan.run() if py_files else []
        if policy.get("native"):
            hits += _scan_native(native_files, policy["native"])
        if policy.get("require_kernel_launch") and not any(h.rule == "parse-error" for h in hits):
            hits += _launch_hits(solution, language, scan, native_files, py_files)
    except Exception as e:  # noqa: BLE001 — fail closed: what the guard cannot analyse does not run
        hits = scan.hits + [Hit("guard-error", solution.spec.entry_file, 1,
                                f"the static guard failed on this solution ({type(e).__name__}: {e})"[:300])]
    return _to_findings(hits, policy_dir)


def _launch_hits(solution: Solution, language: str, scan: SolutionScan, native: dict[str, str],
                 py_files: dict[str, str]) -> list[Hit]:
    entry = solution.spec.entry_file
    if language == "triton":
        if not scan.all_kernels:
            return [Hit("no-kernel-launch", entry, 1, "no @triton.jit kernel is defined")]
        reach = scan.launch_reachable()
        if reach is None:
            return [Hit("no-kernel-launch", entry, 1, f"entry function {solution.spec.entry_function} is not defined at the top level of {entry}")]
        if not reach:
            return [Hit("no-kernel-launch", entry, _def_line(py_files.get(entry, ""), solution.spec.entry_function),
                        f"{solution.spec.entry_function} never launches one of the solution's @triton.jit kernels")]
        return []
    if language == "cuda":
        if not any(_KERNEL_DEF.search(_strip_c_comments(t)) for t in native.values()):
            # a cuda solution may also launch through cupy.RawKernel source strings in Python
            if not any("__global__" in t for t in py_files.values()):
                return [Hit("no-kernel-launch", entry, 1, "no __global__ kernel is defined in the sources")]
    return []


def _def_line(text: str, fn: str) -> int:
    m = re.search(rf"^\s*(async\s+)?def\s+{re.escape(fn)}\b", text, re.M)
    return text[: m.start()].count("\n") + 1 if m else 1


def _strip_c_comments(text: str) -> str:
    """Remove // and /* */ comments but keep newlines, so line numbers stay right; strings are kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _scan_native(files: dict[str, str], rules: list[dict]) -> list[Hit]:
    compiled = [(re.compile(r["pattern"]), r["rule"]) for r in rules]
    hits = []
    for path, text in files.items():
        for lineno, line in enumerate(_strip_c_comments(text).splitlines(), 1):
            for rx, rule in compiled:
                m = rx.search(line)
                if m:
                    hits.append(Hit(rule, path, lineno, f"native code uses {m.group(0).strip()!r}"))
    return hits


def _to_findings(hits: list[Hit], policy_dir: Path | None) -> list[Finding]:
    seen, out = set(), []
    for h in sorted(hits, key=lambda h: (h.file, h.line, h.rule, h.message)):
        key = (h.rule, h.file, h.line)
        if key in seen:
            continue
        seen.add(key)
        out.append(Finding(rule=h.rule, message=h.message, why=why(h.rule, policy_dir), file=h.file, line=h.line))
    return out


__all__ = ["check_solution", "module_name_of"]
