"""The GPUs users have, on the CPU: a CUDA solution is built for the compute capability of the device it
runs on (fake device properties here), a runner without a GPU targets the declared GPU kind, and the
documented ceilings cover the B200, H100 and H200 with a measurement winning over them."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from harness import build as build_mod
from harness.build import arch_for_capability, declared_arch, device_arch, gencode_flags
from harness.ceilings import Ceilings, documented_capability, documented_ceilings, load_ceilings, save_ceilings
from harness.schema import load_solution

REPO = Path(__file__).resolve().parents[2]
CUDA_SOLUTION = REPO / "tests" / "guard" / "corpus" / "honest_cuda.json"


@pytest.mark.parametrize(("cap", "arch"), [((9, 0), "sm_90a"), ((10, 0), "sm_100a"), ((10, 3), "sm_103a"),
                                           ((12, 0), "sm_120a"), ((8, 6), "sm_86"), ((8, 0), "sm_80")])
def test_the_target_follows_the_compute_capability(cap, arch):
    assert arch_for_capability(*cap) == arch
    assert device_arch(types.SimpleNamespace(major=cap[0], minor=cap[1])) == arch


def test_gencode_carries_sass_and_ptx_of_one_target_and_refuses_nonsense():
    assert gencode_flags("sm_100a") == ["-gencode=arch=compute_100a,code=[sm_100a,compute_100a]"]
    assert gencode_flags("sm_86") == ["-gencode=arch=compute_86,code=[sm_86,compute_86]"]
    with pytest.raises(ValueError):
        gencode_flags("sm_90a; rm -rf /")
    with pytest.raises(ValueError):
        arch_for_capability(1, 0)


def test_a_runner_without_a_gpu_targets_the_declared_gpu_kind():
    assert declared_arch({"KBOT_GPU_KIND": "B200"}) == "sm_100a"
    assert declared_arch({"KBOT_GPU_KIND": "h100"}) == "sm_90a"
    assert declared_arch({}) is None
    with pytest.raises(ValueError, match="KBOT_GPU_KIND='TPUv5'"):
        declared_arch({"KBOT_GPU_KIND": "TPUv5"})


class FakeCuda:
    """torch.cuda and torch.utils.cpp_extension.load as a B200 runner would show them; load records its
    arguments instead of compiling."""

    def __init__(self, major: int, minor: int):
        self.props = types.SimpleNamespace(major=major, minor=minor, name="NVIDIA B200")
        self.loads: list[dict] = []

    def install(self, monkeypatch):
        import torch
        from torch.utils import cpp_extension

        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: self.props)

        def load(**kw):
            self.loads.append(kw)
            return types.SimpleNamespace(run=lambda *a: None)

        monkeypatch.setattr(cpp_extension, "load", load)


@pytest.mark.parametrize(("cap", "flag"), [((10, 0), "arch=compute_100a,code=[sm_100a,compute_100a]"),
                                           ((9, 0), "arch=compute_90a,code=[sm_90a,compute_90a]")])
def test_a_cuda_solution_is_built_for_the_device_it_runs_on(tmp_path, monkeypatch, cap, flag):
    fake = FakeCuda(*cap)
    fake.install(monkeypatch)
    fn, result = build_mod.build(load_solution(CUDA_SOLUTION), tmp_path, device="cuda")
    assert result.ok, result.errors
    (kw,) = fake.loads
    gencodes = [f for f in kw["extra_cuda_cflags"] if f.startswith("-gencode")]
    assert gencodes == [f"-gencode={flag}"]  # one target, the device's: no hard-coded sm_90a beside it


def test_the_module_name_differs_per_target(tmp_path, monkeypatch):
    names = []
    for cap in ((9, 0), (10, 0)):
        fake = FakeCuda(*cap)
        fake.install(monkeypatch)
        build_mod.build(load_solution(CUDA_SOLUTION), tmp_path / f"{cap[0]}", device="cuda")
        names.append(fake.loads[0]["name"])
    assert names[0] != names[1]  # a build for an H200 is never loaded on a B200 from the build cache


@pytest.mark.parametrize(("name", "kind", "bandwidth"), [("NVIDIA H200", "H200", 4300.0), ("NVIDIA H100 80GB HBM3", "H100", 3350.0),
                                                         ("NVIDIA H100 PCIe", "H100", 3350.0), ("NVIDIA B200", "B200", 8000.0)])
def test_documented_ceilings_exist_for_the_b200_h100_and_h200(name, kind, bandwidth):
    c = documented_ceilings(name)
    assert c is not None and c.source == "documented" and c.copy_bandwidth_gbs == bandwidth
    assert kind in c.note and "documented, not measured here" in c.note
    assert {"bf16", "fp8", "fp32"} <= set(c.matmul_tflops)
    assert c.to_report()["source"] == "documented, not measured here"


def test_a_gb200_is_not_taken_for_a_b200():
    # the GB200's B200 runs at 1200 W, faster than the HGX figures: using them would raise its floor
    assert documented_ceilings("NVIDIA GB200") is None and documented_capability("NVIDIA GB200") is None


def test_a_measurement_wins_over_the_documented_figures(tmp_path, monkeypatch):
    monkeypatch.setenv("KBOT_CACHE", str(tmp_path))
    assert load_ceilings("NVIDIA B200").source == "documented"
    path = save_ceilings(Ceilings(gpu_name="NVIDIA B200", device="cuda", copy_bandwidth_gbs=7100.0,
                                  matmul_tflops={"bf16": 1900.0}, measured_at="2026-12-01T00:00:00Z"))
    assert json.loads(path.read_text())["source"] == "measured"
    got = load_ceilings("NVIDIA B200")
    assert got.source == "measured" and got.copy_bandwidth_gbs == 7100.0


@pytest.mark.gpu
def test_on_a_real_gpu_the_extension_carries_the_device_s_sass(tmp_path):
    """On the runner: the built extension holds SASS for exactly the device's target (cuobjdump lists
    it), and the solution runs."""
    import shutil
    import subprocess

    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    cuobjdump = shutil.which("cuobjdump")
    arch = device_arch()
    fn, result = build_mod.build(load_solution(CUDA_SOLUTION), tmp_path, device="cuda")
    assert result.ok, result.errors
    assert callable(fn)
    (so,) = list((tmp_path / "build").glob("*.so"))
    if cuobjdump is None:
        pytest.skip("cuobjdump is not on PATH: the target is not inspected")
    listed = subprocess.run([cuobjdump, "--list-elf", str(so)], capture_output=True, text=True).stdout
    assert f".{arch}." in listed, listed
