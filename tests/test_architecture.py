"""The import rules of docs/architecture.md, checked on the code as it is.

* no import cycles among the modules of ``bot/`` and ``harness/``: every ``import`` statement counts,
  at module level or inside a function or an ``if TYPE_CHECKING:`` block (a lazy import that closes a
  cycle is still a cycle). Plugin discovery (``importlib.import_module`` over a package's modules)
  counts where it runs while a module is imported (a top-level call of a discovering function): that
  module then imports every discovered one; discovery called later, from a function, is not an edge;
* the harness imports nothing from the bot, not even lazily: the bot's ``kbot`` subcommands come in
  through the ``kbot.commands`` entry points;
* no module imports another module's private names (``from x import _y``, ``x._y``);
* the entry points pyproject.toml declares resolve, and the installed metadata knows them;
* the names the workflows spell in YAML are the ones ``bot.names`` defines;
* docs/architecture.md names every room and module of ``bot/``, and every path it names exists.
"""

from __future__ import annotations

import ast
import re
import tomllib
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("bot", "harness")


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if MODULES[module].name != "__init__.py":
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _ours(name: str) -> str | None:
    """The module of ours that ``name`` (a dotted import target) is, or is inside; None if foreign."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> list[tuple[int, str, list[str]]]:
    """(line, imported module, names taken from it) for every import statement of ``module``."""
    out = []
    for node in ast.walk(TREES[module]):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node)
            for a in node.names:
                full = f"{base}.{a.name}"
                # ``from pkg import submodule`` imports the submodule; ``from mod import name`` the module.
                out.append((node.lineno, full, []) if full in MODULES else (node.lineno, base, [a.name]))
    return out


# The functions that import every module of a package (plugin discovery), and the package each walks.
DISCOVERY = {("harness.operators", "register_all"): "harness.operators",
             ("bot.agents.catalog", "_load_providers"): "bot.agents.providers",
             ("bot.commands.spec", "specs"): "bot.commands"}


def _discoverers() -> set[tuple[str, str]]:
    """(module, function) for every function of ours whose body walks a package with ``iter_modules``."""
    found = set()
    for m, tree in TREES.items():
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and any(
                    isinstance(c, ast.Attribute) and c.attr == "iter_modules" for c in ast.walk(fn)):
                found.add((m, fn.name))
    return found


def _discovered_at_import(module: str) -> set[str]:
    """The modules ``module`` imports through discovery while it is itself imported: a discovering
    function called at its top level (``operators.register_all()`` in harness/inputs.py). Such a call is
    an import of every discovered module, so a discovered module that imports ``module`` back, even
    lazily, closes a cycle."""
    bound: dict[str, str] = {}  # local name -> our module (or "module.function") it is bound to
    for _, target, names in _imports(module):
        t = _ours(target)
        if t is not None:
            bound[t.rpartition(".")[2]] = t
            bound.update({n: f"{t}.{n}" for n in names})
    out: set[str] = set()
    for stmt in TREES[module].body:  # top level only: a call inside a function runs later
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            continue
        f = stmt.value.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in bound:
            key = (bound[f.value.id], f.attr)
        elif isinstance(f, ast.Name) and f.id in bound:
            key = tuple(bound[f.id].rsplit(".", 1))
        else:
            continue
        if key in DISCOVERY:
            out |= {m for m in MODULES if m.startswith(DISCOVERY[key] + ".")}
    return out


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for _, target, _ in _imports(m):
            t = _ours(target)
            if t is not None and t != m:
                graph[m].add(t)
        graph[m] |= _discovered_at_import(m) - {m}
    return graph


def test_every_discovery_is_known():
    assert _discoverers() == set(DISCOVERY), "a function walks a package with iter_modules: add it to DISCOVERY"
    # inputs.py discovers the operators when it is imported: that is an edge to each operator module
    assert "harness.operators.moe" in _graph()["harness.inputs"]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_graph_sees_lazy_imports():
    # The rule is only as good as the graph: a function-level import must be an edge.
    assert "bot.review.publish" in _graph()["bot.intake.events"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles (every import statement counts, lazy ones too):\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


def test_the_harness_never_imports_the_bot():
    bad = []
    for m in MODULES:
        if not m.startswith("harness"):
            continue
        for line, target, _ in _imports(m):
            if target == "bot" or target.startswith("bot."):
                bad.append(f"{MODULES[m].relative_to(REPO)}:{line}: imports {target}")
        for node in ast.walk(TREES[m]):  # importlib.import_module("bot....") / __import__("bot...")
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                arg = node.args[0].value
                if fn in ("import_module", "__import__") and isinstance(arg, str) and arg.split(".")[0] == "bot":
                    bad.append(f"{MODULES[m].relative_to(REPO)}:{node.lineno}: imports {arg} dynamically")
    assert not bad, "the harness must run alone on a GPU runner:\n" + "\n".join(bad)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_private_names_across_modules():
    bad = []
    for m in MODULES:
        where = MODULES[m].relative_to(REPO)
        aliases: dict[str, str] = {}  # local name -> our module it is bound to
        for line, target, names in _imports(m):
            t = _ours(target)
            if t is None or t == m:
                continue
            bad += [f"{where}:{line}: imports {t}.{n}" for n in names if _private(n)]
        for node in ast.walk(TREES[m]):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if _ours(a.name) == a.name and a.asname:
                        aliases[a.asname] = a.name
                    elif not a.asname and a.name.split(".")[0] in MODULES:  # `import bot.x.y` binds `bot`
                        aliases[a.name.split(".")[0]] = a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(m, node)
                for a in node.names:
                    if f"{base}.{a.name}" in MODULES:
                        aliases[a.asname or a.name] = f"{base}.{a.name}"
        for node in ast.walk(TREES[m]):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            chain, root = [], node.value  # `a.b.c._x`: the module `a.b.c` names, through any alias of `a`
            while isinstance(root, ast.Attribute):
                chain.insert(0, root.attr)
                root = root.value
            if not (isinstance(root, ast.Name) and root.id in aliases):
                continue
            owner = ".".join([aliases[root.id], *chain])
            if owner in MODULES and owner != m:
                bad.append(f"{where}:{node.lineno}: uses {owner}.{node.attr}")
    assert not bad, "private names used outside their module (make them public or move the code):\n" + "\n".join(bad)


def _declared_entry_points() -> dict[str, dict[str, str]]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    return data["project"].get("entry-points", {})


def test_declared_entry_points_resolve_and_are_installed():
    declared = _declared_entry_points()
    assert "kbot.commands" in declared, "the bot's kbot subcommands must be registered as entry points"
    for group, table in declared.items():
        for name, value in table.items():
            module, _, attr = value.partition(":")
            assert callable(getattr(import_module(module), attr)), f"{group}:{name} = {value} is not callable"
        installed = {ep.name: ep.value for ep in entry_points(group=group)}
        missing = {n: v for n, v in table.items() if installed.get(n) != v}
        assert not missing, (f"entry points {group} {missing} are declared in pyproject.toml but not installed: "
                             "the installed metadata is stale; run `pip install -e .` (or scripts/setup.sh)")


def test_workflows_spell_the_names_of_bot_names():
    from bot import names
    from bot.review.results import BENCH_SIDECAR

    labels = {names.BENCH_LABEL, names.PROFILE_LABEL, names.CANDIDATE_LABEL, names.STOPPED_LABEL, names.KILL_SWITCH_LABEL}
    for wf in sorted((REPO / ".github" / "workflows").glob("*.yml")):
        text = wf.read_text()
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        for label in re.findall(r"'(kbot:[a-z_-]+)'", code):
            assert label in labels, f"{wf.name}: label {label!r} is not one of bot.names"
        for prefix in re.findall(r"startsWith\([^,]+,\s*'([^']*)'\)", code):
            assert prefix == names.BRANCH_PREFIX, f"{wf.name}: branch prefix {prefix!r} is not bot.names.BRANCH_PREFIX"
        for artifact in re.findall(r"(?:name|pattern):\s*([A-Za-z0-9_-]+?-)(?:\$\{\{|\*)", code):
            assert artifact in (names.RESULTS_ARTIFACT_PREFIX, names.CALLS_ARTIFACT_PREFIX), f"{wf.name}: artifact prefix {artifact!r}"
        for module in re.findall(r"python3? -m ((?:bot|harness)\.[\w.]*)", code):
            assert _ours(module) == module, f"{wf.name}: runs {module}, which is not a module of this repository"
    bench = (REPO / names.BENCH_WORKFLOW).read_text()
    assert f"'{names.BENCH_LABEL}'" in bench and f"'{names.PROFILE_LABEL}'" in bench
    # the bench's jobs are the reusable workflow its one job calls (tests/workflows/test_reusable_workflows.py)
    (called,) = re.findall(r"^\s+uses: \./(\.github/workflows/[\w.-]+\.yml)", bench, flags=re.M)
    jobs = (REPO / called).read_text()
    assert f"'{names.BENCH_LABEL}'" in jobs and f"'{names.PROFILE_LABEL}'" in jobs
    assert re.findall(r'"\$out/([\w.-]+\.json)"', jobs) == [BENCH_SIDECAR]  # the sidecar the bot reads


ARCHITECTURE = REPO / "docs" / "architecture.md"


def _plugin(module: str) -> bool:
    """A module found by discovery, which the page need not name: a chat command (``SPEC`` at module
    level in ``bot/commands/``) or an LLM provider (``bot/agents/providers/``)."""
    if module.startswith("bot.agents.providers."):
        return True
    return module.startswith("bot.commands.") and any(
        isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SPEC" for t in n.targets)
        for n in TREES[module].body)


def test_plugins_are_found_without_the_page():
    assert _plugin("bot.commands.help") and _plugin("bot.agents.providers.offline")
    assert not _plugin("bot.commands.dispatch") and not _plugin("bot.forge.local")


def test_the_architecture_page_names_every_room_and_module():
    text = ARCHITECTURE.read_text()
    missing = []
    for m, path in MODULES.items():
        if not m.startswith("bot.") or path.name == "__init__.py" or _plugin(m):
            continue
        rel = path.relative_to(REPO / "bot")
        room = rel.parts[0] if len(rel.parts) > 1 else None
        # a room is named as bot/<room>/, a module by its file name inside its room's row
        if room and f"bot/{room}/" not in text:
            missing.append(f"bot/{room}/")
        if path.stem not in text:
            missing.append(str(path.relative_to(REPO)))
    assert not missing, f"docs/architecture.md does not mention: {sorted(set(missing))}"


def test_every_path_the_architecture_page_names_exists():
    text = ARCHITECTURE.read_text()
    paths = set(re.findall(r"`((?:bot|harness|skills|definitions|tests|docs|scripts|\.github)/[^`\s<>*]*)`", text))
    assert paths, "the page names no paths"
    gone = sorted(p for p in paths if not (REPO / p.rstrip("/")).exists())
    assert not gone, f"docs/architecture.md names paths that do not exist: {gone}"


@pytest.mark.parametrize("room", sorted({p.relative_to(REPO / "bot").parts[0] for p in (REPO / "bot").glob("*/*.py")}))
def test_every_room_describes_itself(room):
    init = REPO / "bot" / room / "__init__.py"
    assert init.is_file(), f"bot/{room}/ has no __init__.py"
    assert ast.get_docstring(ast.parse(init.read_text())), f"bot/{room}/__init__.py says nothing about the room"
