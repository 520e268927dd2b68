"""The device scripts can only run on the H200, but what can be checked here is: they parse, the
record.sh steps name scripts that exist, and the CUPTI record parser reads the kernel-record prefix."""

import ast
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GPU = REPO / "scripts" / "gpu"


def test_every_device_script_parses():
    for p in sorted(GPU.glob("*.py")):
        ast.parse(p.read_text(), filename=str(p))


def test_every_record_step_runs_a_script_that_exists():
    text = (GPU / "record.sh").read_text()
    steps = re.findall(r"^step_(\w+)\(\)", text, flags=re.M)
    assert {"harness", "guard", "observer_cost", "launch_floor", "many", "cupti_timing"} <= set(steps)
    for script in re.findall(r"scripts/gpu/([\w.]+\.(?:py|sh))", text):
        assert (GPU / script).exists(), script
    assert subprocess.run(["bash", "-n", str(GPU / "record.sh")]).returncode == 0


def test_cupti_kernel_record_prefix_parser():
    r = subprocess.run([sys.executable, str(GPU / "cupti_timing.py"), "--selftest"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "selftest ok" in r.stdout, r.stderr
