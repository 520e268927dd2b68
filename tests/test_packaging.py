"""kbot as a package: what pyproject.toml declares matches the code, and the wheel works installed.

* every package folder of ``harness/`` and ``bot/`` is listed, and every mapped data folder exists;
* the distributions declared (core and the ``bot`` and ``gpu`` extras) are exactly those the code
  imports; every ``dev`` entry is imported by the tests, or its command or pytest plugin is used;
* the wheel, built from the committed files without a warning, holds every shipped file, installs into a
  fresh virtualenv offline (the dependencies come from this environment, never the network), and from
  an empty folder outside any repository ``kbot definitions list`` lists our definitions, ``kbot eval``
  of the shipped rmsnorm kernel PASSES, and ``kbot report --html`` builds.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
CODE = ("harness", "bot")
# Import names whose distribution may not be installed here (packages_distributions() knows the rest).
NOT_INSTALLED_HERE = {"pynvml": "nvidia-ml-py"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _dist_name(req: str) -> str:
    return _norm(re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0])


def _imports(folders: tuple[str, ...]) -> dict[str, str]:
    """Top-level import name -> one file importing it, for every import statement (and import_module of
    a literal) in ``folders``, minus the standard library and our own packages."""
    out: dict[str, str] = {}
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            if "corpus" in path.parts:  # the guard's hostile test inputs are data, not our imports
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
                      and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                    names = [node.args[0].value]
                for n in names:
                    top = n.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in (*CODE, "tests", "__future__"):
                        out.setdefault(top, str(path.relative_to(REPO)))
    return out


@functools.lru_cache(maxsize=1)
def _providers() -> dict[str, list[str]]:
    return metadata.packages_distributions()


def _distribution_of(module: str) -> str:
    dists = _providers().get(module) or ([NOT_INSTALLED_HERE[module]] if module in NOT_INSTALLED_HERE else [])
    assert dists, f"import {module}: no installed distribution provides it (install it, or name it in NOT_INSTALLED_HERE)"
    return _norm(dists[0])


def test_every_code_package_is_listed_and_every_data_folder_exists():
    listed = set(SETUPTOOLS["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for c in CODE for p in (REPO / c).rglob("__init__.py")}
    assert found - listed == set(), "add these packages to [tool.setuptools] packages in pyproject.toml"
    assert {p for p in listed if p.split(".")[0] in CODE} - found == set(), "listed packages with no folder"
    for package, folder in SETUPTOOLS["package-dir"].items():
        assert package in listed and (REPO / folder).is_dir(), (package, folder)


def test_declared_dependencies_are_the_imported_ones():
    project = PYPROJECT["project"]
    declared = {_dist_name(r) for r in project["dependencies"]}
    for extra in ("bot", "gpu"):
        declared |= {_dist_name(r) for r in project["optional-dependencies"][extra]}
    imported = {}
    for module, where in _imports(CODE).items():
        imported.setdefault(_distribution_of(module), where)
    missing = {d: w for d, w in imported.items() if d not in declared}
    assert not missing, f"imported but not declared in pyproject.toml: {missing}"
    unused = declared - set(imported)
    assert not unused, f"declared in pyproject.toml (core, bot, gpu) but imported by nothing in harness/ or bot/: {sorted(unused)}"


def test_every_dev_dependency_is_used():
    """A dev tool is used when the tests import it, or the tests or scripts run its command, or it is
    a pytest plugin (pytest-timeout: the `timeout` setting)."""
    tested = {_norm(_providers()[m][0]) for m in _imports(("tests",)) if m in _providers()}  # others: the tests' own helpers
    texts = "\n".join(p.read_text(errors="replace") for d in ("tests", "scripts") for p in (REPO / d).rglob("*")
                      if p.is_file() and p.suffix in (".py", ".sh") and "corpus" not in p.parts)
    for req in PYPROJECT["project"]["optional-dependencies"]["dev"]:
        name = _dist_name(req)
        if name in tested:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            pytest.fail(f"{name} (dev extra) is not installed: pip install -e '.[dev]'")
        commands = {ep.name for ep in dist.entry_points if ep.group == "console_scripts"}
        commands |= {Path(str(f)).name for f in dist.files or [] if str(f).startswith("../../../bin/")}
        plugin = any(ep.group == "pytest11" for ep in dist.entry_points)
        used = plugin or any(re.search(rf"[\"'/ ]{re.escape(c)}[\"' ]", texts) for c in commands)
        assert used, f"{name} (dev extra): nothing imports it and no test or script runs {sorted(commands)}"


# ------------------------------------------------------------------------------------------ the wheel


def _committed_copy(dest: Path) -> Path:
    """The committed files of this checkout (what a clone or `pip install <git url>` builds from)."""
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> tuple[Path, str]:
    src = _committed_copy(tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                        "--disable-pip-version-check", "-w", str(out), str(src)], capture_output=True, text=True, timeout=300)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log
    (whl,) = out.glob("kbot-*.whl")
    return whl, log


def test_the_build_warns_of_nothing(wheel):
    _, log = wheel
    assert not re.search(r"warn|deprecat", log, re.IGNORECASE), log


def test_the_wheel_holds_every_shipped_file(wheel):
    whl, _ = wheel
    names = set(zipfile.ZipFile(whl).namelist())
    files = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    mapped = {folder: package.replace(".", "/") for package, folder in SETUPTOOLS["package-dir"].items()}
    want = set()
    for rel in files:
        top = rel.split("/")[0]
        if top in mapped:
            want.add(mapped[top] + rel[len(top):])
        elif top in CODE and not rel.endswith(".md"):
            want.add(rel)
    assert want - names == set(), "committed files missing from the wheel (pyproject.toml package-data)"
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)


def _deps_folder(dest: Path) -> tuple[Path, list[str]]:
    """This environment's installed distributions without kbot itself (its editable install), as a folder
    the new virtualenv's .pth file names, so nothing is downloaded (torch included). Hard links where the
    filesystem allows (the sandboxed workers may read them: they are under a folder on sys.path), else
    symbolic links, which lead outside every readable folder: then the evaluation runs unsandboxed."""
    import sysconfig

    site = Path(sysconfig.get_paths()["purelib"])
    dest.mkdir()
    entries = [e for e in site.iterdir() if not e.name.lower().startswith(("kbot-", "__editable__")) and e.suffix != ".pth"]
    r = subprocess.run(["cp", "-al", *map(str, entries), str(dest)], capture_output=True, timeout=300)
    if r.returncode == 0:
        return dest, []
    shutil.rmtree(dest)
    dest.mkdir()
    for e in entries:
        (dest / e.name).symlink_to(e)
    return dest, ["--sandbox", "off"]


@pytest.mark.slow
def test_the_wheel_works_installed_from_an_empty_folder(wheel, tmp_path):
    whl, _ = wheel
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    deps, sandbox = _deps_folder(tmp_path / "deps")
    (Path(purelib) / "kbot_test_deps.pth").write_text(f"{deps}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KBOT_REPO", "VIRTUAL_ENV")}
    env["HOME"] = str(tmp_path)  # nothing of the user's configuration or caches
    # This environment's pip runs the install into the new one (`--python`), offline.
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-index", "--disable-pip-version-check",
                        f"{whl}[bot]"], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0 and "Successfully installed kbot" in r.stdout, r.stdout + r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()

    def kbot(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
        return subprocess.run([str(venv / "bin" / "kbot"), *args], cwd=empty, env=env, capture_output=True, text=True, timeout=timeout)

    r = subprocess.run([str(py), "-c", "import harness, bot; print(harness.__file__, bot.__file__)"], cwd=empty, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.count(purelib) == 2, f"kbot is not imported from the new environment: {r.stdout}{r.stderr}"

    r = kbot("definitions", "list", "--json")
    assert r.returncode == 0, r.stderr
    rows = {row["name"]: row for row in json.loads(r.stdout)}
    ours = sorted(p.parent.name for p in (REPO / "definitions").glob("*/definition.json"))
    assert sorted(rows) == ours and all(row["from"] == "kbot" for row in rows.values())
    assert all(purelib in row["path"] for row in rows.values()), rows

    # The CPU-sized workloads (the full set runs minutes in Triton's interpreter), named as in the checkout.
    r = kbot("eval", "kernels/rmsnorm_h4096/triton_rows/solution.json", "-d", "rmsnorm_h4096", "--device", "cpu",
             "-w", "definitions/rmsnorm_h4096/workloads.small.jsonl", "--out", str(tmp_path / "run"), "--timeout", "120", *sandbox)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["workloads"] and all(w["status"] == "PASSED" for w in report["workloads"])
    assert purelib in report["config"]["inputs"]["definition_path"]

    assert not (empty / ".kbot").exists(), "the run was archived in the empty folder although --out was given"

    # The templates of the reviews and of the HTML report load from the installed package.
    probe = ("from bot.review.markdown import TEMPLATE_ENV; from bot.site.build import TEMPLATES; "
             "TEMPLATE_ENV.get_template('review.md.j2'); TEMPLATE_ENV.get_template('leaderboard.md.j2'); "
             "print(sorted(p.name for p in TEMPLATES.glob('*.j2')))")
    r = subprocess.run([str(py), "-c", probe], cwd=empty, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "index.html.j2" in r.stdout and "pr.html.j2" in r.stdout, r.stdout + r.stderr

    # The HTML report builds from the empty folder (no workspace yet: a page that says how to start one).
    r = kbot("report", "--html", str(tmp_path / "site"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    page = (tmp_path / "site" / "index.html").read_text()
    assert "kbot optimize" in page and "<html" in page.lower()
    assert not (empty / ".kbot").exists(), "building the report created a workspace in the empty folder"

    # Outside a repository, a command that needs one says what is missing and where it looked.
    r = kbot("--repo", str(empty), "definitions", "list")
    assert r.returncode == 2 and "no kbot.toml" in r.stderr and str(empty) in r.stderr, r.stderr
