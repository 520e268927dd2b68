"""Ceilings: documented defaults, the cache, CPU measurement, peak fallbacks, the command."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from harness.ceilings import Ceilings, cache_dir, ceilings_for, load_ceilings, measure_ceilings, save_ceilings


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KBOT_CACHE", str(tmp_path / "kbot"))


def test_documented_h200_is_labelled():
    c = load_ceilings("NVIDIA H200")
    assert c is not None and c.source == "documented"
    assert c.copy_bandwidth_gbs == pytest.approx(4300)
    assert c.matmul_tflops["bf16"] == pytest.approx(790)
    assert c.to_report()["source"] == "documented, not measured here"
    assert load_ceilings("Some Other GPU") is None


def test_cache_roundtrip_wins_over_documented(tmp_path):
    assert str(cache_dir()).startswith(str(tmp_path / "kbot"))
    m = Ceilings(gpu_name="NVIDIA H200", device="cuda", copy_bandwidth_gbs=4250.0, matmul_tflops={"bf16": 770.0},
                 measured_at="2026-11-29T10:00:00+00:00", torch_version="2.11")
    path = save_ceilings(m)
    assert path.parent == cache_dir() and path.name == "NVIDIA_H200.json"
    got = load_ceilings("NVIDIA H200")
    assert got.source == "measured" and got.copy_bandwidth_gbs == 4250.0
    path.write_text("{not json")
    with pytest.raises(ValueError, match="force"):
        load_ceilings("NVIDIA H200")


def test_peak_fallbacks_keep_the_floor_a_lower_bound():
    c = Ceilings(gpu_name="g", device="cuda", copy_bandwidth_gbs=1000, matmul_tflops={"bf16": 500.0, "fp32": 50.0})
    assert c.peak_flops("fp8") == (1000e12, "2 x bf16 (fp8 not measured)")
    assert c.peak_flops("fp16")[0] == 500e12
    assert c.peak_flops("fp32") == (50e12, "fp32")
    with pytest.raises(ValueError):
        Ceilings(gpu_name="g", device="cuda", copy_bandwidth_gbs=1, matmul_tflops={}).peak_flops("bf16")


def test_cpu_measured_on_the_fly():
    c = ceilings_for("cpu")
    assert c.device == "cpu" and c.source == "measured"
    assert c.copy_bandwidth_gbs > 0.1 and c.matmul_tflops["fp32"] > 0
    assert c.torch_version and c.measured_at


def test_measure_rejects_unknown_device():
    with pytest.raises(ValueError):
        measure_ceilings("tpu")


def test_ceilings_command_cpu_json():
    import click

    from harness.cli_profile import register

    @click.group()
    def cli():
        pass

    register(cli)
    r = CliRunner().invoke(cli, ["ceilings", "--device", "cpu", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output[: r.output.rindex("}") + 1])
    assert data["device"] == "cpu" and data["copy_bandwidth_gbs"] > 0


@pytest.mark.gpu
def test_measure_cuda_quick():
    c = measure_ceilings("cuda", quick=True)
    assert c.copy_bandwidth_gbs > 100 and c.matmul_tflops["bf16"] > 10
