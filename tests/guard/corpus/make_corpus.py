"""Write the corpus's Solution JSON files from sources/ and expected.yaml.

``sources/<name>.<ext>`` is the entry file (``main.py`` unless expected.yaml gives ``entry``),
``sources/<name>__<file>`` the other files. Run ``python tests/guard/corpus/make_corpus.py`` after
editing a source; tests/guard/test_corpus.py
fails when a JSON file is out of date with its sources.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
DEFINITION = "rmsnorm_h4096"


def build(name: str, meta: dict) -> dict:
    src = HERE / "sources"
    entry = meta.get("entry", "main.py::run")
    entry_file = entry.split("::", 1)[0]
    suffix = Path(entry_file).suffix
    sources = [{"path": entry_file, "content": (src / f"{name}{suffix}").read_text()}]
    for extra in sorted(src.glob(f"{name}__*")):
        sources.append({"path": extra.name.split("__", 1)[1], "content": extra.read_text()})
    return {
        "name": f"guard_corpus_{name}",
        "definition": DEFINITION,
        "author": "kbot-guard-corpus",
        "description": meta["description"],
        "spec": {
            "language": meta["language"],
            "target_hardware": ["cpu", "NVIDIA_H200"],
            "entry_point": entry,
            "destination_passing_style": bool(meta["dps"]),
        },
        "sources": sources,
    }


def render(name: str, meta: dict) -> str:
    return json.dumps(build(name, meta), indent=2) + "\n"


def expected() -> dict:
    return yaml.safe_load((HERE / "expected.yaml").read_text())


def main() -> int:
    exp = expected()
    for name, meta in exp.items():
        (HERE / f"{name}.json").write_text(render(name, meta))
    stale = sorted(p.name for p in HERE.glob("*.json") if p.stem not in exp)
    if stale:
        print(f"no expected.yaml entry for: {stale}", file=sys.stderr)
        return 1
    print(f"wrote {len(exp)} solutions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
