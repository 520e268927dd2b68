"""Launch signatures recorded as the candidate's Triton kernels are launched, and the ahead-of-time sm_90
compile of exactly those: the DSA sparse-attention seed (its constexprs come from shapes, its pointers
from how ``run`` builds the tensors, so nothing in the source says them; on the H200 its statistics were
missing: docs/measurements/h200-2026-12-02/03-campaign.log) and the GDN decode seed through the real
worker (``kbot eval --profile`` on the CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

from harness.profile.launches import MAX_SIGNATURES, LaunchRecorder, launch_signature  # noqa: E402
from harness.profile.sass import find_tool  # noqa: E402
from harness.report import DeviceInfo, LatencyStats, LaunchSignature, Report, WorkloadResult  # noqa: E402
from harness.schema import Status, load_definition  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ATTENTION = "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"
GDN_DECODE = "gdn_decode_qk4_v8_d128_k_last"
needs_cuobjdump = pytest.mark.skipif(find_tool("cuobjdump") is None, reason="cuobjdump not available")

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, idx_ptr, n, big, eps, flag, maybe, BLOCK: tl.constexpr, MODE: tl.constexpr = 2):
    pass
'''


def _module(tmp_path: Path, source: str, name: str = "kmod"):
    import importlib.util

    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "main.py").write_text(source)
    spec = importlib.util.spec_from_file_location(name, src / "main.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return src, mod


def test_a_launch_is_typed_as_the_jit_types_it(tmp_path):
    import torch

    src, mod = _module(tmp_path, KERNEL)
    x = torch.zeros(64, dtype=torch.bfloat16)
    idx = torch.zeros(65, dtype=torch.int32)[1:]  # 4 bytes past an aligned start: not 16-byte aligned
    sig = launch_signature(mod.k, (x, idx, 4096, 1 << 40, 1e-6), {"flag": True, "maybe": None, "BLOCK": 256,
                                                                   "num_warps": 8, "grid": (1,), "warmup": False}, str(src))
    assert sig["kernel"] == "k" and sig["source"] == "main.py"
    assert sig["signature"] == {"x_ptr": "*bf16", "idx_ptr": "*i32", "n": "i32", "big": "i64", "eps": "fp32", "flag": "i1",
                                "maybe": "constexpr", "BLOCK": "constexpr", "MODE": "constexpr"}
    assert sig["constexprs"] == {"maybe": None, "BLOCK": 256, "MODE": 2}  # MODE from its default
    assert sig["options"] == {"num_warps": 8} and sig["unsupported"] == []
    assert sig["divisible"] == ["x_ptr", "n", "big"]  # idx_ptr is not 16-byte aligned
    LaunchSignature.model_validate(sig)  # what the worker sends is what the report's model takes
    odd = launch_signature(mod.k, (x, object(), 1, 1, 1.0, False, None), {"BLOCK": [1, 2]}, str(src))
    assert odd["unsupported"] == ["idx_ptr (object)", "BLOCK (constexpr of type list)"]
    assert launch_signature(mod.k, (x,), {}, str(tmp_path / "elsewhere")) is None  # not the solution's own kernel


def test_the_recorder_keeps_distinct_signatures_in_the_order_of_their_last_launch(tmp_path):
    import torch

    src, mod = _module(tmp_path, KERNEL, "kmod2")
    x, i = torch.zeros(64, dtype=torch.float32), torch.zeros(64, dtype=torch.int32)
    rec = LaunchRecorder(src)
    for block in (64, 128, 64):  # an autotuner's benchmark runs, then its choice
        rec.observe(mod.k, (x, i, 16, 16, 1.0, False, None), {"BLOCK": block})
    rec.observe(object(), (), {})  # not a kernel: ignored, never raised
    got = rec.take()
    assert [(g["constexprs"]["BLOCK"], g["count"]) for g in got] == [(128, 1), (64, 2)]
    assert rec.take() == []
    for block in range(MAX_SIGNATURES + 5):
        rec.observe(mod.k, (x, i, 16, 16, 1.0, False, None), {"BLOCK": block})
    assert len(rec.take()) == MAX_SIGNATURES


# Runs the seed's run() once under the Triton interpreter with the worker's launch counter and recorder
# installed, on the definition's first small workload, and prints what was recorded.
RECORD = r"""
import importlib.util, json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch
torch.set_num_threads(1)
from pathlib import Path
from bot.agents.providers.offline import load_seeds
from harness.defconfig import load_config
from harness.guard.runtime import LaunchCounter
from harness.inputs import allocate_outputs, make_inputs
from harness.measure import call_solution
from harness.profile.launches import LaunchRecorder
from harness.schema import load_definition, load_workloads
name, src = sys.argv[1], Path(sys.argv[2])
dpath = Path("definitions") / name / "definition.json"
defn = load_definition(dpath)
w = load_workloads(Path("definitions") / name / "workloads.small.jsonl", defn)[0]
sol = load_seeds(name)[0]
src.mkdir(parents=True)
(src / "main.py").write_text(sol.source("main.py"))
counter = LaunchCounter(own_paths=[src]).install()
rec = LaunchRecorder(src)
counter.on_launch = rec.observe
spec = importlib.util.spec_from_file_location("seed_main", src / "main.py")
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
inputs = make_inputs(defn, w, seed=0, device="cpu", config=load_config(name, dpath))
outputs = allocate_outputs(defn, defn.resolve_axes(w.axes), "cpu") if sol.spec.destination_passing_style else None
call_solution(mod.run, defn, inputs, outputs)
print(json.dumps({"workload": w.uuid, "axes": w.axes, "launches": rec.take(), "own": counter.count}))
"""


def _report_with(uuid: str, axes: dict, launches: list, device: str = "cpu") -> Report:
    lat = LatencyStats(median=1.0, mean=1.0, ci95=(1.0, 1.0), stdev=0.0, sem=0.0, n=3, min=1.0, max=1.0)
    return Report(run_id="r", definition="d", solution="s", solution_hash="h", started="now",
                  device=DeviceInfo(kind=device, name=device, timer="cpu_monotonic"),
                  workloads=[WorkloadResult(uuid=uuid, axes=axes, status=Status.PASSED, latency_ms=lat,
                                            launches=[LaunchSignature.model_validate(x) for x in launches])])


@needs_cuobjdump
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_dsa_attention_seed_compiles_ahead_of_time_from_its_recorded_launches(tmp_path):
    from bot.agents.providers.offline import load_seeds
    from bot.agents.tunables import solution_tunables
    from harness.profile.triton_module import recorded_launches, run_isolated

    p = subprocess.run([sys.executable, "-c", RECORD, ATTENTION, str(tmp_path / "src")], cwd=REPO, capture_output=True, text=True,
                       timeout=600, env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    by = {x["kernel"]: x for x in got["launches"]}
    assert set(by) == {"_attend", "_merge"} and got["own"] == 2  # split-KV then the merge
    attend = by["_attend"]
    assert attend["signature"]["qn_ptr"] == "*bf16" and attend["signature"]["idx_ptr"] == "*i32"
    assert attend["signature"]["lse_ptr"] == "*fp32" and attend["signature"]["sm_scale"] == "fp32"
    assert {k: attend["constexprs"][k] for k in ("H", "DC", "DP", "TOPK")} == {"H": 16, "DC": 512, "DP": 64, "TOPK": 2048}
    assert attend["constexprs"]["WIDEN"] is True  # recorded on the CPU: the interpreter's path
    warps = {t.key: t.value for t in solution_tunables(load_seeds(ATTENTION)[0])}["NUM_WARPS"]
    assert attend["options"] == {"num_warps": warps}  # the seed's NUM_WARPS, as it launched

    definition = load_definition(REPO / "definitions" / ATTENTION / "definition.json")
    sol = load_seeds(ATTENTION)[0]
    launches = recorded_launches(_report_with(got["workload"], got["axes"], got["launches"]))
    assert {x["kernel"]: (x["workload"], x["device"], x["distinct"]) for x in launches} == {
        "_attend": (got["workload"], "cpu", 1), "_merge": (got["workload"], "cpu", 1)}
    c = run_isolated(sol, definition, sandbox_mode="off", launches=launches)
    assert c.ok, c.missing
    kernels = c.raw["kernels"]
    # _merge_heads (the merge below MERGE_PAR_MIN_SPLITS splits) and _attend_rows_m (the wgmma form, from
    # SWAP_FROM_T tokens) were not launched on these workloads: each is compiled from its launch site in
    # the source where that can be typed, and says why not otherwise
    assert set(kernels) == {"_attend", "_attend_rows_m", "_merge", "_merge_heads"}
    for other in (kernels["_merge_heads"], kernels["_attend_rows_m"]):
        assert other.get("from") == "launch site in the source" or other.get("missing"), other
    for name in ("_attend", "_merge"):
        ev = kernels[name]["evidence"]
        assert kernels[name]["from"] == "recorded launch" and kernels[name]["device"] == "cpu"
        assert ev["triton_registers"] > 0 and ev["triton_spill_bytes"] >= 0 and ev["triton_shared_bytes"] >= 0
        assert ev["sass_instructions"] > 0
    assert c.evidence["triton_kernel"] == "_attend"  # the larger kernel leads
    assert kernels["_attend"]["launch"]["NSPLIT"] == attend["constexprs"]["NSPLIT"]
    # Without the recorded launches, the source alone cannot say the pointers' dtypes or H: as on the H200.
    bare = run_isolated(sol, definition, sandbox_mode="off")
    assert not bare.ok and "_attend: cannot infer the signature" in bare.missing and "H (constexpr: give its value)" in bare.missing


@needs_cuobjdump
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_kbot_eval_records_the_launches_and_the_profile_compiles_them(tmp_path):
    """The whole path on this CPU: the worker records the launches of its correctness calls, the report
    carries them, and the profile's ahead-of-time compile uses them (the GDN decode seed's pointers and
    constexprs cannot be read from its source either)."""
    from bot.agents.providers.offline import load_seeds
    from harness.profile.triton_module import run_isolated

    sol = load_seeds(GDN_DECODE)[0]
    definition = load_definition(REPO / "definitions" / GDN_DECODE / "definition.json")
    assert not run_isolated(sol, definition, sandbox_mode="off").ok  # from the source alone: missing
    path = tmp_path / "sol.json"
    path.write_text(sol.model_dump_json())
    wl = tmp_path / "w.jsonl"
    wl.write_text((REPO / "definitions" / GDN_DECODE / "workloads.small.jsonl").read_text().splitlines()[0] + "\n")
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "harness.cli", "eval", str(path), "-d", GDN_DECODE, "--device", "cpu",
                        "--workloads", str(wl), "--trials", "1", "--budget", "0.01", "--timing", "warmup=1",
                        "--timing", "min_iters=2", "--timing", "recheck=1", "--timing", "chunk=2", "--out", str(out),
                        "--profile", "--profile-budget", "300"],
                       cwd=REPO, capture_output=True, text=True, timeout=900,
                       env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    [w] = report["workloads"]
    assert w["status"] == "PASSED", w["message"]
    assert [x["kernel"] for x in w["launches"]] == ["_gdn_decode_step"] and w["launches"][0]["count"] >= 1
    assert report["profiling"]["static"] == "ok" and report["profiling"]["within_budget"]
    assert [s["step"] for s in report["profiling"]["steps"]] == ["static"]
    triton = w["profile"]["evidence"]["triton"]
    assert triton["triton_kernel"] == "_gdn_decode_step" and triton["triton_registers"] > 0 and "triton_spill_bytes" in triton
    assert "triton" not in w["profile"]["missing"]
