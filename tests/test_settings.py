"""docs/settings.md is the one table of every setting: each environment variable the code reads or sets
(every os.environ / getenv / envvar= use with a literal name, and every KBOT_* / FIB_* name in the code),
each `vars.*` and `secrets.*` of the workflows and of `kbot init`'s templates, has a row; each row names
something the code, a workflow or a shipped file really uses."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TABLE = REPO / "docs" / "settings.md"
PREFIX = re.compile(r"^(KBOT|FIB)_[A-Z0-9_]+$")
ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]+$")
WORKFLOWS = [*(REPO / ".github" / "workflows").glob("*.yml"), *(REPO / "skills" / "init" / "workflows").glob("*.yml")]


def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def environment_names() -> dict[str, str]:
    """Name -> one file of harness/ or bot/ that reads or sets it."""
    found: dict[str, str] = {}
    for root in ("harness", "bot"):
        for path in sorted((REPO / root).rglob("*.py")):
            rel = str(path.relative_to(REPO))
            for node in ast.walk(ast.parse(path.read_text(), rel)):
                names: list[str | None] = []
                value = _literal(node)
                if value and PREFIX.match(value):
                    names.append(value)
                if isinstance(node, ast.Call):
                    func = node.func
                    attr = getattr(func, "attr", getattr(func, "id", ""))
                    owner = ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""
                    environ = "environ" in owner or owner == "env"
                    if node.args and (attr in ("getenv", "putenv") or (environ and attr in ("get", "pop", "setdefault"))):
                        names.append(_literal(node.args[0]))
                    names += [_literal(k.value) for k in node.keywords if k.arg == "envvar"]
                if isinstance(node, ast.Subscript) and "environ" in ast.unparse(node.value):
                    names.append(_literal(node.slice))
                if isinstance(node, ast.For) and isinstance(node.iter, ast.Tuple) and "environ" in ast.unparse(node):
                    names += [_literal(e) for e in node.iter.elts]  # for var in ("CUDA_HOME", "CUDA_PATH"): os.environ...
                for n in names:
                    if n and ENV_NAME.match(n):
                        found.setdefault(n, rel)
    return found


def workflow_names() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in WORKFLOWS:
        for m in re.finditer(r"\b(?:vars|secrets)\.([A-Z][A-Z0-9_]+)", path.read_text()):
            found.setdefault(m.group(1), str(path.relative_to(REPO)))
    return found


def table_rows() -> list[str]:
    rows = []
    for line in TABLE.read_text().splitlines():
        m = re.match(r"^\| `([^`]+)` \|", line)
        if m:
            rows.append(m.group(1))
    return rows


def test_every_environment_variable_and_workflow_setting_has_a_row():
    rows = set(table_rows())
    missing = {n: w for n, w in {**environment_names(), **workflow_names()}.items() if n not in rows}
    assert not missing, f"add these to docs/settings.md: {missing}"


def test_every_row_names_something_that_exists():
    rows = table_rows()
    assert len(rows) == len(set(rows)), "a setting with two rows"
    code = "\n".join(p.read_text() for root in ("harness", "bot") for p in (REPO / root).rglob("*.py"))
    flows = "\n".join(p.read_text() for p in WORKFLOWS)
    for name in rows:
        if name.startswith("--"):
            assert f'"{name}"' in code, name
        elif "/" in name or "." in name:  # a file: shipped, or the pattern of one
            assert any(REPO.glob(name.replace("<name>", "*").replace("<path>", "**/*"))) or name == "kbot.toml", name
        else:
            assert name in code or name in flows, f"{name}: nothing reads it"
