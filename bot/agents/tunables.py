"""Declared tunables in kernel sources, and rewriting them.

Convention (for kernel authors): put a comment on the line of a literal assignment or keyword argument

    BLOCK_SIZE = 1024  # kbot: tunable [256, 512, 1024, 2048, 4096]
    num_warps=4,  # kbot: tunable [1, 2, 4, 8, 16]
    ROWS = 1  # kbot: tunable [1, 2, 4] role=block

The part before the comment must hold exactly one ``name = literal`` (int, float, bool or quoted
string); the list is the allowed values, in a meaningful order (small to large), and must contain the
current value. ``role=`` (optional) says what the knob does so profiler hints can steer it; without it
the role is guessed from the name (``num_warps`` -> warps, ``num_stages`` -> stages, ``BLOCK*``/``TILE*``
-> block, ``VEC*`` -> vector, ``GROUP*`` -> group, ``SPLIT*`` -> split).

A configuration is the mapping name -> value; its key is the structure (a hash of the source with every
tunable literal masked, so two kernels with different code never share a key) plus the values.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import re
import tokenize
from dataclasses import dataclass
from typing import Any

from harness.schema import Solution, SourceFile

MARK = re.compile(r"#\s*kbot:\s*tunable\s*(\[[^\]]*\])\s*(?:role\s*=\s*([A-Za-z_]+))?\s*$")
ASSIGN = re.compile(
    r"(?P<name>\b[A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*[A-Za-z_.\[\]]+\s*)?=\s*"
    r"(?P<lit>-?\d+\.\d*(?:[eE][-+]?\d+)?|-?\d+(?:[eE][-+]?\d+)?|True|False|'[^']*'|\"[^\"]*\")"
)
ROLES = ("warps", "stages", "block", "vector", "group", "split", "other")


class TunableError(ValueError):
    """A tunable declaration that does not follow the convention; the message names file and line."""


@dataclass(frozen=True)
class Tunable:
    key: str  # unique within a solution: the name, or "file:name@line" when a name repeats
    name: str
    file: str
    line: int  # 1-based
    span: tuple[int, int]  # character span of the literal within the line
    value: Any
    options: tuple[Any, ...]
    role: str

    @property
    def index(self) -> int:
        return self.options.index(self.value)


def guess_role(name: str) -> str:
    n = name.lower()
    if "warp" in n:
        return "warps"
    if "stage" in n:
        return "stages"
    if n.startswith(("vec", "vector")) or "vec" in n:
        return "vector"
    if "group" in n:
        return "group"
    if "split" in n:
        return "split"
    if n.startswith(("block", "tile", "bm", "bn", "bk", "rows", "cols")) or "block" in n:
        return "block"
    return "other"


def _literal(text: str, where: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise TunableError(f"{where}: '{text}' is not a literal") from None


def _mark_comments(path: str, source: str) -> dict[int, str]:
    """Line -> comment text, for real comments only (a docstring that mentions the mark is not one)."""
    out: dict[int, str] = {}
    if "kbot:" not in source:
        return out
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT and re.match(r"#\s*kbot:\s*tunable\b", tok.string):
                out[tok.start[0]] = tok.string
    except (tokenize.TokenError, SyntaxError) as e:
        raise TunableError(f"{path}: cannot tokenize the source: {e}") from None
    return out


def find_tunables(path: str, source: str) -> list[Tunable]:
    found: list[Tunable] = []
    lines = source.splitlines()
    for lineno, comment in sorted(_mark_comments(path, source).items()):
        line = lines[lineno - 1]
        where = f"{path}:{lineno}"
        m = MARK.search(line)
        if not m or not line.rstrip().endswith(comment.rstrip()):
            raise TunableError(f"{where}: malformed tunable mark; write '# kbot: tunable [v1, v2, ...]' (optionally 'role=<role>')")
        code = line[: m.start()]
        assigns = list(ASSIGN.finditer(code))
        if len(assigns) != 1:
            raise TunableError(
                f"{where}: a tunable line needs exactly one 'name = literal' before the mark, found {len(assigns)}"
            )
        a = assigns[0]
        options = _literal(m.group(1), where)
        if not isinstance(options, list) or not options:
            raise TunableError(f"{where}: the options must be a non-empty list")
        if len(set(map(repr, options))) != len(options):
            raise TunableError(f"{where}: the options repeat a value")
        value = _literal(a.group("lit"), where)
        if value not in options:
            raise TunableError(f"{where}: current value {value!r} is not among the options {options}")
        role = m.group(2) or guess_role(a.group("name"))
        if role not in ROLES:
            raise TunableError(f"{where}: unknown role '{role}', use one of {ROLES}")
        found.append(
            Tunable(
                key=a.group("name"),
                name=a.group("name"),
                file=path,
                line=lineno,
                span=(a.start("lit"), a.end("lit")),
                value=value,
                options=tuple(options),
                role=role,
            )
        )
    return found


def solution_tunables(solution: Solution) -> list[Tunable]:
    """All tunables of a solution, with unique keys (a repeated name gets ``file:name@line``)."""
    ts: list[Tunable] = []
    for src in solution.sources:
        ts.extend(find_tunables(src.path, src.content))
    names = [t.name for t in ts]
    out = []
    for t in ts:
        if names.count(t.name) > 1:
            t = Tunable(f"{t.file}:{t.name}@{t.line}", t.name, t.file, t.line, t.span, t.value, t.options, t.role)
        out.append(t)
    return out


def configuration(tunables: list[Tunable]) -> dict[str, Any]:
    return {t.key: t.value for t in tunables}


def structure_hash(solution: Solution, tunables: list[Tunable] | None = None) -> str:
    """Hash of the sources with every tunable literal masked: the identity of the kernel's structure."""
    tunables = solution_tunables(solution) if tunables is None else tunables
    by_file: dict[str, dict[int, Tunable]] = {}
    for t in tunables:
        by_file.setdefault(t.file, {})[t.line] = t
    h = hashlib.sha256()
    h.update(json.dumps(solution.spec.model_dump(mode="json"), sort_keys=True).encode())
    for src in sorted(solution.sources, key=lambda s: s.path):
        h.update(b"\0" + src.path.encode() + b"\0")
        marks = by_file.get(src.path, {})
        for i, line in enumerate(src.content.splitlines(), 1):
            if i in marks:
                a, b = marks[i].span
                line = line[:a] + "<T>" + line[b:]
            h.update(line.rstrip().encode() + b"\n")
    return h.hexdigest()[:16]


