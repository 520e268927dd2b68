"""Where kbot's files are: what kbot ships, and what the repository it runs in holds.

**Shipped** (read-only, part of the installed package): ``skills/`` (guard policies, profiling rules,
roofline formulas, prompts, operator notes, seeds, review templates, the promotion and bot policies),
``definitions/`` (ours) and ``kernels/`` (our submission record, the rmsnorm example included). In a
source checkout these are the checkout's own folders; in a wheel, pyproject.toml maps the same folders
to ``kbot_data/<folder>/`` in site-packages, so each file has one home in the repository. Which of the
two this is follows from where ``harness/`` itself was imported from.

**The repository** (the adopter's): the folder named by ``--repo`` (which sets ``KBOT_REPO``) or by
``KBOT_REPO``, else the nearest folder at or above the working directory that holds ``kbot.toml``
(``kbot init`` writes it). There may be none: then only the shipped files are used. The repository's
``definitions/`` and ``kernels/`` come before ours (a name defined in both is the repository's), and a
file of its ``skills/`` replaces the shipped file at the same relative path (for example its own
``skills/guard/common.yaml`` or ``skills/prompts/system.md.j2``).

Everything here is looked up when it is asked for, not at import time, so ``--repo`` on the command
line applies to modules imported before it was parsed.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

MARKER = "kbot.toml"
REPO_ENV = "KBOT_REPO"
DATA_PACKAGE = "kbot_data"  # the wheel's home of the shipped folders (pyproject.toml [tool.setuptools.package-dir])
SHIPPED_FOLDERS = ("skills", "definitions", "kernels")
# The folder harness/ was imported from: a source checkout, or site-packages for an installed wheel. Worker
# processes get it on PYTHONPATH (harness/runner.py).
CODE_ROOT = Path(__file__).resolve().parents[1]


class PathsError(RuntimeError):
    """A file or folder kbot needs is not where it looked; the message names what and where."""


def _is_checkout(root: Path) -> bool:
    return (root / "pyproject.toml").is_file() and (root / "skills").is_dir() and (root / "harness").is_dir()


def shipped() -> Path:
    """The root of the shipped folders (it holds ``skills/``, ``definitions/``, ``kernels/``)."""
    if _is_checkout(CODE_ROOT):
        return CODE_ROOT
    data = CODE_ROOT / DATA_PACKAGE
    if (data / "skills").is_dir():
        return data
    raise PathsError(f"kbot's shipped files (skills/, definitions/, kernels/) are missing: looked in {CODE_ROOT} "
                     f"(a source checkout) and {data} (an installed wheel); reinstall kbot")


def source_checkout() -> Path | None:
    """The kbot checkout the code runs from, or None for an installed wheel."""
    return CODE_ROOT if _is_checkout(CODE_ROOT) else None


def check_repository(root: Path, source: str) -> Path:
    """``root`` resolved, or a PathsError saying why it is not a kbot repository. Only looks (a sandboxed
    worker may not read the marker); ``read_marker`` reads it."""
    p = Path(root).expanduser()
    if not p.is_dir():
        raise PathsError(f"{source} {p}: no such folder")
    if not (p / MARKER).is_file():
        raise PathsError(f"{source} {p}: not a kbot repository (no {MARKER} in it; `kbot init {p}` makes one)")
    return p.resolve()


def read_marker(repo: Path) -> dict:
    """The repository's ``kbot.toml`` as a table (the command line reads it once, to refuse a broken one)."""
    marker = repo / MARKER
    try:
        return tomllib.loads(marker.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise PathsError(f"{marker}: not valid TOML: {e}") from None


def repository(env: dict[str, str] | None = None, cwd: Path | None = None) -> Path | None:
    """The repository kbot runs in (see the module doc), or None when there is none."""
    env = os.environ if env is None else env
    if env.get(REPO_ENV):
        return check_repository(Path(env[REPO_ENV]), REPO_ENV)
    here = Path(cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / MARKER).is_file():
            return check_repository(folder, f"{MARKER} found at")
    return None


def require_repository() -> Path:
    """The repository, or a PathsError naming where it looked (for commands that write into one)."""
    repo = repository()
    if repo is None:
        here = Path.cwd().resolve()
        raise PathsError(f"not in a kbot repository: no {MARKER} in {here} or any folder above it, and "
                         f"{REPO_ENV} is not set; run `kbot init` in your repository, or pass --repo DIR")
    return repo


def roots() -> list[Path]:
    """The repository (when there is one) and the shipped root, in lookup order, without duplicates."""
    out: list[Path] = []
    for r in (repository(), shipped()):
        if r is not None and r.resolve() not in [o.resolve() for o in out]:
            out.append(r)
    return out


def folders(name: str) -> list[Path]:
    """``<root>/<name>`` for every root that has it (``definitions``, ``kernels``), in lookup order."""
    return [r / name for r in roots() if (r / name).is_dir()]


def definitions_dirs() -> list[Path]:
    return folders("definitions")


def definition_dir(name: str) -> Path | None:
    """The folder of the definition ``name`` (``<root>/definitions/<name>/definition.json``), first root first."""
    for d in definitions_dirs():
        if (d / name / "definition.json").is_file():
            return d / name
    return None


def definition_names() -> list[str]:
    """Every definition name the roots hold (the repository's and ours), sorted."""
    return sorted({p.parent.name for d in definitions_dirs() for p in d.glob("*/definition.json")})


def skill(rel: str) -> Path:
    """``skills/<rel>``: the repository's file when it has one, else the shipped one (which may not exist:
    the caller reports a missing file with its own words)."""
    for r in roots():
        p = r / "skills" / rel
        if p.exists():
            return p
    return shipped() / "skills" / rel


def skill_dirs(rel: str) -> list[Path]:
    """The folders ``skills/<rel>`` that exist, the repository's first (for template search paths)."""
    return [r / "skills" / rel for r in roots() if (r / "skills" / rel).is_dir()]


def skill_files(rel: str, pattern: str) -> list[Path]:
    """The files matching ``pattern`` in ``skills/<rel>`` of every root, one per file name (the repository's
    replaces ours), sorted by name."""
    by_name: dict[str, Path] = {}
    for d in reversed(skill_dirs(rel)):
        for p in d.glob(pattern):
            if p.is_file():
                by_name[p.name] = p
    return [by_name[k] for k in sorted(by_name)]


def find_file(arg: str | Path, what: str = "file") -> Path:
    """A path given on the command line: as given (relative to the working directory), else relative to
    the repository, else to the shipped root (so ``kernels/rmsnorm_h4096/triton_rows/solution.json`` names
    our example from any folder). A PathsError lists every place it looked."""
    p = Path(arg).expanduser()
    if p.exists() or p.is_absolute():
        return p
    looked = [p.resolve()]
    for r in roots():
        q = r / p
        if q.exists():
            return q
        looked.append(q)
    raise PathsError(f"{what} {arg}: not found (looked at " + ", ".join(str(x) for x in looked) + ")")


def state_dir() -> Path:
    """``.kbot/`` (run archive, workspace): in the repository when there is one, else in the working directory."""
    repo = repository()
    return (repo if repo is not None else Path.cwd()) / ".kbot"
