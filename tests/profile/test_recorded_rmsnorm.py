"""The engine on held-out H200 recordings of our good rmsnorm kernel (not used to write the rules).

A performance engineer looking at one row of 4096 on 132 SMs says: the workload is too small for the
GPU, launch latency dominates, nothing in the kernel to fix. At 16384 rows the kernel is near its
bandwidth floor. Neither deserves a high-severity item."""

from pathlib import Path

import pytest

from harness.ceilings import Ceilings, documented_ceilings
from harness.profile.pipeline import explain_csv
from harness.schema import load_definition

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures" / "ncu"
DEF = load_definition(REPO / "definitions" / "rmsnorm_h4096" / "definition.json")


def _explain(name: str, batch: int):
    p = FIX / "ceilings.json"
    ceilings = Ceilings.model_validate_json(p.read_text()) if p.is_file() else documented_ceilings("NVIDIA H200")
    out = explain_csv((FIX / name).read_text(), DEF, DEF.resolve_axes({"batch_size": batch}), ceilings=ceilings)
    assert out.missing.get("ncu") is None, out.missing
    return list(out.feedback)


def test_one_row_is_too_small_for_the_gpu_not_an_occupancy_problem():
    items = _explain("rmsnorm_b1.csv", 1)
    summary = [(i.severity, i.rule) for i in items]
    assert not [i for i in items if i.severity in ("critical", "high")], summary
    assert items[0].rule in ("grid_too_small", "launch_overhead_dominates", "sol_latency_bound", "less_than_one_wave"), summary
    assert "achieved_occupancy_gap" not in {i.rule for i in items}, summary  # one block per SM at most: the gap is the grid's


@pytest.mark.parametrize("name, batch", [("rmsnorm_b16384.csv", 16384)])
def test_a_bandwidth_bound_kernel_gets_nothing_alarming(name, batch):
    items = _explain(name, batch)
    assert not [i for i in items if i.severity in ("critical", "high", "medium")], [(i.severity, i.rule) for i in items]
