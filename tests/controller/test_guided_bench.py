"""scripts/guided_bench.py on a small made-up table over the real rmsnorm single-pass seed space, with the
ahead-of-time compile replaced by evidence that says where the registers spill."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

from bot.agents.providers.offline import load_seeds
from bot.agents.tunables import configuration, solution_tunables
from harness.profile import Collected

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(REPO / "scripts"))
    spec = importlib.util.spec_from_file_location("guided_bench", REPO / "scripts" / "guided_bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def table():
    """Best at 32 warps: every configuration with fewer warps spills in the fake compile below, so the
    spill items (more warps, fewer rows) point at the optimum."""
    [seed] = [s for s in load_seeds("rmsnorm_h4096") if s.name.endswith("single_pass")]
    ts = solution_tunables(seed)
    rows = []
    for r in ts[0].options:
        for w in ts[1].options:
            lat = 0.004 * (1 + 0.3 * (5 - math.log2(w)) + 0.01 * math.log2(r))
            rows.append({"config": {"ROWS": r, "NUM_WARPS": w}, "latency_ms": [lat, lat * 30]})
    return {"name": "test/rmsnorm_h4096/single_pass", "definition": "rmsnorm_h4096", "source": seed.source("main.py"),
            "workloads": [{"batch_size": 1}, {"batch_size": 4096}], "configs": rows}


def test_guided_reaches_the_best_sooner_when_the_items_point_at_it(bench, tmp_path, monkeypatch):
    compiled = []

    def fake_compile(solution, definition):
        cfg = configuration(solution_tunables(solution))
        compiled.append(cfg)
        spill = 0 if cfg["NUM_WARPS"] == 32 else 256
        return Collected(source="triton", evidence={"triton_spill_bytes": spill, "triton_registers": 255 if spill else 64})

    monkeypatch.setattr(bench, "solution_triton_evidence", fake_compile)
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"device": "NVIDIA H200", "tables": [table()]}))
    cache = tmp_path / "cache.json"
    out = bench.main([str(path), "--seeds", "6", "--cache", str(cache), "--out", str(tmp_path / "r.json")])
    [r] = out["results"]
    assert r["space"] == 24 and r["best_config"] == {"NUM_WARPS": 32, "ROWS": 1}
    assert len(compiled) == 24 and len(json.loads(cache.read_text())) == 24  # each configuration compiled once
    assert r["feedback"]["configs_with_rule"]["register_spills_triton"] == 20
    assert r["feedback"]["items_seen_by_guided_runs"] > 0
    e = r["evaluations_to_target"]
    assert e["guided"]["mean"] < e["blind"]["mean"] and r["paired"]["blind_fewer"] == 0
    # a second run compiles nothing: the cache answers
    bench.main([str(path), "--seeds", "1", "--cache", str(cache)])
    assert len(compiled) == 24


def test_guided_bench_rejects_bad_arguments(bench, tmp_path):
    with pytest.raises(SystemExit):
        bench.main([str(tmp_path / "missing.json")])
    (tmp_path / "t.json").write_text(json.dumps({"tables": []}))
    with pytest.raises(SystemExit):
        bench.main([str(tmp_path / "t.json")])  # no device: no ceilings for the roofline rules
    with pytest.raises(SystemExit):
        bench.main([str(tmp_path / "t.json"), "--seeds", "0"])
