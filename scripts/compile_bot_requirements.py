"""Regenerate the bot's hashed requirements from pyproject.toml (the one home of the ranges).

    python scripts/compile_bot_requirements.py            # rewrite requirements/bot.in and bot.txt
    python scripts/compile_bot_requirements.py --upgrade  # ... moving every pin to the newest release
    python scripts/compile_bot_requirements.py --check    # exit 1 if either file is stale (no network)

The trusted workflows (kbot-report.yml, kbot-command.yml) install requirements/bot.txt with
``pip install --require-hashes`` and nothing else. Its input, requirements/bot.in, is written here: the
``bot`` extra of pyproject.toml plus the core dependencies the bot's jobs import (``JOB_CORE``; the rest
of the core, torch and triton above all, is the harness's and never runs in those jobs), each with its
range from pyproject.toml. pip-compile (pip-tools, in the dev extra) then pins them and every
transitive dependency, with the sha256 of every file of each pinned release, so the same file installs
on any Python the runners have; after compiling, a dry-run install for each of ``PYTHONS`` proves that no
dependency that only some Python version needs is missing.

pip's configuration of the machine running this is ignored (its config files, and the ``PIP_*`` variables
that add sources or constraints): a local find-links folder or a constraints file must not leak hashes,
caps or a path into a file that every runner installs; only the public index is read.
tests/workflows/test_workflows_lint.py runs ``--check``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMAND = "python scripts/compile_bot_requirements.py"
# The core dependencies (pyproject's [project.dependencies]) that the bot imports when a workflow runs it
# (python -m bot.cli.github_bot, with its commands, campaign and agents): tests/workflows checks this
# against the imports reachable from those modules.
JOB_CORE = ("pydantic", "click", "jinja2", "markupsafe", "pyyaml")
# The Pythons the runners may bring (ubuntu-latest's python3, kbot's requires-python floor and the next).
PYTHONS = ("3.11", "3.12", "3.13")
INDEX = "https://pypi.org/simple"
# pip settings by environment that would add another source of files or cap versions (see above).
LOCAL_PIP = ("PIP_FIND_LINKS", "PIP_CONSTRAINT", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX", "PIP_REQUIREMENT")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(req: str) -> str:
    return canonical(re.split(r"[<>=!~ ;\[]", req.strip(), maxsplit=1)[0])


def bot_input(root: Path = REPO) -> str:
    """The text of requirements/bot.in for the pyproject.toml under ``root``."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    core = {requirement_name(r): r for r in project["dependencies"]}
    missing = [n for n in JOB_CORE if n not in core]
    if missing:
        raise SystemExit(f"JOB_CORE names {missing}, which are not core dependencies in {root / 'pyproject.toml'}")
    lines = [
        "# Generated from pyproject.toml by `" + COMMAND + "`; do not edit (edit pyproject.toml, then run it).",
        "# The bot's jobs' dependencies: core dependencies the bot imports, then the `bot` extra.",
        *(core[n] for n in JOB_CORE),
        *project["optional-dependencies"]["bot"],
    ]
    return "\n".join(lines) + "\n"


def pins(text: str) -> dict[str, str]:
    """name -> version of each ``name==version`` line of a compiled requirements file."""
    return {canonical(m[1]): m[2] for m in re.finditer(r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)", text, flags=re.M)}


def check(root: Path = REPO) -> list[str]:
    """Why requirements/bot.in or bot.txt under ``root`` do not match its pyproject.toml (empty: current)."""
    from packaging.requirements import Requirement

    problems = []
    folder = root / "requirements"
    if not (folder / "bot.in").is_file() or (folder / "bot.in").read_text() != bot_input(root):
        problems.append("requirements/bot.in is not what pyproject.toml gives")
    pinned = pins((folder / "bot.txt").read_text()) if (folder / "bot.txt").is_file() else {}
    for line in bot_input(root).splitlines():
        if line.startswith("#"):
            continue
        req = Requirement(line)
        version = pinned.get(canonical(req.name))
        if version is None:
            problems.append(f"requirements/bot.txt does not pin {req.name}")
        elif not req.specifier.contains(version, prereleases=True):
            problems.append(f"requirements/bot.txt pins {req.name}=={version}, outside {req.specifier}")
    return problems


def compile_(upgrade: bool) -> None:
    folder = REPO / "requirements"
    (folder / "bot.in").write_text(bot_input())
    env = {k: v for k, v in os.environ.items() if k not in LOCAL_PIP}
    env.update(PIP_CONFIG_FILE=os.devnull, CUSTOM_COMPILE_COMMAND=COMMAND)
    # pip-tools' command beside this Python (the dev extra installs it into the venv), else on PATH
    pip_compile = shutil.which("pip-compile", path=str(Path(sys.executable).parent)) or shutil.which("pip-compile")
    if pip_compile is None:
        raise SystemExit("pip-compile is needed: pip install pip-tools (it is in the dev extra)")
    cmd = [pip_compile, "--quiet", "--generate-hashes", "--strip-extras",
           "--no-emit-index-url", "--no-emit-find-links", "--index-url", INDEX, "--output-file", "requirements/bot.txt", "requirements/bot.in"]
    if upgrade:
        cmd.insert(1, "--upgrade")
    if subprocess.run(cmd, cwd=REPO, env=env).returncode != 0:
        raise SystemExit("pip-compile failed (its message is above); requirements/bot.txt may be half-written: git diff it")
    for python in PYTHONS:
        with tempfile.TemporaryDirectory() as target:
            r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
                                "--require-hashes", "--only-binary=:all:", "--python-version", python, "--target", target,
                                "--index-url", INDEX, "-r", "requirements/bot.txt"],
                               cwd=REPO, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"requirements/bot.txt does not install on Python {python}:\n{r.stderr.strip()}")
        print(f"requirements/bot.txt installs with --require-hashes on Python {python}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only say whether the files match pyproject.toml")
    parser.add_argument("--upgrade", action="store_true", help="move every pin to the newest release allowed")
    parser.add_argument("--root", type=Path, default=REPO, help=argparse.SUPPRESS)  # --check of another checkout (tests)
    args = parser.parse_args()
    if args.check:
        problems = check(args.root)
        for p in problems:
            print(p, file=sys.stderr)
        if problems:
            print(f"run `{COMMAND}`", file=sys.stderr)
        raise SystemExit(1 if problems else 0)
    compile_(args.upgrade)


if __name__ == "__main__":
    main()
