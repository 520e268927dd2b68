"""The node summary's roofline headline: the fraction at the largest workload (largest floor) with its
bound class, and the geometric mean over workloads; none when a workload has no roofline."""

from __future__ import annotations

import math

from landscapes import state_solution

from bot.controller.summary import summarize
from tests.controller.synthetic import make_report


def test_largest_workload_and_geomean():
    ws = [{"axes": {"n": 1}, "latency_ms": 0.010, "floor_ms": 0.004},   # 40%
          {"axes": {"n": 2}, "latency_ms": 1.0, "floor_ms": 0.9},       # 90%, the largest floor
          {"axes": {"n": 3}, "latency_ms": 0.1, "floor_ms": 0.05}]      # 50%
    s = summarize(make_report(state_solution(""), ws))
    assert math.isclose(s["roofline_fraction_largest"], 0.9) and s["roofline_bound_largest"] == "memory"
    assert math.isclose(s["roofline_fraction_geomean"], (0.4 * 0.9 * 0.5) ** (1 / 3))
    assert math.isclose(s["roofline_fraction_min"], 0.4)
    ws[2].pop("floor_ms")
    s = summarize(make_report(state_solution(""), ws))
    assert s["roofline_fraction_largest"] is None and s["roofline_fraction_geomean"] is None
