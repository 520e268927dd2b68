"""Keep a definition's copies of its reference (and of its baselines' sources) in step with the files.

``reference.py`` is the one file people edit; ``definition.json`` carries it as the ``reference``
string (what other tools and the official format read) and ``reference_solution.json`` carries it as
the source of a python Solution (the reference evaluated as a solution of itself). Likewise each
``baselines/<name>/solution.json`` embeds its source files: the one beside it, or else the
definition's own file of that name (a baseline that imports ``reference.py`` ships the current one). Run
``python -m harness.operators.sync`` after editing a reference or a baseline; ``--check`` only
reports drift.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..paths import shipped
from . import CONTEST_DEFINITIONS


def reference_solution(name: str, source: str) -> dict:
    return {
        "name": f"{name}_kbot_reference",
        "definition": name,
        "author": "kbot-team",
        "description": f"kbot's own reference (definitions/{name}/reference.py) as a plain-torch solution of its own "
        "definition: the timing baseline and the check that the harness runs the operator end to end.",
        "spec": {"language": "python", "target_hardware": ["NVIDIA_H200", "cpu"], "entry_point": "reference.py::run",
                 "dependencies": ["torch"], "destination_passing_style": False},
        "sources": [{"path": "reference.py", "content": source}],
    }


def _baseline_source(here: Path, definition_folder: Path, path: str) -> Path:
    for p in (here / path, definition_folder / path):
        if p.is_file():
            return p
    raise FileNotFoundError(f"{here / 'solution.json'} lists {path}, which is neither beside it nor in {definition_folder}")


def sync(name: str, root: Path | None = None, write: bool = True) -> list[str]:
    """Files that differ from ``reference.py`` (rewritten when ``write``); ``root``: our definitions/."""
    folder = (root or shipped() / "definitions") / name
    source = (folder / "reference.py").read_text()
    drift = []
    dpath = folder / "definition.json"
    d = json.loads(dpath.read_text())
    if d.get("reference") != source:
        drift.append(str(dpath))
        d["reference"] = source
        if write:
            dpath.write_text(json.dumps(d, indent=2) + "\n")
    spath = folder / "reference_solution.json"
    sol = reference_solution(name, source)
    if not spath.is_file() or json.loads(spath.read_text()) != sol:
        drift.append(str(spath))
        if write:
            spath.write_text(json.dumps(sol, indent=2) + "\n")
    for bpath in sorted((folder / "baselines").glob("*/solution.json")):
        b = json.loads(bpath.read_text())
        fresh = [{**src, "content": _baseline_source(bpath.parent, folder, src["path"]).read_text()} for src in b["sources"]]
        if fresh != b["sources"]:
            drift.append(str(bpath))
            if write:
                bpath.write_text(json.dumps({**b, "sources": fresh}, indent=2) + "\n")
    return drift


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    check = "--check" in args
    drift = [f for n in CONTEST_DEFINITIONS for f in sync(n, write=not check)]
    for f in drift:
        print(("out of date: " if check else "rewrote: ") + f)
    return 1 if (check and drift) else 0


if __name__ == "__main__":
    raise SystemExit(main())
