"""The ncu raw-CSV parser and command builder, on text in the real `--csv --page raw` shape."""

from __future__ import annotations

import pytest
from ncu_csv_builder import raw_csv, stalls

from harness.profile.ncu import METRICS, NcuCsvError, kernel_evidence, ncu_command, ncu_evidence, parse_ncu_csv, parse_ncu_launches

GOOD_NAME = "void add_kernel<1024, 4>(float const*, float const*, float*, int)"


def launch(dur_ns=12_345.0, **over):
    m = {
        "gpu__time_duration.sum": ("nsecond", dur_ns),
        "dram__bytes_read.sum": ("Mbyte", 134.22),
        "dram__bytes_write.sum": ("Mbyte", 67.11),
        "launch__grid_size": ("", 65536),
        "launch__block_size": ("", 128),
        "sm__throughput.avg.pct_of_peak_sustained_elapsed": ("%", 21.5),
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": ("%", 91.2),
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": ("sector", 4_194_304),
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": ("", 262_144),
        "sm__sass_data_bytes_mem_global_op_ld.sum": ("byte", 134_217_728),
        "lts__t_sector_hit_rate.pct": ("%", None),
        **stalls(long_scoreboard=6.0),
    }
    m.update(over)
    return m


def test_parses_quoted_names_units_separators_and_na():
    text = raw_csv([(GOOD_NAME, launch())])
    launches = parse_ncu_launches(text)
    assert len(launches) == 1
    l0 = launches[0]
    assert l0.name == GOOD_NAME  # commas inside quotes survive
    assert l0.info["Block Size"] == "(128, 1, 1)"
    assert l0.metrics["gpu__time_duration.sum"] == pytest.approx(12_345e-9)
    assert l0.units["gpu__time_duration.sum"] == "second"
    assert l0.metrics["dram__bytes_read.sum"] == pytest.approx(134.22e6)  # Mbyte -> bytes
    assert l0.metrics["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == 4_194_304  # "4,194,304"
    assert l0.metrics["lts__t_sector_hit_rate.pct"] is None  # n/a


def test_unit_scaling_of_the_same_metric_agrees():
    a = parse_ncu_launches(raw_csv([("k", {"gpu__time_duration.sum": ("usecond", 1.5)})]))[0]
    b = parse_ncu_launches(raw_csv([("k", {"gpu__time_duration.sum": ("msecond", 0.0015)})]))[0]
    assert a.duration_s == pytest.approx(b.duration_s) == pytest.approx(1.5e-6)


def test_launches_of_one_kernel_are_averaged_and_counted():
    text = raw_csv([("k", launch(10_000.0)), ("k", launch(14_000.0)), ("at::native::vectorized_elementwise_kernel<4>", launch(2_000.0))])
    by = parse_ncu_csv(text)
    assert by["k"]["launch_count"] == 2
    assert by["k"]["gpu__time_duration.sum"] == pytest.approx(12_000e-9)
    assert by["k"]["total_duration_s"] == pytest.approx(24_000e-9)
    assert by["at::native::vectorized_elementwise_kernel<4>"]["library"] is True
    assert by["k"]["library"] is False


def test_evidence_picks_the_candidate_kernel_not_torch():
    text = raw_csv([("at::native::elementwise_kernel", launch(90_000.0)), (GOOD_NAME, launch(10_000.0))])
    c = ncu_evidence(text)
    assert c.ok
    ev = c.evidence
    assert ev["kernel_name"] == GOOD_NAME
    assert ev["kernels_per_call"] == 2
    assert ev["kernel_time_us"] == pytest.approx(100.0)
    assert ev["library_kernel_time_pct"] == pytest.approx(90.0)
    assert ev["global_load_sectors_per_request"] == pytest.approx(16.0)
    assert ev["global_load_efficiency_pct"] == pytest.approx(100.0)
    assert ev["dram_bytes"] == pytest.approx(201.33e6)
    assert ev["top_stall"] == "long_scoreboard"
    assert 50 < ev["stall_long_scoreboard_pct"] < 80
    assert "l2_hit_rate_pct" not in ev  # n/a stays absent, never 0
    assert ncu_evidence(text, kernel="elementwise").evidence["kernel_name"] == "at::native::elementwise_kernel"
    assert not ncu_evidence(text, kernel="nope").ok


def test_uncoalesced_efficiency():
    ev = kernel_evidence({"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 8_388_608.0,
                          "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 262_144.0,
                          "sm__sass_data_bytes_mem_global_op_ld.sum": 33_554_432.0})
    assert ev["global_load_sectors_per_request"] == 32
    assert ev["global_load_efficiency_pct"] == pytest.approx(12.5)


def test_occupancy_limiter_and_gap():
    ev = kernel_evidence({"launch__occupancy_limit_registers": 2.0, "launch__occupancy_limit_shared_mem": 8.0,
                          "launch__occupancy_limit_warps": 16.0, "launch__occupancy_limit_blocks": 32.0,
                          "sm__warps_active.avg.pct_of_peak_sustained_active": 20.0,
                          "sm__maximum_warps_per_active_cycle_pct": 25.0})
    assert ev["occupancy_limiter"] == "registers"
    assert ev["occupancy_gap_pct"] == pytest.approx(5.0)


@pytest.mark.parametrize("text,msg", [
    ("==PROF== Connected\n==ERROR== The user does not have permission to access NVIDIA GPU Performance Counters\n", "permission"),
    ("hello world\n", "no ncu CSV header"),
    ('"ID","Process ID","Kernel Name"\n"0","1","k"\n', "units row"),
])
def test_bad_text_is_a_clear_error(text, msg):
    with pytest.raises(NcuCsvError, match=msg):
        parse_ncu_launches(text)
    assert not ncu_evidence(text).ok


def test_program_output_between_rows_is_ignored():
    text = raw_csv([("k", launch()), ("k", launch())])
    lines = text.splitlines()
    lines.insert(4, "step 1 done, loss=0.5")  # the profiled program printing while ncu writes
    assert len(parse_ncu_launches("\n".join(lines))) == 2


def test_ragged_row_is_an_error():
    text = raw_csv([("k", launch())]).replace('"9.0",', '"9.0",EXTRA,', 1)
    with pytest.raises(NcuCsvError, match="cells"):
        parse_ncu_launches(text)


def test_command_filters_candidate_and_leaves_clocks_alone():
    cmd = ncu_command(["python", "drv.py"], kernel_regex="^my_kernel", kernel_ids="::regex:add:1")
    joined = " ".join(cmd)
    assert cmd[0] == "ncu" and cmd[-2:] == ["python", "drv.py"]
    assert "--clock-control none" in joined
    assert "--csv --page raw" in joined
    assert "--nvtx --nvtx-include kbot_candidate/" in joined
    assert "--kernel-name regex:^my_kernel" in joined
    assert "--kernel-id ::regex:add:1" in joined
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    assert metrics == list(METRICS)
    for needed in ("gpu__time_duration.sum", "launch__waves_per_multiprocessor",
                   "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
                   "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "lts__t_sector_hit_rate.pct",
                   "sm__warps_active.avg.pct_of_peak_sustained_active", "launch__occupancy_limit_registers"):
        assert needed in metrics
    with pytest.raises(ValueError):
        ncu_command(["x"], metrics=["ok.sum", "bad metric; rm -rf"])
    with pytest.raises(Exception):  # noqa: B017  (any refusal will do: the regex is never passed on)
        ncu_command(["x"], kernel_regex="(unclosed")
