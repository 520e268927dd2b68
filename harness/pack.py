"""Solutions kept as folders: ``solution.json`` plus its source files side by side.

The JSON is the FlashInfer-Bench Solution (sources embedded); the files next to it are what people
read and review. ``pack`` refreshes the JSON from the files, ``unpack`` writes the files from a JSON,
and ``in_sync`` lets a test hold the two together.
"""

from __future__ import annotations

from pathlib import Path

from .schema import Solution, SourceFile, load_solution


def pack(folder: Path) -> Solution:
    sol = load_solution(folder / "solution.json")
    sources = [SourceFile(path=s.path, content=(folder / s.path).read_text()) for s in sol.sources]
    new = sol.model_copy(update={"sources": sources})
    (folder / "solution.json").write_text(new.to_json(indent=2) + "\n")
    return new


def unpack(solution: Solution, folder: Path) -> None:
    from .build import write_sources

    write_sources(solution, folder)
    (folder / "solution.json").write_text(solution.to_json(indent=2) + "\n")


def in_sync(folder: Path) -> list[str]:
    """Source paths whose file differs from the JSON's embedded copy."""
    sol = load_solution(folder / "solution.json")
    return [s.path for s in sol.sources if not (folder / s.path).is_file() or (folder / s.path).read_text() != s.content]
