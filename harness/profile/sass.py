"""SASS facts from a cubin: memory access widths, tensor-core instructions, local-memory traffic.

Static facts (what the compiler emitted), not counts of what ran: a narrow ``LDG.E`` in a loop body
or a spill ``STL`` says as much about a kernel as a profiler counter, and it is available on a machine
without a GPU. Uses ``cuobjdump --dump-sass`` (shipped in the triton wheel) and, for resource usage,
``cuobjdump --dump-resource-usage``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from . import Collected

__all__ = ["dump_sass", "find_tool", "parse_resource_usage", "parse_sass", "pick_function", "resource_usage",
           "sass_evidence"]

# ``/*0160*/  @!P0 LDG.E.128.CONSTANT R4, desc[UR4][R6.64] ;``  -> opcode with modifiers
_INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")
_FUNC = re.compile(r"^\s*Function\s*:\s*(\S+)", re.M)
TENSOR_OPS = ("HGMMA", "HMMA", "QGMMA", "IGMMA", "IMMA", "BGMMA", "DMMA", "UTCHMMA", "UTCQMMA", "UTCIMMA")


def find_tool(name: str) -> str | None:
    """A CUDA binary tool: PATH first, then the copy shipped inside the triton wheel."""
    found = shutil.which(name)
    if found:
        return found
    try:
        import triton

        cand = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
        if cand.is_file():
            return str(cand)
    except Exception:
        pass
    for base in ("/usr/local/cuda/bin",):
        cand = Path(base) / name
        if cand.is_file():
            return str(cand)
    return None


def _run(tool: str, args: list[str], timeout: int = 60) -> str:
    exe = find_tool(tool)
    if exe is None:
        raise FileNotFoundError(f"{tool} not found (neither on PATH nor in the triton wheel)")
    p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{tool} {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()[:400]}")
    return p.stdout


def dump_sass(cubin: str | Path) -> str:
    return _run("cuobjdump", ["--dump-sass", str(cubin)])


def resource_usage(cubin: str | Path) -> str:
    return _run("cuobjdump", ["--dump-resource-usage", str(cubin)])


def parse_resource_usage(text: str) -> dict[str, dict[str, int]]:
    """``{function: {REG, STACK, SHARED, LOCAL, ...}}`` from ``cuobjdump --dump-resource-usage``."""
    out: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"\s*Function\s+(\S+?):?\s*$", line)
        if m:
            current = m.group(1)
            out[current] = {}
            continue
        if current is not None:
            for key, val in re.findall(r"([A-Z]+(?:\[\d+\])?):(\d+)", line):
                out[current][key] = int(val)
    return out


def _width(op: str) -> int:
    """Bits per thread of a load/store opcode: LDG.E = 32, .64, .128, .U8/.S8 = 8, .U16/.S16 = 16."""
    parts = op.split(".")
    for p in parts[1:]:
        if p in ("64", "128", "256"):
            return int(p)
        if p in ("U8", "S8"):
            return 8
        if p in ("U16", "S16"):
            return 16
    return 32


def parse_sass(text: str) -> dict[str, dict[str, Any]]:
    """Per function: opcode counts, global load/store widths, tensor-core and local-memory instructions."""
    funcs: dict[str, dict[str, Any]] = {}
    chunks = _FUNC.split(text)
    # split gives [preamble, name1, body1, name2, body2, ...]
    for name, body in zip(chunks[1::2], chunks[2::2]):
        ops = _INSN.findall(body)
        base = Counter(o.split(".")[0] for o in ops)
        ldg = Counter(_width(o) for o in ops if o.split(".")[0] == "LDG")
        stg = Counter(_width(o) for o in ops if o.split(".")[0] == "STG")
        tensor = {t: base[t] for t in TENSOR_OPS if base.get(t)}
        funcs[name] = {
            "instructions": len(ops),
            "opcodes": dict(base.most_common()),
            "ldg_widths": {str(k): v for k, v in sorted(ldg.items())},
            "stg_widths": {str(k): v for k, v in sorted(stg.items())},
            "tensor_instructions": tensor,
            "ldl": base.get("LDL", 0),
            "stl": base.get("STL", 0),
            # LDGSTS (cp.async) and UTMALDG (TMA) move global data to shared memory without registers.
            "async_copies": base.get("LDGSTS", 0) + base.get("UBLKCP", 0) + base.get("UTMALDG", 0),
            "ffma": base.get("FFMA", 0),
            "shared_ld": base.get("LDS", 0) + base.get("LDSM", 0),
            "shared_st": base.get("STS", 0),
        }
    return funcs


def facts_evidence(f: dict[str, Any], prefix: str = "sass") -> dict[str, Any]:
    ev: dict[str, Any] = {}
    ldg_total = sum(f["ldg_widths"].values())
    stg_total = sum(f["stg_widths"].values())
    ev[f"{prefix}_instructions"] = f["instructions"]
    ev[f"{prefix}_ldg"] = ldg_total
    ev[f"{prefix}_stg"] = stg_total
    if ldg_total:
        narrow = sum(v for k, v in f["ldg_widths"].items() if int(k) < 64)
        ev[f"{prefix}_ldg_narrow_pct"] = narrow / ldg_total * 100
        ev[f"{prefix}_ldg_128_pct"] = f["ldg_widths"].get("128", 0) / ldg_total * 100
    if stg_total:
        narrow = sum(v for k, v in f["stg_widths"].items() if int(k) < 64)
        ev[f"{prefix}_stg_narrow_pct"] = narrow / stg_total * 100
    ev[f"{prefix}_tensor_instructions"] = sum(f["tensor_instructions"].values())
    ev[f"{prefix}_ffma"] = f["ffma"]
    ev[f"{prefix}_ldl"] = f["ldl"]
    ev[f"{prefix}_stl"] = f["stl"]
    ev[f"{prefix}_async_copies"] = f["async_copies"]
    return ev


def pick_function(funcs: dict[str, Any], function: str | None) -> str | None:
    """The SASS function for a kernel name as ncu prints it (demangled, with parameters), or the largest.

    Returns None when ``function`` is given and nothing matches it.
    """
    if not funcs:
        return None
    if function is None:
        return max(funcs, key=lambda n: funcs[n]["instructions"])
    if function in funcs:
        return function
    bare = function.split("(")[0].split("<")[0].strip().split()[-1].split("::")[-1] if function.strip() else ""
    hits = [n for n in funcs if bare and (n == bare or bare in n)]
    return max(hits, key=lambda n: funcs[n]["instructions"]) if hits else None


def sass_evidence(cubin: str | Path, function: str | None = None) -> Collected:
    """SASS facts of one function in a cubin (the largest when ``function`` is None)."""
    try:
        text = dump_sass(cubin)
    except (FileNotFoundError, RuntimeError, subprocess.TimeoutExpired) as e:
        return Collected.unavailable("sass", str(e))
    funcs = parse_sass(text)
    if not funcs:
        return Collected.unavailable("sass", f"no functions found in the SASS of {cubin}")
    name = pick_function(funcs, function)
    if name is None:
        return Collected.unavailable("sass", f"no function matching {function!r} in {sorted(funcs)[:10]}")
    ev = facts_evidence(funcs[name])
    ev["sass_function"] = name
    return Collected(source="sass", evidence=ev, raw={"functions": sorted(funcs)})
