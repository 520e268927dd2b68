"""scripts/gpu/dsa_dev.py runs end to end on the CPU (--smoke: interpreter, one small workload, the
harness's eval-many and the in-process variant check), so the lead's GPU run does not fail on plumbing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from opkit import INDEXER, REPO


@pytest.mark.slow
def test_dsa_dev_script_smoke(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path), "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu" / "dsa_dev.py"), "--smoke", "--only", "indexer", "--max-workloads", "1"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    result = json.loads((tmp_path / "dsa_dev.json").read_text())
    op = result["ops"]["indexer"]
    assert op["definition"] == INDEXER
    (row,) = op["A"]["default"].values()
    assert row["status"] == "PASSED" and row["event_us"] > 0 and row["floor_us"] is not None
    assert all(r["ok"] for v in op["B"].values() for r in v.values()), op["B"]
    assert set(os.listdir(tmp_path)) == {"dsa_dev.json", "dsa_dev.md", "evals.tar.gz"}
    assert "| B=3 mp=40 P=160 | PASSED |" in p.stdout.splitlines()[-1] or "| B=3 mp=40 P=160 | PASSED |" in p.stdout


@pytest.mark.slow
def test_indexer_precision_script_smoke(tmp_path):
    """scripts/gpu/indexer_precision.py on the CPU (interpreter, one small workload with rows longer than
    top-k): every variant scored against float64 and judged; the interpreter's fp8 dot is exact-ish, so
    the errors are tiny and every verdict passes."""
    env = {**os.environ, "OUT": str(tmp_path), "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu" / "indexer_precision.py"), "--smoke", "--index", "1", "--draws", "1"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = json.loads((tmp_path / "indexer_precision.json").read_text())["rows"]
    assert {r["distribution"] for r in rows} == {"official", "unit"}
    for r in rows:
        assert r["refreshed"] == ["q_index_fp8", "weights"]
        for v in ("default", "promote32", "fp16"):
            assert r[v]["verdict"] == "PASSED" and 0 <= r[v]["scores"]["max_abs"] < 1e-3, r[v]


def test_dsa_dev_times_the_champion_beside_the_seed(monkeypatch):
    """dsa_dev.py's phase B runs the champion on main as "champion" beside the seed's variants (dev_round.sh
    picks against it: what the loop pairs a submission with), never as a variant to write out."""
    import importlib.util

    from opkit import ATTENTION

    monkeypatch.syspath_prepend(str(REPO / "scripts" / "gpu"))
    spec = importlib.util.spec_from_file_location("dsa_dev_under_test", REPO / "scripts" / "gpu" / "dsa_dev.py")
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    for op, definition in (("indexer", INDEXER), ("attention", ATTENTION)):
        sols = dev.solutions(op)
        pointer = json.loads((REPO / "kernels" / definition / "champion.json").read_text())
        assert list(sols)[0] == "default" and sols["champion"].name == pointer["solution"]
        assert "champion" not in dev.VARIANTS[op]


def test_dsa_dev_sweeps_only_the_variants_named(monkeypatch):
    """--variant NAME keeps the default, the champion and the variants named; a name no op has is refused."""
    import importlib.util

    monkeypatch.syspath_prepend(str(REPO / "scripts" / "gpu"))
    spec = importlib.util.spec_from_file_location("dsa_dev_only", REPO / "scripts" / "gpu" / "dsa_dev.py")
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    assert list(dev.solutions("indexer", ["filter256"])) == ["default", "filter256", "champion"]
    with pytest.raises(SystemExit, match="no indexer variants named"):
        dev.solutions("indexer", ["nonesuch"])
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu" / "dsa_dev.py"), "--smoke", "--only", "indexer",
                        "--variant", "nonesuch"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "no variants named ['nonesuch']" in p.stderr
