"""run_ncu against a fake `ncu` executable: query filtering, retry on rejected metrics, CSV capture."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

from harness.profile import ncu as ncu_mod
from harness.profile.ncu import METRICS, ncu_evidence, run_ncu

FAKE = r'''#!{python}
"""A stand-in for ncu: knows every curated metric except {rejected!r}; lists one more unknown one."""
import sys
args = sys.argv[1:]
REJECT = {rejected!r}
if "--query-metrics" in args:
    print("Device NVIDIA H200 (GH100)")
    print("Metric Name                     Metric Description")
    for m in {known!r}:
        print(m + "    some description")
    sys.exit(0)
metrics = args[args.index("--metrics") + 1].split(",")
assert args[args.index("--clock-control") + 1] == "none"
bad = [m for m in metrics if m.split(".")[0] in REJECT]
if bad:
    print("==PROF== Connected to process 1")
    print("==ERROR== Failed to find metric " + bad[0], file=sys.stderr)
    sys.exit(1)
cols = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size", "Grid Size", "Device", "CC"]
print("==PROF== Connected to process 1")
print(",".join('"%s"' % c for c in cols + metrics))
print(",".join('""' for _ in cols) + "," + ",".join('"%s"' % ("nsecond" if m.startswith("gpu__time") else "") for m in metrics))
row = ["0", "1", "python", "h", "my_kernel", "1", "7", "(128, 1, 1)", "(8, 1, 1)", "0", "9.0"]
print(",".join('"%s"' % v for v in row) + "," + ",".join('"1,000"' for _ in metrics))
'''


def _fake(tmp_path: Path, rejected: list[str], drop_from_query: list[str]) -> str:
    bases = sorted({m.split(".")[0] for m in METRICS if not m.startswith(("launch__", "device__"))} - set(drop_from_query))
    bases += [f"filler__metric_{i}" for i in range(60)]
    p = tmp_path / "ncu"
    p.write_text(FAKE.format(python=sys.executable, rejected=rejected, known=bases))
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


def test_query_filter_and_retry(tmp_path, monkeypatch):
    monkeypatch.setattr(ncu_mod, "_known_cache", {})
    not_listed = "sm__pipe_tensor_cycles_active"
    rejected = "sass__inst_executed_register_spilling"
    fake = _fake(tmp_path, [rejected], [not_listed])
    run = run_ncu(["python", "prog.py"], ncu=fake, timeout=60)
    assert run.csv, run.log
    assert any(m.startswith(not_listed) for m in run.dropped)
    assert rejected in run.dropped
    assert "attempt 1" in run.log  # the first attempt was refused, the second ran
    ev = ncu_evidence(run.csv)
    assert ev.ok and ev.evidence["kernel_name"] == "my_kernel"
    assert abs(ev.evidence["duration_us"] - 1.0) < 1e-9  # "1,000" nsecond


def test_no_csv_reports_failure(tmp_path, monkeypatch):
    monkeypatch.setattr(ncu_mod, "_known_cache", {})
    p = tmp_path / "ncu"
    p.write_text("#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM - no permission' >&2\nexit 1\n")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    run = run_ncu(["python", "x.py"], ncu=str(p), timeout=30)
    assert run.csv == "" and run.returncode == 1 and "ERR_NVGPUCTRPERM" in run.log


def test_filter_distrusts_a_query_that_knows_almost_nothing():
    from harness.profile.ncu import filter_metrics

    kept, dropped = filter_metrics(METRICS, {"gpu__time_duration"})
    assert kept == list(METRICS) and dropped == []
    bases = {m.split(".")[0] for m in METRICS} - {"sm__pipe_tensor_cycles_active"}
    kept, dropped = filter_metrics(METRICS, bases)
    assert dropped == ["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"]


def test_unsuffixed_names_survive_the_query_filter():
    from harness.profile.ncu import filter_metrics

    bases = {m.split(".")[0] for m in METRICS if "." in m}  # what ncu 2025.3 lists: no unsuffixed names
    kept, dropped = filter_metrics(METRICS, bases)
    assert "sm__maximum_warps_per_active_cycle_pct" in kept and not dropped
