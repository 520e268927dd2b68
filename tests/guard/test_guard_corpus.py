"""The adversarial corpus: every hostile solution is refused with the rule expected.yaml names, no
honest solution (in the corpus, in kernels/, in the agents' seed kernels) raises anything."""

from __future__ import annotations

import glob
import json
import sys
from pathlib import Path

import pytest

from harness.guard.static import check_solution
from harness.schema import load_definition, load_solution, parse_solution

from guardkit import CORPUS

sys.path.insert(0, str(CORPUS))
import make_corpus  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXPECTED = make_corpus.expected()
HOSTILE = sorted(n for n, m in EXPECTED.items() if m["static"] != "honest")
HONEST = sorted(n for n, m in EXPECTED.items() if m["static"] == "honest")


def test_corpus_is_big_enough():
    assert len(HOSTILE) >= 15 and len(HONEST) >= 2
    families = {r for n in HOSTILE for r in EXPECTED[n]["static"]}
    for rule in ("side-stream", "thread", "monkey-patch", "harness-access", "reference-access", "introspection",
                 "output-cache", "file-io", "environment", "dynamic-code", "ffi", "host-compute", "try-fallback",
                 "no-kernel-launch", "tensor-subclass", "input-mutation", "module-state", "process-exit"):
        assert rule in families, f"no corpus solution exercises {rule}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_json_matches_sources(name):
    path = CORPUS / f"{name}.json"
    assert path.exists(), f"{path.name} missing: run python tests/guard/corpus/make_corpus.py"
    assert path.read_text() == make_corpus.render(name, EXPECTED[name]), \
        f"{path.name} is out of date with sources/: run python tests/guard/corpus/make_corpus.py"
    load_solution(path)  # a valid Solution


def test_no_orphan_json():
    assert sorted(p.stem for p in CORPUS.glob("*.json")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_is_flagged(name, rmsnorm_def):
    findings = check_solution(load_solution(CORPUS / f"{name}.json"), rmsnorm_def)
    got = {f.rule for f in findings}
    missing = set(EXPECTED[name]["static"]) - got
    assert not missing, f"{name}: expected {sorted(missing)} among {sorted(got)}"
    for f in findings:
        assert f.file and f.line and f.why and f.message


@pytest.mark.parametrize("name", HONEST)
def test_honest_is_clean(name, rmsnorm_def):
    findings = check_solution(load_solution(CORPUS / f"{name}.json"), rmsnorm_def)
    assert findings == [], [f"{f.rule} {f.file}:{f.line} {f.message}" for f in findings]


def _definition_for(name: str):
    for cand in (REPO / "definitions" / name / "definition.json",):
        if cand.exists():
            return load_definition(cand)
    return None


SHIPPED = sorted(glob.glob(str(REPO / "kernels" / "*" / "*" / "solution.json")))
SEEDS = sorted(glob.glob(str(REPO / "skills" / "seeds" / "*" / "*.py")))


@pytest.mark.parametrize("path", SHIPPED or [None], ids=[Path(p).parent.name for p in SHIPPED] or ["none"])
def test_shipped_kernels_have_no_findings(path):
    if path is None:
        pytest.skip("no kernels/*/*/solution.json in this checkout yet")
    sol = load_solution(path)
    findings = check_solution(sol, _definition_for(sol.definition))
    assert findings == [], [f"{f.rule} {f.file}:{f.line} {f.message}" for f in findings]


@pytest.mark.parametrize("path", SEEDS or [None], ids=[f"{Path(p).parent.name}/{Path(p).stem}" for p in SEEDS] or ["none"])
def test_seed_kernels_have_no_findings(path):
    if path is None:
        pytest.skip("no skills/seeds in this checkout yet")
    defname = Path(path).parent.name
    sol = parse_solution({"name": "seed", "definition": defname, "author": "seed",
                          "spec": {"language": "triton", "target_hardware": ["any"], "entry_point": "main.py::run"},
                          "sources": [{"path": "main.py", "content": Path(path).read_text()}]})
    findings = check_solution(sol, _definition_for(defname))
    assert findings == [], [f"{f.rule} {f.file}:{f.line} {f.message}" for f in findings]


def test_false_positive_rate_is_zero(rmsnorm_def):
    """The number the issue asks for: flagged honest solutions over all honest solutions."""
    honest = [load_solution(CORPUS / f"{n}.json") for n in HONEST] + [load_solution(p) for p in SHIPPED]
    flagged = [s.name for s in honest if check_solution(s, _definition_for(s.definition) or rmsnorm_def)]
    assert flagged == [], f"false positives: {flagged} of {len(honest)}"



def test_our_definition_matches_official(shared):
    """The e2e tests fall back to definitions/rmsnorm_h4096 where ../shared is absent (the device)."""
    ours = REPO / "definitions" / "rmsnorm_h4096" / "definition.json"
    if not ours.exists():
        pytest.skip("definitions/rmsnorm_h4096 not in this checkout")
    a = load_definition(ours)
    b = load_definition(shared / "flashinfer-trace" / "definitions" / "rmsnorm" / "rmsnorm_h4096.json")
    assert (a.name, a.axes, a.inputs, a.outputs) == (b.name, b.axes, b.inputs, b.outputs)
