"""scripts/search_bench.py on small tables (the H200 tables come from scripts/gpu/tunable_space.py)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

from bot.agents.providers.offline import load_seeds
from bot.agents.tunables import solution_tunables

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("search_bench", REPO / "scripts" / "search_bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def rmsnorm_table(bad=()):
    [seed] = [s for s in load_seeds("rmsnorm_h4096") if s.name.endswith("single_pass")]
    ts = solution_tunables(seed)
    rows = []
    for r in ts[0].options:
        for w in ts[1].options:
            cfg = {"ROWS": r, "NUM_WARPS": w}
            if (r, w) in bad:
                rows.append({"config": cfg, "latency_ms": None, "error": "out of resources"})
                continue
            lat = 0.004 * (1 + 0.2 * abs(math.log2(w) - 3) + 0.05 * abs(math.log2(r) - 2))
            rows.append({"config": cfg, "latency_ms": [lat, lat * 30]})
    return {"name": "test/rmsnorm_h4096/single_pass", "definition": "rmsnorm_h4096", "source": seed.source("main.py"),
            "workloads": [{"batch_size": 1}, {"batch_size": 4096}], "reference_ms": [0.01, 0.2], "configs": rows}


def test_bench_counts_evaluations_to_target(bench, tmp_path):
    table = rmsnorm_table(bad={(8, 32), (4, 32)})
    (tmp_path / "t.json").write_text(json.dumps({"device": "test", "tables": [table]}))
    out = bench.main([str(tmp_path / "t.json"), "--seeds", "3", "--out", str(tmp_path / "r.json")])
    [r] = out["results"]
    assert r["space"] == 24 and r["measured"] == 22
    assert r["best_config"] == {"NUM_WARPS": 8, "ROWS": 4}
    for m in ("mcts", "greedy", "random"):
        e = r["evaluations_to_target"][m]
        assert e["misses"] == 0  # the budget is the whole space: every method gets there
        assert all(1 <= x <= 24 for x in e["per_seed"])
    assert json.loads((tmp_path / "r.json").read_text())["results"][0]["best_config"] == r["best_config"]


def test_evals_to_target(bench):
    assert bench.evals_to_target([3.0, None, 2.0, 1.01], 1.02) == 4
    assert bench.evals_to_target([3.0, None], 1.02) is None


def test_bench_rejects_bad_arguments(bench):
    with pytest.raises(SystemExit):
        bench.main([])
