"""Commands that fit people's habits: --json wherever a table is printed, "did you mean" for a mistyped
definition, a harness failure (exit 3) as one line naming where its traceback was saved, and tables
that stay whole at 80 columns and outside a terminal."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from rich.console import Console

from harness import cli as cli_mod
from harness.cli import EXIT_BAD_INPUT, EXIT_HARNESS, _register_plugins, cli
from harness.report import DeviceInfo, LatencyStats, PairedRatio, Report, Roofline, WorkloadResult
from harness.report_table import print_report, print_rows
from harness.schema import Status

REPO = Path(__file__).resolve().parents[2]

# Commands that print no table, and why; every other command must take --json.
NO_TABLE = {
    "serve": "a server: it logs, it prints no result",
    "definitions show": "prints the definition's JSON",
    "report": "writes an HTML site and says where",
    "export": "writes a TraceSet and prints one summary line",
    "submit": None,  # has --json (listed here only if it loses it: then this test says so)
    "baselines pack": "rewrites solution.json files and prints one line per file",
    "pr approve": "prints one sentence: what the approval did",
    "bot command": "a workflow step: its output is the reply comment it posts",
    "bot report": "a workflow step: its output is the review and status it publishes",
    "bot review": "prints the review's Markdown for a report (the report is the JSON)",
    "bot decide": "prints JSON already",
    "bot leaderboard": "prints LEADERBOARD.md for a champion.json (the input is the JSON)",
}


def _leaves(group: click.Group, prefix: str = ""):
    for name, cmd in sorted(group.commands.items()):
        full = f"{prefix}{name}"
        if isinstance(cmd, click.Group):
            yield from _leaves(cmd, full + " ")
        else:
            yield full, cmd


@pytest.fixture(scope="module", autouse=True)
def plugins():
    _register_plugins()


def test_every_command_that_prints_a_table_takes_json():
    leaves = dict(_leaves(cli))
    assert {"eval", "eval-many", "definitions list", "baselines list", "pr list", "pr show", "leaderboard", "optimize"} <= set(leaves)
    missing = [name for name, cmd in leaves.items() if NO_TABLE.get(name) is None
               and not any("--json" in p.opts for p in cmd.params if isinstance(p, click.Option))]
    assert not missing, f"commands without --json (add it, or say in NO_TABLE why they print no table): {missing}"
    stale = [name for name in NO_TABLE if name not in leaves]
    assert not stale, f"NO_TABLE names commands that do not exist: {stale}"


def test_definitions_list_and_validate_in_json():
    rows = json.loads(CliRunner().invoke(cli, ["definitions", "list", "--json"]).output)
    assert "rmsnorm_h4096" in {r["name"] for r in rows}
    out = CliRunner().invoke(cli, ["definitions", "validate", "--json", str(REPO / "definitions" / "rmsnorm_h4096" / "definition.json")])
    assert out.exit_code == 0
    (row,) = json.loads(out.output)
    assert row["ok"] and row["name"] == "rmsnorm_h4096" and row["workloads"] > 0


@pytest.mark.parametrize(("typo", "meant"), [("rmsnorm_h409", "rmsnorm_h4096"), ("rmsnrm_h4096", "rmsnorm_h4096"),
                                             ("gdn_decode", "gdn_decode_qk4_v8_d128_k_last")])
def test_a_mistyped_definition_gets_a_did_you_mean(typo, meant):
    out = CliRunner().invoke(cli, ["definitions", "show", typo])
    assert out.exit_code == EXIT_BAD_INPUT
    assert f"no definition '{typo}'" in out.stderr and f"did you mean '{meant}'" in out.stderr


def test_a_name_unlike_any_gets_no_guess():
    out = CliRunner().invoke(cli, ["definitions", "show", "zzzz_qqqq"])
    assert out.exit_code == EXIT_BAD_INPUT and "did you mean" not in out.stderr and "known: " in out.stderr


def _boom(*a, **k):
    raise RuntimeError("the worker pool is gone\nsecond line of detail")


def test_a_harness_failure_is_one_line_with_the_traceback_saved(tmp_path, monkeypatch):
    import harness.runner

    monkeypatch.setenv("KBOT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("KBOT_TRACEBACK", raising=False)
    monkeypatch.setattr(harness.runner, "evaluate", _boom)
    sol = REPO / "kernels" / "rmsnorm_h4096" / "triton_rows" / "solution.json"
    out = CliRunner().invoke(cli, ["eval", str(sol), "-d", "rmsnorm_h4096", "--device", "cpu", "--out", str(tmp_path / "run")])
    assert out.exit_code == EXIT_HARNESS
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("harness error")]
    assert len(lines) == 1 and "Traceback" not in out.stderr
    m = re.fullmatch(r"harness error: RuntimeError: the worker pool is gone \(traceback saved to (\S+); "
                     r"kbot's failure, not the solution's\)", lines[0])
    assert m, lines[0]
    saved = Path(m.group(1)).read_text()
    assert saved.startswith("kbot ") and "Traceback (most recent call last)" in saved and "second line of detail" in saved
    assert Path(m.group(1)).parent == tmp_path / "cache" / "errors"


def test_any_command_failing_unexpectedly_is_one_line_too(tmp_path, monkeypatch, capsys):
    import harness.schema

    monkeypatch.setenv("KBOT_CACHE", str(tmp_path))
    monkeypatch.setattr(harness.schema, "load_definition", _boom)
    monkeypatch.setattr("sys.argv", ["kbot", "definitions", "list"])
    with pytest.raises(SystemExit) as e:
        cli_mod.main()
    assert e.value.code == EXIT_HARNESS
    err = capsys.readouterr().err
    assert "harness error: RuntimeError: the worker pool is gone (traceback saved to " in err and "Traceback" not in err
    monkeypatch.setenv("KBOT_TRACEBACK", "1")  # asked for: the traceback as well
    with pytest.raises(SystemExit):
        cli_mod.main()
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def _report() -> Report:
    lat = LatencyStats(median=0.0123, mean=0.0124, ci95=(0.0121, 0.0125), stdev=0.0002, sem=0.00003, n=50, min=0.012, max=0.013)
    ws = [WorkloadResult(uuid=f"{i:08x}-aaaa-bbbb", axes={"batch_size": 2 ** i, "seq_len": 4096}, status=Status.PASSED,
                         latency_ms=lat, reference_latency_ms=lat, speedup_vs_reference=1.0,
                         speedup_vs_baseline=PairedRatio(median=1.25, ci95=(1.2, 1.31), n=50),
                         roofline=Roofline(bytes=1.0, flops=1.0, intensity=1.0, floor_ms=0.005, fraction=0.41, bound="memory"))
          for i in range(3)]
    return Report(run_id="r", definition="gdn_decode_qk4_v8_d128_k_last", solution="a_rather_long_solution_name_v12",
                  solution_hash="h", started="2026-12-01T00:00:00Z", device=DeviceInfo(kind="cuda", name="NVIDIA H200", timer="cuda_events"),
                  workloads=ws)


def test_the_eval_table_stays_whole_at_80_columns(tmp_path):
    buf = io.StringIO()
    print_report(_report(), tmp_path, Console(file=buf, width=80))  # what a pipe or a log gets
    text = buf.getvalue()
    assert "…" not in text  # nothing cut
    assert all(len(line) <= 80 for line in text.splitlines())
    for value in ("00000000", "batch_size=1,seq_len=4096", "12.3 µs [12.1, 12.5]", "1.250 [1.200, 1.310]", "41% (memory)"):
        assert value in text, value
    wide = io.StringIO()
    print_report(_report(), tmp_path, Console(file=wide, width=200))
    assert re.search(r"^workload\s+axes\s+status", wide.getvalue(), re.M)  # a table where it fits


def test_print_rows_is_a_table_when_it_fits_and_blocks_otherwise():
    narrow, wide = io.StringIO(), io.StringIO()
    rows = [["moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048", "moe", "19"]]
    print_rows(Console(file=wide, width=100), ["name", "op_type", "workloads"], rows)
    print_rows(Console(file=narrow, width=40), ["name", "op_type", "workloads"], rows)
    assert re.search(r"^name\s+op_type\s+workloads$", wide.getvalue(), re.M)
    assert narrow.getvalue().splitlines() == [rows[0][0], "  op_type: moe", "  workloads: 19"]


def test_the_bots_commands_are_there_when_kbot_runs_from_a_checkout_it_was_never_installed_from(tmp_path):
    """As on the GPU runners (PYTHONPATH=. python -m harness.cli): no installed metadata, so no entry points;
    the checkout's pyproject.toml names the commands instead."""
    code = ("import importlib.metadata as m, sys\n"
            "m.entry_points = lambda **kw: []\n"
            "sys.argv = ['kbot', 'optimize', '--help']\n"
            "from harness.cli import main\n"
            "main()\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Run the optimization loop" in p.stdout
