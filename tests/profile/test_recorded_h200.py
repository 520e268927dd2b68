"""The rule engine on real Nsight Compute CSVs recorded on the H200 by scripts/gpu/profile_flawed.sh.

Each flawed kernel must get its flaw as the top-priority item; the good kernel must get no critical or
high item. The CSVs live in tests/fixtures/ncu/<case>.csv (committed after a device run, with the
ceilings.json measured in the same run); until then these tests skip and say so.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.ceilings import Ceilings, documented_ceilings
from harness.profile import Collected
from harness.profile.pipeline import explain_csv
from harness.schema import load_definition

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures" / "ncu"
sys.path.insert(0, str(REPO / "scripts" / "gpu"))

pytest.importorskip("triton")
from profile_flawed_kernels import CASES  # noqa: E402


def _ceilings() -> Ceilings:
    p = FIX / "ceilings.json"
    if p.is_file():
        return Ceilings.model_validate_json(p.read_text())
    return documented_ceilings("NVIDIA H200")


def _recorded_sass(name: str) -> list[Collected]:
    """SASS facts of the kernel the device run compiled (feedback.json), when that file was committed."""
    p = FIX / "feedback.json"
    if not p.is_file():
        return []
    sass = (json.loads(p.read_text()).get("cases", {}).get(name) or {}).get("sass") or {}
    return [Collected(source="sass", evidence=sass)] if sass and "missing" not in sass else []


def _check(name: str, with_sass: bool) -> None:
    csv_path = FIX / f"{name}.csv"
    if not csv_path.is_file():
        pytest.skip(f"{csv_path.relative_to(REPO)} not recorded yet: run scripts/gpu/profile_flawed.sh on the H200 "
                    "and commit $OUT/*.csv, ceilings.json and feedback.json to tests/fixtures/ncu/")
    extra = _recorded_sass(name) if with_sass else []
    if with_sass and not extra:
        pytest.skip("no recorded SASS facts for this case (tests/fixtures/ncu/feedback.json)")
    case = CASES[name]
    d = load_definition(FIX / "definitions" / f"{case.definition}.json")
    out = explain_csv(csv_path.read_text(), d, d.resolve_axes(case.axes), ceilings=_ceilings(), extra=extra)
    assert out.missing.get("ncu") is None, out.missing
    items = list(out.feedback)
    summary = [(i.severity, i.rule) for i in items]
    if case.expect_top is None:
        assert not [i for i in items if i.severity in ("critical", "high")], summary
    else:
        assert items, "no item at all for a flawed kernel"
        assert items[0].rule in (case.expect_top, *case.accept_top), summary
        assert items[0].severity in ("critical", "high"), summary


@pytest.mark.parametrize("name", sorted(CASES))
def test_recorded_case(name):
    """The diagnosis from the ncu CSV alone."""
    _check(name, with_sass=False)


@pytest.mark.parametrize("name", sorted(CASES))
def test_recorded_case_with_sass(name):
    """The same with the SASS facts of the compiled kernel added (what `kbot profile` collects)."""
    _check(name, with_sass=True)


def test_recorded_ceilings_are_plausible():
    p = FIX / "ceilings.json"
    if not p.is_file():
        pytest.skip("tests/fixtures/ncu/ceilings.json not recorded yet (scripts/gpu/profile_flawed.sh writes it)")
    c = Ceilings.model_validate_json(p.read_text())
    assert "H200" in c.gpu_name and c.source == "measured"
    assert 3000 < c.copy_bandwidth_gbs < 4800  # datasheet 4.8 TB/s; copies reach ~4.3
    assert 500 < c.matmul_tflops["bf16"] < 990
    json.loads(p.read_text())
