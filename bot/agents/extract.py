"""Files out of free-form model output, and a Solution out of the files.

Accepted forms (first that yields files wins):
1. XML-ish tags: ``<file path="main.py"> ... </file>`` (the content may itself be fenced);
2. a JSON solution object (the whole reply, or a ```json block): a FlashInfer-Bench Solution with
   ``sources``, or ``{"files": {"main.py": "..."}}``;
3. fenced code blocks with a path: in the info string (```python main.py, ```python path=main.py,
   ```main.py), on the line just before the fence (``main.py:``, ``**main.py**``, ``### main.py``,
   `` `main.py` ``, ``File: main.py``) or as the block's first line (``# file: main.py``);
4. exactly one unnamed Python block: taken as the entry file.

Anything else raises ExtractionError with a message written for the model (the repair turn shows it).

A reply is model output, so it chooses code and nothing else: the build spec (the language, which
selects the guard policy, the target hardware and the entry point the guard checks) is the parent's,
or the default for a first kernel, and a reply's ``spec`` may only restate it (``dependencies`` aside);
no file of a reply may be JSON (``solution.json`` is the bot's, written from the validated Solution,
and a JSON file beside it would be benchmarked as a solution of its own); and the name, definition and
author are the caller's.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from pydantic import ValidationError

from harness.schema import Definition, Solution

from .base import AgentContext
from .tunables import TunableError, solution_tunables

PATH_RE = r"[A-Za-z0-9_][A-Za-z0-9_./-]*\.(?:py|cu|cuh|cpp|cc|c|h|hpp|txt)"
# The build spec of a first kernel (no parent): the agents' default, one home (the offline agent's seeds too).
DEFAULT_SPEC = {"language": "triton", "target_hardware": ["NVIDIA_H200"], "entry_point": "main.py::run"}
PINNED_SPEC = ("language", "target_hardware", "entry_point", "destination_passing_style")  # a reply cannot change these
TAG = re.compile(r"<file\s+path\s*=\s*[\"']([^\"']+)[\"']\s*>\n?(.*?)</file>", re.DOTALL)
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,}|~{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)(?P=ticks)[ \t]*$", re.DOTALL | re.MULTILINE)
BEFORE = re.compile(
    rf"(?:^|\n)[ \t]*(?:#+[ \t]*|\*\*|`|File:[ \t]*|file:[ \t]*|Path:[ \t]*|path:[ \t]*)?(?:`)?(?P<path>{PATH_RE})(?:`)?(?:\*\*)?[ \t]*:?[ \t]*\n?[ \t]*$"
)
FIRST_LINE = re.compile(rf"^[ \t]*(?:#|//)[ \t]*(?:file|path)?[ \t]*:?[ \t]*(?P<path>{PATH_RE})[ \t]*$", re.IGNORECASE)
RATIONALE = re.compile(r"<rationale>(.*?)</rationale>", re.DOTALL)


class ExtractionError(ValueError):
    pass


def _strip_fence(text: str) -> str:
    m = FENCE.search(text)
    if m and not text[: m.start()].strip() and not text[m.end():].strip():
        return m.group("body")
    return text


def _from_tags(text: str) -> dict[str, str]:
    return {p.strip(): _strip_fence(body).rstrip() + "\n" for p, body in TAG.findall(text)}


def _from_json(text: str) -> tuple[dict[str, str], dict[str, Any] | None]:
    candidates = [text.strip()]
    candidates += [m.group("body") for m in FENCE.finditer(text) if m.group("info").strip().lower() in ("json", "")]
    for c in candidates:
        if not c.lstrip().startswith("{"):
            continue
        try:
            obj = json.loads(c)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("sources"), list):
            files = {}
            for s in obj["sources"]:
                if not isinstance(s, dict) or not isinstance(s.get("path"), str) or not isinstance(s.get("content"), str):
                    raise ExtractionError("JSON solution: every entry of 'sources' needs a string 'path' and 'content'")
                files[s["path"]] = s["content"]
            return files, obj
        if isinstance(obj, dict) and isinstance(obj.get("files"), dict):
            if not all(isinstance(v, str) for v in obj["files"].values()):
                raise ExtractionError("JSON solution: 'files' must map paths to file contents (strings)")
            return dict(obj["files"]), obj
    return {}, None


def _from_fences(text: str, entry_file: str) -> dict[str, str]:
    files: dict[str, str] = {}
    unnamed: list[str] = []
    for m in FENCE.finditer(text):
        info = m.group("info").strip()
        body = m.group("body")
        path = None
        words = info.replace("path=", " ").replace("file=", " ").replace('"', " ").split()
        for w in words:
            if re.fullmatch(PATH_RE, w):
                path = w
        if path is None:
            before = text[: m.start()].rstrip("\n").split("\n")[-1] if m.start() else ""
            bm = BEFORE.search("\n" + before)
            if bm and before.strip():
                path = bm.group("path")
        if path is None:
            first, _, rest = body.partition("\n")
            fm = FIRST_LINE.match(first)
            if fm:
                path, body = fm.group("path"), rest
        lang = words[0].lower() if words else ""
        if path:
            files[path] = body
        elif lang in ("python", "py", "") and "def " in body:
            unnamed.append(body)
    if not files and len(unnamed) == 1:
        files[entry_file] = unnamed[0]
    elif not files and len(unnamed) > 1:
        raise ExtractionError(
            f"found {len(unnamed)} code blocks without file paths; put each file in <file path=\"...\"> tags"
        )
    return files


def extract_files(text: str, entry_file: str = "main.py") -> tuple[dict[str, str], dict[str, Any] | None]:
    """(path -> content, the JSON object when the reply was a JSON solution)."""
    if not text or not text.strip():
        raise ExtractionError("the reply was empty")
    files = _from_tags(text)
    if files:
        return files, None
    files, obj = _from_json(text)
    if files:
        return files, obj
    files = _from_fences(text, entry_file)
    if files:
        return files, None
    raise ExtractionError(
        "no files found in the reply; give every file as <file path=\"main.py\">...</file> "
        "(or a fenced code block whose info string names the path)"
    )


def rationale_of(text: str) -> str:
    m = RATIONALE.search(text)
    if m:
        return m.group(1).strip()[:2000]
    outside = TAG.sub("", FENCE.sub("", text)).strip()
    return re.sub(r"\s+", " ", outside)[:1000]


def build_solution(text: str, ctx: AgentContext, name: str, author: str) -> tuple[Solution, str]:
    """A validated Solution from a model reply; ExtractionError says exactly what is wrong."""
    parent = ctx.parent
    spec: dict[str, Any] = parent.spec.model_dump(mode="json", exclude_none=True) if parent else dict(DEFAULT_SPEC)
    entry_file = spec["entry_point"].split("::", 1)[0]
    files, obj = extract_files(text, entry_file)
    if obj is not None and obj.get("spec") is not None:
        spec = _pinned_spec(spec, obj["spec"])
    for path in files:
        if path.strip().lower().endswith(".json"):
            raise ExtractionError(f"{path}: a solution has no JSON files (the bot writes solution.json itself); "
                                  "give only source files")
    sources = {s.path: s.content for s in parent.sources} if parent and ctx.mode.value != "initial" else {}
    # A reply may give only the files it changed; unchanged files of the parent are kept.
    sources.update(files)
    data = {
        "name": name,
        "definition": ctx.definition.name,
        "author": author,
        "description": rationale_of(text)[:500],
        "spec": spec,
        "sources": [{"path": p, "content": c} for p, c in sources.items()],
    }
    try:
        sol = Solution.model_validate(data)
    except ValidationError as e:
        msgs = []
        for err in e.errors()[:5]:
            loc = ".".join(str(x) for x in err["loc"])
            msgs.append(f"{loc}: {err['msg'].removeprefix('Value error, ')}")
        raise ExtractionError("the solution is not valid: " + "; ".join(msgs)) from None
    _check_entry(sol, ctx.definition)
    try:
        solution_tunables(sol)  # a wrong tunable mark is caught now, while the model can still fix it
    except TunableError as e:
        raise ExtractionError(f"bad tunable mark: {e}") from None
    return sol, rationale_of(text)


def _pinned_spec(spec: dict[str, Any], asked: Any) -> dict[str, Any]:
    """``spec`` with a reply's ``dependencies``; every pinned field must restate ``spec``'s value."""
    if not isinstance(asked, dict):
        raise ExtractionError("JSON solution: 'spec' must be an object (or left out: the build spec is fixed)")
    language = str(asked.get("language", spec.get("language"))).lower()
    for key in PINNED_SPEC:
        if key not in asked:
            continue
        mine = spec.get(key, True if key == "destination_passing_style" else None)
        theirs = language if key == "language" else asked[key]
        if theirs != mine:
            raise ExtractionError(f"spec.{key} is fixed for this kernel ({json.dumps(mine)}); the reply asked for "
                                  f"{json.dumps(theirs)[:80]}. Leave 'spec' out, or keep it as it is")
    unknown = sorted(set(asked) - set(PINNED_SPEC) - {"dependencies"})
    if unknown:
        raise ExtractionError(f"spec: unknown or fixed field(s) {unknown}; only 'dependencies' may be given")
    out = dict(spec)
    if "dependencies" in asked:
        out["dependencies"] = asked["dependencies"]
    return out


def _check_entry(sol: Solution, definition: Definition) -> None:
    if not sol.spec.entry_file.endswith(".py"):
        return
    tree = ast.parse(sol.source(sol.spec.entry_file))
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == sol.spec.entry_function), None)
    if fn is None:
        raise ExtractionError(f"{sol.spec.entry_file} does not define the entry function '{sol.spec.entry_function}' at top level")
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    missing = [n for n in definition.inputs if n not in params]
    if missing and fn.args.kwarg is None:
        raise ExtractionError(
            f"{sol.spec.entry_file}::{fn.name} must accept the definition's inputs by name; missing {missing} "
            f"(it has {params})"
        )
