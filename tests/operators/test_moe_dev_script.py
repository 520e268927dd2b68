"""scripts/gpu/moe_dev.py without a GPU: it loads the workloads, builds every seed variant (tunables
rewritten by bot.agents.tunables) and both baselines, and plans both phases (--dry-run)."""

from __future__ import annotations

import os
import subprocess
import sys

from opkit import REPO


def test_moe_dev_script_plans_every_variant_and_baseline(tmp_path):
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu" / "moe_dev.py"), "--dry-run"], cwd=REPO,
                       env={**os.environ, "OUT": str(tmp_path), "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "19 workloads" in p.stdout
    for name in ("default", "no_small_path", "bf16_inter", "scaled_mm_loop", "torch_compile"):
        assert f"'{name}'" in p.stdout


def test_moe_dev_tables_read_a_recorded_report_and_a_child_reports_a_bad_variant(tmp_path):
    import importlib.util
    import json
    import tarfile

    spec = importlib.util.spec_from_file_location("moe_dev", REPO / "scripts" / "gpu" / "moe_dev.py")
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    with tarfile.open(REPO / "docs" / "measurements" / "h200-2026-12-01" / "04-moe-dev-evals.tar.gz") as tar:
        report = json.load(tar.extractfile("seed/report.json"))
    table = dev.eval_table(report)
    assert table.count("\n| ") == 19 and "| 14107 | PASSED |" in table and "REJECTED: [below-roofline]" in table
    assert "over 10 of 19 workloads" not in table and "9 of 19 workloads passed" in table
    rows = [{"variant": "default", "seq_len": 1, "do_bench_ms": 0.1, "floor_ms": 0.05, "local_experts": 4},
            {"variant": "bm128", "status": "TIMEOUT after 75 s"}]
    a = dev.a_table(rows, ["default", "bm128"], (1, 16))
    assert "| 1 | 4 | 0.05 | 0.1 | TIMEOUT after 75 s |" in a and "| 16 | - | - | - | TIMEOUT after 75 s |" in a
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu" / "moe_dev.py"), "--phase-a-child", "no_such_variant", "--seq-lens", "1"],
                       cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and json.loads(p.stdout.splitlines()[-1])["status"].startswith("LOAD_ERROR KeyError"), p.stdout + p.stderr[-2000:]
