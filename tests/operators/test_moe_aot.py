"""scripts/moe_aot.py: every kernel the MoE seed's ``run`` launches, at the official batch sizes, compiles
for sm_90 on a CPU; the large-batch GEMMs run FP8 wgmma without register spills at the seed's defaults
(what skills/operators/moe.md and the seed's docstring state)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from opkit import REPO

pytest.importorskip("triton")


def aot(*args: str) -> dict:
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "moe_aot.py"), *args, "--json"], cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


@pytest.mark.slow
def test_every_launch_of_the_seed_compiles():
    """The launches come from the seed's own run() (nothing restated): every kernel of both paths is there,
    and none fails to compile."""
    rows = aot()["kernels"]
    assert not [r for r in rows if "error" in r], [r for r in rows if "error" in r][:2]
    names = {r["kernel"].split()[0] for r in rows}
    assert names == {"route_small", "route_pairs", "positions", "gemm1_swap", "swiglu", "gemm2_swap", "reduce",
                     "route", "scatter", "gemm1", "gemm2"}, names
    # the one-program routing at each tile it is used with, the large path with 64- and 128-row tiles
    assert {r["kernel"] for r in rows} >= {"route_small T=1", "route_small T=3", "positions T=32", "gemm1 T=80", "gemm1 T=901"}


@pytest.mark.slow
def test_the_seeds_large_gemms_use_fp8_wgmma_without_spills():
    rows = {r["kernel"]: r for r in aot("--only", "gemm1,gemm2", "--tokens", "80")["kernels"]}
    assert set(rows) == {"gemm1 T=80", "gemm2 T=80"}
    for name, r in rows.items():
        assert "error" not in r, r
        assert r["tensor"].get("QGMMA", 0) > 0, (name, r["tensor"])  # FP8 x FP8 on the tensor cores
        assert r["spill_bytes"] == 0 and r["registers"] <= 255, (name, r)
    assert rows["gemm1 T=80"]["shared_bytes"] > 113 * 1024  # one CTA per SM: why G1_PROGS_PER_SM exists


def test_an_unknown_kernel_name_is_refused():
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "moe_aot.py"), "--only", "gemm9", "--tokens", "1"], cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "no launch of ['gemm9']" in p.stderr, p.stderr[-500:]


def test_bad_token_counts_are_refused():
    for bad, says in (("0", "at least one batch size"), ("x,2", "not a list of integers"), ("", "at least one batch size")):
        p = subprocess.run([sys.executable, str(REPO / "scripts" / "moe_aot.py"), "--tokens", bad], cwd=REPO,
                           env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and says in p.stderr, (bad, p.returncode, p.stderr[-500:])