def config_key(solution: Solution) -> str:
    ts = solution_tunables(solution)
    return f"{structure_hash(solution, ts)}:{json.dumps(configuration(ts), sort_keys=True)}"


def config_key_or_none(solution: Solution) -> str | None:
    """``config_key`` of a solution that declares tunables; None for one without (or with broken ones)."""
    try:
        return config_key(solution) if solution_tunables(solution) else None
    except TunableError:
        return None


def apply(solution: Solution, changes: dict[str, Any], name: str | None = None) -> Solution:
    """A copy of ``solution`` with the given tunables set; every value must be one of its options."""
    ts = {t.key: t for t in solution_tunables(solution)}
    unknown = set(changes) - set(ts)
    if unknown:
        raise TunableError(f"no tunables named {sorted(unknown)}; the solution declares {sorted(ts)}")
    per_file: dict[str, list[tuple[Tunable, Any]]] = {}
    for k, v in changes.items():
        t = ts[k]
        if v not in t.options:
            raise TunableError(f"{t.file}:{t.line}: {v!r} is not among the options {list(t.options)} of {k}")
        per_file.setdefault(t.file, []).append((t, v))
    sources = []
    for src in solution.sources:
        content = src.content
        if src.path in per_file:
            lines = content.split("\n")
            for t, v in per_file[src.path]:
                a, b = t.span
                ln = lines[t.line - 1]
                lines[t.line - 1] = ln[:a] + repr(v) + ln[b:]
            content = "\n".join(lines)
        sources.append(SourceFile(path=src.path, content=content))  # re-validates: python must parse
    data = solution.model_dump(mode="json", exclude_unset=True)
    data["sources"] = [s.model_dump() for s in sources]
    if name:
        data["name"] = name
    return Solution.model_validate(data)


def space_size(tunables: list[Tunable]) -> int:
    n = 1
    for t in tunables:
        n *= len(t.options)
    return n
