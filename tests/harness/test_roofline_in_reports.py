"""Every passing workload is placed on the roofline by the parent; impossible times are rejected."""

from pathlib import Path

from harness.ceilings import Ceilings
from harness.report import DeviceInfo, LatencyStats, Report, WorkloadResult
from harness.runner import apply_roofline
from harness.schema import Status, load_definition, load_workloads

REPO = Path(__file__).resolve().parents[2]


def _setup(median_ms, kind="cuda"):
    d = load_definition(REPO / "definitions/rmsnorm_h4096/definition.json")
    w = load_workloads(REPO / "definitions/rmsnorm_h4096/workloads.jsonl", d)[-1]  # 16384 rows
    c = Ceilings(gpu_name="NVIDIA H200", device="cuda", source="measured", copy_bandwidth_gbs=4000.0, matmul_tflops={"bf16": 790.0, "fp32": 60.0})
    rep = Report(
        run_id="r",
        definition=d.name,
        solution="s",
        solution_hash="h",
        device=DeviceInfo(kind=kind, name="x", timer="cuda_events"),
        started="t",
        config={"ceilings": c.model_dump(mode="json")},
    )
    lat = LatencyStats(median=median_ms, mean=median_ms, ci95=(median_ms, median_ms), stdev=0, sem=0, n=50, min=median_ms, max=median_ms)
    r = WorkloadResult(uuid=w.uuid, axes=w.axes, status=Status.PASSED, latency_ms=lat)
    return r, rep, d, w


def test_roofline_fraction_in_report():
    r, rep, d, w = _setup(0.0750)
    apply_roofline(r, rep, d, w)
    bytes_ = 2 * 16384 * 4096 * 2 + 4096 * 2
    assert r.status is Status.PASSED
    assert abs(r.roofline.bytes - bytes_) / bytes_ < 0.01
    # the work's floor plus the H200's documented launch floor (these ceilings measured none)
    assert abs(r.roofline.floor_ms - (bytes_ / 4.0e12 * 1e3 + 3.33e-3)) < 1e-6
    assert abs(r.roofline.model_extra["work_floor_ms"] - bytes_ / 4.0e12 * 1e3) < 1e-6
    assert 0.9 < r.roofline.fraction < 1.0 and r.roofline.bound == "memory"


def test_the_guard_judges_the_work_floor_not_the_launch_term():
    """A median between the work's floor and the floor with the launch term is possible (a launch
    floor read on a slow day, a device whose floor is lower): it passes, at a fraction above 1."""
    r, rep, d, w = _setup(0.0680)  # work floor 0.0671 ms, with the launch 0.0705 ms
    apply_roofline(r, rep, d, w)
    assert r.status is Status.PASSED and r.roofline.fraction > 1.0


def test_time_below_the_floor_is_rejected():
    r, rep, d, w = _setup(0.010)  # 7x faster than moving the bytes allows
    apply_roofline(r, rep, d, w)
    assert r.status is Status.REJECTED and r.findings[0].rule == "below-roofline"


def _kt(median_ms):
    from harness.report import KernelTime

    return KernelTime(
        latency_ms=LatencyStats(median=median_ms, mean=median_ms, ci95=(median_ms, median_ms), stdev=0, sem=0, n=50, min=median_ms, max=median_ms)
    )


def test_a_kernel_time_inside_the_event_time_and_above_the_floor_stays():
    r, rep, d, w = _setup(0.0700)
    r.kernel_time = _kt(0.0665)
    apply_roofline(r, rep, d, w)
    assert r.kernel_time.latency_ms.median == 0.0665 and r.kernel_time.withheld == ""


def test_a_kernel_time_longer_than_the_events_or_below_the_floor_is_withheld():
    # (event median, kernel median): the floor is 0.0671 ms (x0.9 tolerance: 0.0604)
    for ev, kt, words in ((0.0700, 0.0900, "not possible beside the event time"), (0.0620, 0.0590, "below the physical floor"), (0.0700, 0.0, "not possible")):
        r, rep, d, w = _setup(ev)
        r.kernel_time = _kt(kt)
        apply_roofline(r, rep, d, w)
        assert r.status is Status.PASSED and r.kernel_time.latency_ms is None and words in r.kernel_time.withheld, (kt, r.kernel_time)


def test_a_kernel_time_short_of_the_event_time_by_more_than_launch_overhead_is_withheld():
    r, rep, d, w = _setup(0.0700)
    r.kernel_time = _kt(0.0670)  # 3 µs short: the launch floor
    apply_roofline(r, rep, d, w)
    assert r.kernel_time.latency_ms is not None
    r, rep, d, w = _setup(0.0700)
    r.kernel_time = _kt(0.0450)  # 25 µs short of the events
    apply_roofline(r, rep, d, w)
    assert r.kernel_time.latency_ms is None and "more than launch overhead" in r.kernel_time.withheld
    r, rep, d, w = _setup(0.0700)
    r.profile = {"late_kept": 12}  # host-bound calls: host time sits between the events, the gap says nothing
    r.kernel_time = _kt(0.0660)
    apply_roofline(r, rep, d, w)
    assert r.kernel_time.latency_ms is not None


def test_impossible_baseline_or_reference_kernel_times_are_dropped_with_their_ratios():
    from harness.report import PairedRatio

    r, rep, d, w = _setup(0.0700)
    r.baseline_latency_ms = r.reference_latency_ms = r.latency_ms
    r.kernel_time = _kt(0.0665)
    r.kernel_time.baseline_latency_ms = _kt(0.2).latency_ms  # longer than the baseline's own events
    r.kernel_time.speedup_vs_baseline = PairedRatio(median=3.0, ci95=(2.9, 3.1), n=50)
    r.kernel_time.reference_latency_ms = _kt(0.0680).latency_ms
    r.kernel_time.speedup_vs_reference = 1.02
    apply_roofline(r, rep, d, w)
    kt = r.kernel_time
    assert kt.latency_ms is not None and kt.baseline_latency_ms is None and kt.speedup_vs_baseline is None
    assert kt.reference_latency_ms is not None and kt.speedup_vs_reference == 1.02 and kt.withheld.startswith("baseline:")


def test_rejected_and_failed_rows_carry_no_kernel_time():
    r, rep, d, w = _setup(0.010)  # below the floor: REJECTED
    r.kernel_time = _kt(0.009)
    apply_roofline(r, rep, d, w)
    assert r.status is Status.REJECTED and r.kernel_time is None
    r, rep, d, w = _setup(0.0700)
    r.status, r.kernel_time = Status.INCORRECT_NUMERICAL, _kt(0.0665)
    apply_roofline(r, rep, d, w)
    assert r.kernel_time is None
