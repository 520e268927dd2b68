"""`--timing NAME=VALUE`: timing-protocol overrides are checked before anything runs."""

import subprocess
import sys
from pathlib import Path

import pytest

from harness.timing_config import TimingConfig, parse_timing_overrides

REPO = Path(__file__).resolve().parents[2]


def test_overrides_take_the_field_types():
    got = parse_timing_overrides(["budget_s=1.5", "min_iters=200", "refresh_inputs=false", "resolution_ms=0.000032"])
    assert got == {"budget_s": 1.5, "min_iters": 200, "refresh_inputs": False, "resolution_ms": 0.000032}
    assert isinstance(got["min_iters"], int)
    cfg = TimingConfig(**got)
    assert cfg.min_iters == 200 and cfg.refresh_inputs is False


@pytest.mark.parametrize("pair, why", [
    ("budget=1", "one of"), ("min_iters", "NAME=VALUE"), ("min_iters=1.5", "takes a int"),
    ("budget_s=nan", "finite"), ("budget_s=-1", "finite"), ("refresh_inputs=maybe", "takes a bool"), ("hold_cycles=inf", "int"),
    ("chunk=0", "at least 1"), ("max_iters=0", "at least 1"), ("budget_s=0", "at least"), ("min_iters=6000", "below min_iters"),
])
def test_bad_overrides_are_refused_with_the_reason(pair, why):
    with pytest.raises(ValueError, match=why):
        parse_timing_overrides([pair])


def test_the_cli_refuses_a_bad_timing_setting_before_running(tmp_path):
    p = subprocess.run([sys.executable, "-m", "harness.cli", "eval", "kernels/rmsnorm_h4096/triton_rows/solution.json", "-d", "rmsnorm_h4096",
                        "--device", "cpu", "--timing", "warmpu=3", "--out", str(tmp_path / "o")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "warmpu=3" in p.stderr and "warmup" in p.stderr
    assert not (tmp_path / "o").exists()
