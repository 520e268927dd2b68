"""The MoE floor is a lower bound for the routing a call was timed on, never an average.

The H200 recording (docs/measurements/h200-2026-12-01/04-moe-dev-evals.tar.gz, the seed's kbot eval,
run seed 0) holds an honest seed REJECTED at seq_len 80 (median 0.244928 ms against a "floor" of
0.328 ms that assumed every local expert is read). Rebuilt here from the workload and the run seed,
the timed routing reaches 11 of the 32 local experts: the floor is the one those experts' weights set,
and a time below it is still rejected.
"""

from __future__ import annotations

import json
import tarfile

import pytest

from harness.ceilings import Ceilings
from harness.timed_counts import TimedCounts, timed_input_counts
from harness.inputs import make_inputs
from harness.operators.moe import ROUTING_INPUTS, local_routing_counts
from harness.report import DeviceInfo, LatencyStats, Report, WorkloadResult
from harness.roofline import roofline
from harness.runner import apply_roofline
from harness.schema import Status, load_workloads

from opkit import MOE, REPO, ours, scalar, shrink, workload, gen
from test_references import SMALL

DDIR = REPO / "definitions" / MOE
RECORD = REPO / "docs" / "measurements" / "h200-2026-12-01" / "04-moe-dev-evals.tar.gz"


def recorded_report() -> dict:
    with tarfile.open(RECORD) as tar:
        return json.load(tar.extractfile("seed/report.json"))


def lat(ms: float) -> LatencyStats:
    return LatencyStats(median=ms, mean=ms, ci95=(ms, ms), stdev=0, sem=0, n=50, min=ms, max=ms)


def judged(defn, w, median_ms, rec, counts=None) -> WorkloadResult:
    rep = Report(run_id="r", definition=defn.name, solution="s", solution_hash="h", device=DeviceInfo(kind="cuda", name="NVIDIA H200", timer="cuda_events"),
                 started="t", config={"ceilings": rec["config"]["ceilings"]})
    r = WorkloadResult(uuid=w.uuid, axes=w.axes, status=Status.PASSED, latency_ms=lat(median_ms))
    apply_roofline(r, rep, defn, w, counts)
    return r


def test_the_recorded_honest_seed_at_80_tokens_passes_and_a_time_below_the_true_floor_does_not():
    defn, _ = ours(MOE)
    rec = recorded_report()
    w80 = next(w for w in load_workloads(DDIR / "workloads.jsonl", defn) if w.axes["seq_len"] == 80)
    got = next(x for x in rec["workloads"] if x["uuid"] == w80.uuid)
    assert got["status"] == "REJECTED" and "below-roofline" in got["message"]  # what the H200 run said
    median = got["latency_ms"]["median"]
    counts = TimedCounts(defn, [w80], seed=rec["config"]["seed"], definition_path=DDIR / "definition.json")
    r = judged(defn, w80, median, rec, counts)
    assert r.status is Status.PASSED, r.message
    assert r.roofline.input_counts_from == "the timed inputs"
    c = r.roofline.input_counts
    assert 0 < c["local_experts"] < 32 and c["local_tokens"] <= 80 and c["local_pairs"] <= 8 * 80
    assert r.roofline.floor_ms < median < got["roofline"]["floor_ms"]
    # the floor is the reached experts' weights (44.05 MB each) at 4.3 TB/s, plus a little
    per_expert = 4096 * 7168 + 7168 * 2048 + 4 * (32 * 56 + 56 * 16)
    assert r.roofline.bytes == pytest.approx(c["local_experts"] * per_expert, rel=0.01)
    # a kernel claiming to beat the true floor is still rejected
    fake = judged(defn, w80, 0.5 * r.roofline.floor_ms, rec, TimedCounts(defn, [w80], seed=0, definition_path=DDIR / "definition.json"))
    assert fake.status is Status.REJECTED and fake.findings[0].rule == "below-roofline"


def test_without_the_counts_the_lower_bounds_stand_in_and_say_so():
    defn, _ = ours(MOE)
    rec = recorded_report()
    w80 = next(w for w in load_workloads(DDIR / "workloads.jsonl", defn) if w.axes["seq_len"] == 80)
    r = judged(defn, w80, 0.05, rec)  # no counts: any routing is possible, even one reaching no local expert
    assert r.status is Status.PASSED
    assert r.roofline.input_counts == {"local_pairs": 0.0, "local_tokens": 0.0, "local_experts": 0.0}
    assert r.roofline.input_counts_from.startswith("lower bounds") and r.roofline.flops == 0
    assert r.roofline.bytes == 80 * 256 * 4 + 256 * 2 + 80 * 7168 * 2  # logits, bias, output


