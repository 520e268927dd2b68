"""Ahead-of-time statistics for every Triton kernel of a solution, constexprs read from launch sites."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("triton")

from harness.profile.sass import find_tool  # noqa: E402
from harness.profile.triton_module import launch_hints, solution_triton_evidence  # noqa: E402
from harness.schema import load_definition, parse_solution  # noqa: E402

pytestmark = pytest.mark.skipif(find_tool("cuobjdump") is None, reason="cuobjdump not available")
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ncu" / "definitions"

SOURCE = '''
import torch
import triton
import triton.language as tl

BLOCK_SIZE = 2048


@triton.jit
def _combine(a, b):
    return a + b


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, _combine(tl.load(x_ptr + offs, mask=m), tl.load(y_ptr + offs, mask=m)), mask=m)


def run(x, y, out):
    n = x.numel()
    add_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, y, out, n, BLOCK=BLOCK_SIZE, num_warps=8)
'''


def test_launch_hints():
    h = launch_hints(SOURCE)
    assert h["add_kernel"] == [{"__positional": {}, "BLOCK": 2048, "num_warps": 8}]
    assert "_combine" not in h
    h = launch_hints("k[(1,)](a, 4, B=-2)\n")
    assert h["k"] == [{"__positional": {1: 4}, "B": -2}]


def _solution(source: str) -> object:
    return parse_solution({"name": "s", "definition": "kbot_vector_add_f32", "author": "t",
                           "spec": {"language": "triton", "target_hardware": ["H200"], "entry_point": "main.py::run"},
                           "sources": [{"path": "main.py", "content": source}]})


def test_solution_evidence_uses_launch_constants(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    d = load_definition(FIX / "kbot_vector_add_f32.json")
    c = solution_triton_evidence(_solution(SOURCE), d, tmp_path)
    assert c.ok, c.missing
    assert c.evidence["triton_kernel"] == "add_kernel"
    assert c.evidence["triton_num_warps"] == 8
    assert c.evidence["sass_ldg_128_pct"] == 100
    assert c.raw["kernels"]["add_kernel"]["launch"] == {"BLOCK": 2048, "num_warps": 8}


def test_unresolvable_constexpr_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    d = load_definition(FIX / "kbot_vector_add_f32.json")
    src = SOURCE.replace("BLOCK=BLOCK_SIZE", "BLOCK=triton.next_power_of_2(n)")
    c = solution_triton_evidence(_solution(src), d, tmp_path)
    assert not c.ok and "BLOCK" in c.missing


def test_import_failure_is_reported(tmp_path):
    d = load_definition(FIX / "kbot_vector_add_f32.json")
    c = solution_triton_evidence(_solution("import not_a_module_anywhere\n\ndef run(x, y, out):\n    pass\n"), d, tmp_path)
    assert not c.ok and "import failed" in c.missing


def test_explain_with_solution_only(tmp_path, monkeypatch):
    import click
    from click.testing import CliRunner

    from harness.cli_profile import register

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))

    @click.group()
    def cli():
        pass

    register(cli)
    spill_src = SOURCE.replace("BLOCK=BLOCK_SIZE, num_warps=8", "BLOCK=2048, num_warps=1").replace(
        "_combine(tl.load(x_ptr + offs, mask=m), tl.load(y_ptr + offs, mask=m))",
        "tl.exp(tl.load(x_ptr + offs, mask=m)) * tl.sum(tl.sin(tl.load(y_ptr + offs, mask=m)), 0)"
        " + tl.sum(tl.exp(tl.load(x_ptr + offs, mask=m)), 0) * tl.sin(tl.load(y_ptr + offs, mask=m))",
    )
    sol = tmp_path / "sol.json"
    sol.write_text(_solution(spill_src).to_json())
    r = CliRunner().invoke(cli, ["explain", "--solution", str(sol), "-d", str(FIX / "kbot_vector_add_f32.json"), "-w", "N=16777216", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    rules = [i["rule"] for i in data["items"]]
    assert rules and rules[0].startswith("register_spills"), rules
    assert data["missing"]["ncu"] == "no --ncu-csv given"
    r = CliRunner().invoke(cli, ["explain", "-d", str(FIX / "kbot_vector_add_f32.json"), "-w", "N=16"])
    assert r.exit_code == 2 and "at least one of" in r.output


def test_run_isolated_and_profile_report_static(tmp_path):
    from harness.ceilings import documented_ceilings
    from harness.profile.pipeline import profile_report
    from harness.profile.triton_module import run_isolated
    from harness.report import DeviceInfo, LatencyStats, Report, WorkloadResult
    from harness.schema import Status, Workload

    d = load_definition(FIX / "kbot_vector_add_f32.json")
    c = run_isolated(_solution(SOURCE), d, tmp_path / "iso")
    assert c.ok, c.missing
    assert c.evidence["triton_kernel"] == "add_kernel" and c.evidence["sass_ldg_128_pct"] == 100
    lat = LatencyStats(median=0.1, mean=0.1, ci95=(0.1, 0.1), stdev=0.0, sem=0.0, n=3, min=0.1, max=0.1)
    report = Report(
        run_id="r",
        definition=d.name,
        solution="s",
        solution_hash="h",
        device=DeviceInfo(kind="cpu", name="cpu", timer="cpu_monotonic"),
        started="now",
        workloads=[WorkloadResult(uuid="w", axes={"N": 1 << 20}, status=Status.PASSED, latency_ms=lat)],
    )
    profile_report(
        report,
        tmp_path / "run",
        d,
        _solution(SOURCE),
        [Workload(uuid="w", axes={"N": 1 << 20}, inputs={})],
        ceilings=documented_ceilings("NVIDIA H200"),
        profile=False,
    )
    w = report.workloads[0]
    assert w.profile["evidence"]["triton"]["triton_kernel"] == "add_kernel"
    assert "register_spills_triton" not in {n["rule"] for n in w.profile["not_evaluated"]}


def test_the_statistics_child_runs_the_candidate_sandboxed_and_leaves_the_run_folder_alone(tmp_path):
    """`kbot eval --profile` imports the candidate in a child: sandboxed, in a private folder outside the
    run folder, so a module that tries to leave a file or read one elsewhere gets nothing, and the run
    folder only holds what the parent wrote."""
    from harness import sandbox
    from harness.ceilings import documented_ceilings
    from harness.profile.pipeline import profile_report
    from harness.profile.triton_module import run_isolated
    from harness.report import DeviceInfo, LatencyStats, Report, WorkloadResult
    from harness.schema import Status, Workload

    if sandbox.landlock_abi() < 1:
        pytest.skip("no Landlock here")
    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    planted = tmp_path / "planted.txt"
    probe = (f"import os\ntry:\n    open({str(planted)!r}, 'w').write('x')\nexcept OSError:\n    pass\n"
             f"try:\n    open({str(secret)!r}).read()\n    raise SystemExit('read a file outside the sandbox')\nexcept OSError:\n    pass\n")
    d = load_definition(FIX / "kbot_vector_add_f32.json")
    c = run_isolated(_solution(probe + SOURCE), d, sandbox_mode="required")
    assert c.ok, c.missing
    assert not planted.exists()
    lat = LatencyStats(median=0.1, mean=0.1, ci95=(0.1, 0.1), stdev=0.0, sem=0.0, n=3, min=0.1, max=0.1)
    report = Report(run_id="r", definition=d.name, solution="s", solution_hash="h", isolation={"mode": "required"},
                    device=DeviceInfo(kind="cpu", name="cpu", timer="cpu_monotonic"), started="now",
                    workloads=[WorkloadResult(uuid="w", axes={"N": 1 << 20}, status=Status.PASSED, latency_ms=lat)])
    run = tmp_path / "run"
    profile_report(report, run, d, _solution(probe + SOURCE), [Workload(uuid="w", axes={"N": 1 << 20}, inputs={})],
                   ceilings=documented_ceilings("NVIDIA H200"), profile=False)
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file()) == ["profile/w/feedback.json", "profile/w/feedback.md"]
    assert report.workloads[0].profile["evidence"]["triton"]["triton_kernel"] == "add_kernel"
