"""The device scripts can only run on the H200, but what can be checked here is: they parse, the
record.sh steps name scripts that exist, and the CUPTI record parser reads the kernel-record prefix."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_multi_gpu_round_verdicts():
    """scripts/gpu/multi_gpu_round.py's pass/fail rules (time within the slack on distinct GPUs, the same
    decisions in the same order) on made-up figures; the script itself needs several GPUs."""
    r = subprocess.run([sys.executable, str(GPU / "multi_gpu_round.py"), "--selftest"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "selftest ok" in r.stdout, r.stderr


def test_the_baselines_table_says_why_a_baseline_could_not_run(tmp_path):
    """scripts/gpu/baselines.py on the CPU, for one baseline whose library is absent here: the row says
    "could not run here" with the reason, the run exits 0 (said, not failed), three files under $OUT."""
    import os
    from importlib import metadata

    try:
        metadata.version("fla-core")
        pytest.skip("fla-core is installed here: nothing to check about its absence")
    except metadata.PackageNotFoundError:
        pass

    env = {**os.environ, "OUT": str(tmp_path / "out"), "WORK": str(tmp_path / "work"), "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, str(GPU / "baselines.py"), "--device", "cpu", "--definitions", "gdn_decode_qk4_v8_d128_k_last",
                        "--only", "fla_fused_recurrent", "--no-champions"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    md = (tmp_path / "out" / "baselines.md").read_text()
    assert "| gdn_decode_qk4_v8_d128_k_last | fla_fused_recurrent | baseline | could not run here: fla-core is not installed" in md
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["baselines.json", "baselines.md", "reports.tar.gz"]


def seed_kernels(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GPU / "seed_kernels.py"), *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)


@pytest.mark.slow
def test_seed_kernels_runs_variants_and_the_champion_on_the_cpu(tmp_path):
    """scripts/gpu/seed_kernels.py's path without a GPU (Triton's interpreter): the definition's own inputs, the
    seed's variants through the offline agent's rewriting and the champion on main, each checked against the
    reference before it would be profiled."""
    out = tmp_path / "k.json"
    p = seed_kernels("indexer", "--workloads-file", "workloads.small.jsonl", "--workload", "1", "--device", "cpu",
                     "--variant", "default=", "--variant", 'separate={"CHAIN_SELECT": false}', "--champion", "--json", str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["variant"], r["ok"]) for r in rows] == [("default", True), ("separate", True), ("champion", True)], rows


@pytest.mark.parametrize("args, says", [
    (["nonesuch"], "no definition"),
    (["indexer", "--variant", "x"], "wants NAME=JSON"),
    (["indexer", "--variant", "x={"], "not JSON"),
    (["indexer", "--variant", 'x={"NO_SUCH_TUNABLE": 1}'], "variant x"),
    (["indexer", "--workload", "999", "--workloads-file", "workloads.small.jsonl"], "out of range"),
    (["indexer", "--calls", "0"], "must be at least 1"),
])
def test_seed_kernels_refuses_bad_arguments(args, says):
    p = seed_kernels(*args, "--device", "cpu", timeout=120)
    assert p.returncode == 2 and says in p.stderr, (p.returncode, p.stderr[-800:])
