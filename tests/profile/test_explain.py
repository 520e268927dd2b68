"""`kbot explain` and the pipeline on constructed ncu CSVs shaped like the flawed-kernel cases."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from ncu_csv_builder import raw_csv, stalls

from harness.ceilings import documented_ceilings
from harness.cli_profile import parse_axes, register
from harness.profile.pipeline import explain_csv, profile_report
from harness.report import DeviceInfo, LatencyStats, Report, WorkloadResult
from harness.schema import Status, Workload, load_definition

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ncu" / "definitions"
H200 = documented_ceilings("NVIDIA H200")


def common(**over):
    m = {
        "gpu__time_duration.sum": ("usecond", 100.0),
        "launch__grid_size": ("", 16384),
        "launch__block_size": ("", 128),
        "launch__waves_per_multiprocessor": ("", 7.76),
        "device__attribute_multiprocessor_count": ("", 132),
        "sm__throughput.avg.pct_of_peak_sustained_elapsed": ("%", 20.0),
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": ("%", 85.0),
        "sm__warps_active.avg.pct_of_peak_sustained_active": ("%", 85.0),
        "sm__maximum_warps_per_active_cycle_pct": ("%", 100.0),
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": ("sector", 1_048_576),
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": ("", 65_536),
        "sm__sass_data_bytes_mem_global_op_ld.sum": ("byte", 33_554_432),
        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": ("sector", 524_288),
        "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": ("", 32_768),
        "sm__sass_data_bytes_mem_global_op_st.sum": ("byte", 16_777_216),
        "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum": ("byte", 0),
        "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum": ("byte", 0),
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": ("%", 0.0),
        "dram__bytes_read.sum": ("byte", 134_217_728),
        "dram__bytes_write.sum": ("byte", 67_108_864),
        "lts__t_sector_hit_rate.pct": ("%", 30.0),
        **stalls(long_scoreboard=3.0),
    }
    m.update(over)
    return m


def vadd(n):
    d = load_definition(FIX / "kbot_vector_add_f32.json")
    return d, d.resolve_axes({"N": n})


def test_small_grid_diagnosis():
    d, axes = vadd(1 << 22)
    text = raw_csv([("add_few_programs", common(**{
        "gpu__time_duration.sum": ("usecond", 900.0), "launch__grid_size": ("", 4), "launch__waves_per_multiprocessor": ("", 0.0019),
        "sm__throughput.avg.pct_of_peak_sustained_elapsed": ("%", 1.2),
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": ("%", 2.5),
        "sm__warps_active.avg.pct_of_peak_sustained_active": ("%", 6.2), "sm__maximum_warps_per_active_cycle_pct": ("%", 100.0),
        **stalls(long_scoreboard=9.0)}))])
    out = explain_csv(text, d, axes, ceilings=H200)
    assert out.feedback[0].rule == "grid_too_small" and out.feedback[0].severity == "critical"
    assert "4 blocks" in out.feedback[0].title
    assert out.roofline.bound == "latency"


def test_uncoalesced_diagnosis():
    d = load_definition(FIX / "kbot_transpose_f32.json")
    axes = d.resolve_axes({"R": 4096, "C": 4096})
    text = raw_csv([("transpose_strided", common(**{
        "gpu__time_duration.sum": ("usecond", 300.0),
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": ("sector", 16_777_216),
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": ("", 524_288),
        "sm__sass_data_bytes_mem_global_op_ld.sum": ("byte", 67_108_864),
        **stalls(long_scoreboard=12.0)}))])
    out = explain_csv(text, d, axes, ceilings=H200)
    top = out.feedback[0]
    assert top.rule == "uncoalesced_global_loads" and top.severity == "critical"
    assert top.evidence["global_load_efficiency_pct"] == pytest.approx(12.5)


def test_good_kernel_no_high_severity_false_alarm():
    d, axes = vadd(1 << 24)
    # 201 MB in 52 us = 3.87 TB/s: 90% of the documented 4.3 TB/s copy ceiling.
    text = raw_csv([("add_good", common(**{"gpu__time_duration.sum": ("usecond", 52.0)}))])
    out = explain_csv(text, d, axes, ceilings=H200)
    assert not [i for i in out.feedback if i.severity in ("critical", "high")], [(i.severity, i.rule) for i in out.feedback]
    assert out.roofline.fraction == pytest.approx(201_326_592 / 4300e9 * 1e3 / 0.052, rel=1e-6)


def test_near_floor_gives_stop_signal():
    d, axes = vadd(1 << 24)
    text = raw_csv([("add_good", common(**{"gpu__time_duration.sum": ("usecond", 47.5)}))])
    out = explain_csv(text, d, axes, ceilings=H200)
    assert out.feedback.stop


def test_parse_axes():
    assert parse_axes("M=128, N=4096") == {"M": 128, "N": 4096}
    assert parse_axes('{"M": 3}') == {"M": 3}
    assert parse_axes("906efdc6-aa3b") is None
    with pytest.raises(ValueError):
        parse_axes("M=abc")


@pytest.fixture()
def cli():
    @click.group()
    def g():
        pass

    register(g)
    return g


def test_explain_command_markdown_and_json(cli, tmp_path):
    csv_path = tmp_path / "k.csv"
    csv_path.write_text(raw_csv([("add_few_programs", common(**{"launch__grid_size": ("", 4)}))]))
    r = CliRunner().invoke(cli, ["explain", "--ncu-csv", str(csv_path), "-d", str(FIX / "kbot_vector_add_f32.json"),
                                 "-w", "N=4194304"])
    assert r.exit_code == 0, r.output
    assert "grid_too_small" in r.output and "CRITICAL" in r.output and "Roofline:" in r.output
    out = tmp_path / "fb.json"
    r = CliRunner().invoke(cli, ["explain", "--ncu-csv", str(csv_path), "-d", str(FIX / "kbot_vector_add_f32.json"),
                                 "-w", "N=4194304", "--json", "--out", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["items"][0]["rule"] == "grid_too_small"
    assert data["roofline"]["bytes"] == 3 * 4 * 4194304
    assert any(n["rule"] == "register_spills_sass" for n in data["not_evaluated"])


def test_explain_bad_inputs(cli, tmp_path):
    csv_path = tmp_path / "k.csv"
    csv_path.write_text("not a csv\n")
    r = CliRunner().invoke(cli, ["explain", "--ncu-csv", str(csv_path), "-d", str(FIX / "kbot_vector_add_f32.json"), "-w", "N=x"])
    assert r.exit_code == 2 and "not an integer" in r.output
    r = CliRunner().invoke(cli, ["explain", "--ncu-csv", str(csv_path), "-d", str(FIX / "kbot_vector_add_f32.json"), "-w", "N=16"])
    assert r.exit_code == 0 and "ncu evidence missing" in r.output


def test_explain_by_workload_uuid(cli, tmp_path, shared):
    dpath = shared / "flashinfer-trace/definitions/rmsnorm/rmsnorm_h4096.json"
    wpath = shared / "flashinfer-trace/workloads/rmsnorm/rmsnorm_h4096.jsonl"
    uuid = json.loads(wpath.read_text().splitlines()[0])["workload"]["uuid"]
    csv_path = tmp_path / "k.csv"
    csv_path.write_text(raw_csv([("rmsnorm_kernel", common(**{"gpu__time_duration.sum": ("usecond", 9.0), "launch__grid_size": ("", 8)}))]))
    r = CliRunner().invoke(cli, ["explain", "--ncu-csv", str(csv_path), "-d", str(dpath), "-w", uuid[:8],
                                 "--workloads", str(wpath), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["items"]


def test_profile_report_folds_roofline_and_rule_items(tmp_path):
    d, axes = vadd(1 << 24)
    lat = LatencyStats(median=0.060, mean=0.061, ci95=(0.059, 0.062), stdev=0.001, sem=0.0001, n=50, min=0.058, max=0.07)
    report = Report(run_id="r", definition=d.name, solution="s", solution_hash="h",
                    device=DeviceInfo(kind="cuda", name="NVIDIA H200", timer="cuda_events"), started="now",
                    workloads=[WorkloadResult(uuid="w1", axes={"N": 1 << 24}, status=Status.PASSED, latency_ms=lat),
                               WorkloadResult(uuid="w2", axes={"N": 16}, status=Status.RUNTIME_ERROR)])
    wl = [Workload(uuid="w1", axes={"N": 1 << 24}, inputs={}), Workload(uuid="w2", axes={"N": 16}, inputs={})]
    profile_report(report, tmp_path, d, None, wl, ceilings=H200, profile=False)
    w1, w2 = report.workloads
    assert w1.roofline is not None and w1.roofline.fraction == pytest.approx(w1.roofline.floor_ms / 0.060)
    assert w1.profile["not_evaluated"]  # ncu rules listed as not evaluated, with reasons
    assert (tmp_path / "profile" / "w1" / "feedback.md").is_file()
    assert w2.roofline is None and not w2.feedback


def test_profile_report_profiles_a_spread_of_workloads(tmp_path, monkeypatch):
    import harness.profile.pipeline as pl
    from harness.profile import Collected

    calls = []

    seeds = {}

    def fake_profile(solution, definition, w, wdir, **kw):
        calls.append(w.axes["N"])
        seeds[w.uuid] = kw.get("seed")
        return [Collected(source="ncu", evidence={"grid_size": 4, "sm_count": 132})], {"ncu_csv": "x"}

    monkeypatch.setattr(pl, "profile_workload", fake_profile)
    d, _ = vadd(1)
    sizes = [1 << k for k in range(10, 20)]
    lat = LatencyStats(median=1.0, mean=1.0, ci95=(1.0, 1.0), stdev=0.0, sem=0.0, n=3, min=1.0, max=1.0)
    report = Report(run_id="r", definition=d.name, solution="s", solution_hash="h",
                    device=DeviceInfo(kind="cuda", name="NVIDIA H200", timer="cuda_events"), started="now",
                    workloads=[WorkloadResult(uuid=f"w{n}", axes={"N": n}, status=Status.PASSED, latency_ms=lat) for n in sizes])
    wl = [Workload(uuid=f"w{n}", axes={"N": n}, inputs={}) for n in sizes]
    profile_report(report, tmp_path, d, None, wl, ceilings=H200, max_profiled=3)
    assert len(calls) == 3 and min(calls) == sizes[0] and max(calls) == sizes[-1]
    # the profiled inputs are the timed ones (their counts set the roofline): the timed trial's seed
    from harness.inputs import TIMED_TRIAL, seed_for

    assert seeds and all(v == seed_for(0, u, TIMED_TRIAL) for u, v in seeds.items()), seeds
    profiled = [w for w in report.workloads if w.feedback and w.feedback[0].rule == "grid_too_small"]
    assert len(profiled) == 3
    others = [w for w in report.workloads if w.axes["N"] not in calls]
    assert all(w.roofline is not None and "not profiled" in w.profile["missing"]["ncu"] for w in others)


def test_explain_with_a_ceilings_file(cli, tmp_path):
    csv_path = tmp_path / "k.csv"
    csv_path.write_text(raw_csv([("add_good", common(**{"gpu__time_duration.sum": ("usecond", 52.0)}))]))
    ceil = tmp_path / "c.json"
    ceil.write_text(H200.model_copy(update={"copy_bandwidth_gbs": 2000.0, "source": "measured"}).model_dump_json())
    r = CliRunner().invoke(cli, ["explain", "--ncu-csv", str(csv_path), "-d", str(FIX / "kbot_vector_add_f32.json"),
                                 "-w", "N=16777216", "--ceilings", str(ceil), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["roofline"]["ceilings"]["copy_bandwidth_gbs"] == 2000.0
    ceil.write_text("{}")
    r = CliRunner().invoke(cli, ["explain", "--ncu-csv", str(csv_path), "-d", str(FIX / "kbot_vector_add_f32.json"),
                                 "-w", "N=16", "--ceilings", str(ceil)])
    assert r.exit_code == 2 and "not a ceilings file" in r.output


def test_second_kernel_gets_its_own_items_scaled_by_its_share():
    d, axes = vadd(1 << 24)
    main = common(**{"gpu__time_duration.sum": ("usecond", 85.0)})
    small = common(**{"gpu__time_duration.sum": ("usecond", 15.0), "launch__grid_size": ("", 2)})
    tiny = common(**{"gpu__time_duration.sum": ("usecond", 1.0), "launch__grid_size": ("", 1)})
    text = raw_csv([("phase1", main), ("phase2", small), ("phase3", tiny)])
    out = explain_csv(text, d, axes, ceilings=H200)
    grid = [i for i in out.feedback if i.rule == "grid_too_small"]
    assert [i.kernel for i in grid] == ["phase2"]  # phase3 is under 10% of the time: no advice of its own
    assert grid[0].kernel_share == pytest.approx(15 / 101, rel=1e-3)
    assert grid[0].impact == pytest.approx((1 - 2 / 132) * 15 / 101, rel=1e-3)
    assert out.feedback.evidence["kernel_name"] == "phase1"
    assert {i.kernel for i in out.feedback} == {"phase1", "phase2"}
    # Call-level rules are not repeated per kernel.
    assert sum(i.rule == "roofline_distance" for i in out.feedback) <= 1
