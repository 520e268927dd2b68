"""Every passing workload is placed on the roofline by the parent; impossible times are rejected."""

from harness.ceilings import Ceilings
from harness.report import DeviceInfo, LatencyStats, Report, WorkloadResult
from harness.runner import apply_roofline
from harness.schema import Status, load_definition, load_workloads

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _setup(median_ms, kind="cuda"):
    d = load_definition(REPO / "definitions/rmsnorm_h4096/definition.json")
    w = load_workloads(REPO / "definitions/rmsnorm_h4096/workloads.jsonl", d)[-1]  # 16384 rows
    c = Ceilings(gpu_name="NVIDIA H200", device="cuda", source="measured", copy_bandwidth_gbs=4000.0, matmul_tflops={"bf16": 790.0, "fp32": 60.0})
    rep = Report(run_id="r", definition=d.name, solution="s", solution_hash="h", device=DeviceInfo(kind=kind, name="x", timer="cuda_events"), started="t", config={"ceilings": c.model_dump(mode="json")})
    lat = LatencyStats(median=median_ms, mean=median_ms, ci95=(median_ms, median_ms), stdev=0, sem=0, n=50, min=median_ms, max=median_ms)
    r = WorkloadResult(uuid=w.uuid, axes=w.axes, status=Status.PASSED, latency_ms=lat)
    return r, rep, d, w


def test_roofline_fraction_in_report():
    r, rep, d, w = _setup(0.0700)
    apply_roofline(r, rep, d, w)
    bytes_ = 2 * 16384 * 4096 * 2 + 4096 * 2
    assert r.status is Status.PASSED
    assert abs(r.roofline.bytes - bytes_) / bytes_ < 0.01
    assert abs(r.roofline.floor_ms - bytes_ / 4.0e12 * 1e3) < 1e-6
    assert 0.9 < r.roofline.fraction < 1.0 and r.roofline.bound == "memory"


def test_time_below_the_floor_is_rejected():
    r, rep, d, w = _setup(0.010)  # 7x faster than moving the bytes allows
    apply_roofline(r, rep, d, w)
    assert r.status is Status.REJECTED and r.findings[0].rule == "below-roofline"


def _kt(median_ms):
    from harness.report import KernelTime

    return KernelTime(latency_ms=LatencyStats(median=median_ms, mean=median_ms, ci95=(median_ms, median_ms), stdev=0, sem=0, n=50, min=median_ms, max=median_ms))


def test_a_kernel_time_inside_the_event_time_and_above_the_floor_stays():
    r, rep, d, w = _setup(0.0700)
    r.kernel_time = _kt(0.0665)
    apply_roofline(r, rep, d, w)
    assert r.kernel_time.latency_ms.median == 0.0665 and r.kernel_time.withheld == ""


def test_a_kernel_time_longer_than_the_events_or_below_the_floor_is_withheld():
    for kt, words in ((0.0900, "not possible beside the event time"), (0.0100, "below the physical floor"), (0.0, "not possible")):
        r, rep, d, w = _setup(0.0700)
        r.kernel_time = _kt(kt)
        apply_roofline(r, rep, d, w)
        assert r.status is Status.PASSED and r.kernel_time.latency_ms is None and words in r.kernel_time.withheld, (kt, r.kernel_time)