def test_the_axes_only_floor_is_below_the_counted_floor_on_every_workload():
    defn, _ = ours(MOE)
    c = Ceilings(gpu_name="NVIDIA H200", device="cuda", source="documented", copy_bandwidth_gbs=4300.0, matmul_tflops={"fp8": 1980.0, "bf16": 790.0})
    for w in load_workloads(DDIR / "workloads.small.jsonl", defn):
        axes = defn.resolve_axes(w.axes)
        given = timed_input_counts(defn, w, seed=0, definition_path=DDIR / "definition.json")
        counted, bound = roofline(defn, axes, c, given=given), roofline(defn, axes, c)
        assert bound.floor_ms <= counted.floor_ms and bound.bytes <= counted.bytes and bound.flops <= counted.flops
        assert counted.flops == given["local_pairs"] * 2 * (7168 * 4096 + 2048 * 7168)


@pytest.mark.parametrize("T,offset", [(1, 32), (9, 192), (70, 96)])
def test_the_routing_made_alone_is_the_routing_of_a_full_build(T, offset):
    """``only`` stops the builder after the routing: the values must be those of the full build the
    worker times on, or the parent would count another routing than the one timed."""
    defn, cfg = ours(MOE)
    defn = shrink(defn, **SMALL)
    w = workload({"seq_len": T}, routing_logits=gen("moe_routing_logits"), local_expert_offset=scalar(offset), routed_scaling_factor=scalar(1.5))
    full = make_inputs(defn, w, seed=77, config=cfg)
    alone = make_inputs(defn, w, seed=77, config=cfg, only=frozenset(ROUTING_INPUTS))
    assert set(alone) == set(ROUTING_INPUTS)
    for k in ROUTING_INPUTS:
        assert (alone[k] == full[k]).all() if hasattr(full[k], "shape") else alone[k] == full[k]
    axes = defn.resolve_axes(w.axes)
    assert local_routing_counts(alone, axes, cfg) == local_routing_counts(full, axes, cfg)


def test_kbot_profile_counts_the_profiled_inputs(tmp_path, monkeypatch):
    """`kbot profile` builds its inputs with PROFILE_SEED; its roofline counts those inputs' routing (the
    experts they touch), not the spec's lower bounds: the H200 profile of 2026-12-03 showed the 14107-token
    workload "91x over a 50 us floor" with FLOPs 0 where the counted floor is ~1.4 ms."""
    from click.testing import CliRunner

    import harness.ceilings as hc
    import harness.profile.pipeline as pl
    import torch
    from harness.cli_profile import PROFILE_SEED, profile_cmd
    from harness.defconfig import load_config
    from harness.profile import Collected
    from harness.timed_counts import input_counts_for

    defn, _ = ours(MOE)
    w = next(w for w in load_workloads(DDIR / "workloads.small.jsonl", defn))
    seen = {}

    def fake_profile(solution, definition, wl, wdir, **kw):
        seen.update(kw)
        wdir.mkdir(parents=True, exist_ok=True)
        return [Collected(source="ncu", evidence={"kernel_time_us": 900.0, "sm_count": 132})], {}

    c = Ceilings(gpu_name="NVIDIA H200", device="cuda", source="documented", copy_bandwidth_gbs=4300.0, matmul_tflops={"fp8": 1980.0, "bf16": 790.0})
    monkeypatch.setattr(pl, "profile_workload", fake_profile)
    monkeypatch.setattr(hc, "ceilings_for", lambda device: c)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    sol = DDIR / "reference_solution.json"
    r = CliRunner().invoke(profile_cmd, [str(sol), "-d", MOE, "--workloads", str(DDIR / "workloads.small.jsonl"),
                                 "--workload", w.uuid[:8], "--out", str(tmp_path), "--json", "--no-energy"])
    assert r.exit_code == 0, r.output
    assert seen["seed"] == PROFILE_SEED
    data = json.loads((tmp_path / MOE / w.uuid / "feedback.json").read_text())
    given = input_counts_for(defn, w, input_seed=PROFILE_SEED, definition_path=DDIR / "definition.json")
    inputs = make_inputs(defn, w, seed=PROFILE_SEED, config=load_config(MOE, DDIR / "definition.json"))
    assert given == {k: float(v) for k, v in local_routing_counts(inputs, defn.resolve_axes(w.axes), load_config(MOE, DDIR / "definition.json")).items()}
    assert given["local_pairs"] > 0
    counted = roofline(defn, defn.resolve_axes(w.axes), c, given=given)
    assert data["roofline"]["flops"] == pytest.approx(counted.flops) and data["roofline"]["flops"] > 0
    assert data["roofline"]["bytes"] == pytest.approx(counted.bytes)
