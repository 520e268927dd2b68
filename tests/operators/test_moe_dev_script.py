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
