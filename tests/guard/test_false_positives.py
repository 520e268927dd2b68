"""False positives of the static guard, measured: every reference we ship and every official reference in
../shared, and the honest corpus (several styles of real kernels), must pass the guard. The rate is
printed (run with ``-s``) and must be 0."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from harness.guard.static import check_solution
from harness.schema import SchemaError, load_definition, parse_solution, load_solution

from guardkit import CORPUS

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("KBOT_SHARED", REPO.parent / "shared"))
OFFICIAL = SHARED / "flashinfer-trace" / "definitions"


def _as_python_solution(definition, code: str, entry: str = "main.py::run"):
    """A reference as a `python` solution of its own definition: what an agent would submit if it
    submitted the reference itself."""
    return parse_solution({"name": f"reference_{definition.name}", "definition": definition.name, "author": "tests",
                           "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": entry,
                                    "destination_passing_style": False},
                           "sources": [{"path": entry.split("::")[0], "content": code}]})


def _our_references() -> list[tuple[str, object, object]]:
    """(id, definition, solution): the JSON reference of each of our definitions, and the faster
    trusted reference.py that kbot.yaml points at."""
    out = []
    for dpath in sorted((REPO / "definitions").glob("*/definition.json")):
        d = load_definition(dpath)
        out.append((f"ours/{d.name}/definition.json", d, _as_python_solution(d, d.reference)))
        side = dpath.parent / "kbot.yaml"
        fn = (yaml.safe_load(side.read_text()) or {}).get("reference_fn") if side.is_file() else None
        if fn:
            file, _, name = fn.partition("::")
            out.append((f"ours/{d.name}/{file}", d, _as_python_solution(d, (dpath.parent / file).read_text(), f"{file}::{name}")))
    return out


def _official_references() -> list[tuple[str, object, object]]:
    out = []
    for p in sorted(OFFICIAL.glob("*/*.json")):
        try:
            d = load_definition(p)
        except SchemaError:
            continue  # not a definition file (test_definitions covers loading them)
        out.append((f"official/{p.parent.name}/{p.stem}", d, _as_python_solution(d, d.reference)))
    return out


def _honest_corpus() -> list[tuple[str, object]]:
    expected = yaml.safe_load((CORPUS / "expected.yaml").read_text())
    return [(name, load_solution(CORPUS / f"{name}.json")) for name, meta in sorted(expected.items()) if meta["static"] == "honest"]


def _flagged(definition, solution) -> list[str]:
    return [f"{f.rule} {f.file}:{f.line} {f.message}" for f in check_solution(solution, definition)]


OURS = _our_references()


@pytest.mark.parametrize("definition,solution", [c[1:] for c in OURS], ids=[c[0] for c in OURS])
def test_our_references_pass_the_guard(definition, solution):
    assert _flagged(definition, solution) == []


def test_official_references_pass_the_guard():
    refs = _official_references()
    if not refs:
        pytest.skip(f"{OFFICIAL} is absent (the official definitions live in ../shared)")
    bad = {name: _flagged(d, s) for name, d, s in refs}
    bad = {k: v for k, v in bad.items() if v}
    print(f"\nofficial references: {len(refs) - len(bad)}/{len(refs)} pass the static guard")
    assert not bad, "\n".join(f"{k}: {v[:3]}" for k, v in sorted(bad.items()))


def test_the_false_positive_rate_is_zero(rmsnorm_def):
    """Every honest thing we know of, together: the honest corpus (pure torch, Triton with a thin host
    wrapper, CUDA through torch.utils.cpp_extension, variable-length, printing) and all references."""
    honest = [(f"corpus/{n}", rmsnorm_def, s) for n, s in _honest_corpus()] + OURS + _official_references()
    styles = {s.spec.language.value for _, _, s in honest}
    assert {"python", "triton", "cuda"} <= styles, styles
    flagged = [(name, _flagged(d, s)) for name, d, s in honest]
    flagged = [(n, f) for n, f in flagged if f]
    rate = len(flagged) / len(honest)
    print(f"\nstatic guard false-positive rate: {len(flagged)}/{len(honest)} = {rate:.1%} "
          f"(honest corpus {len(_honest_corpus())}, our references {len(OURS)}, official references {len(honest) - len(OURS) - len(_honest_corpus())})")
    assert rate == 0.0, "\n".join(f"{n}: {f[:3]}" for n, f in flagged)
