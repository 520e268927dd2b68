"""scripts/gpu/operators_full.py runs end to end (on the CPU, one small workload, official check on)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from opkit import DECODE, REPO


def test_operators_full_script_smoke(tmp_path, shared):
    env = {**os.environ, "OUT": str(tmp_path), "KBOT_SHARED": str(shared), "OMP_NUM_THREADS": "1"}
    p = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gpu" / "operators_full.py"), "--device", "cpu", "--only", DECODE,
         "--max-per-op", "1", "--official-refs", "--budget-s", "30"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    result = json.loads((tmp_path / "operators_full.json").read_text())
    (row,) = result["rows"]
    assert row["status"] == "ok" and row["agrees"] is True and row["ours_ms"] > 0 and row["official_ms"] > 0
    assert row["roofline"].get("bytes", 0) > 0 or "error" in row["roofline"]
    assert result["kbot_eval_commands"][0].startswith("kbot eval definitions/")
    assert "| gdn_decode |" in (tmp_path / "operators_full.md").read_text()
