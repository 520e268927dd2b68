"""``kbot eval-many --gpus`` end to end on the CPU: the real CLI, runner and worker processes, over fake
GPUs (tests/fakes/gpus.py) found, watched and killed through the processes' own environments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness import gpu_pool
from harness.cli import cli
from tests.fakes.gpus import FakeGPUs, Sampler
from tests.harness.test_spares import GOOD, SMALL, WRONG, _write

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _invoke(monkeypatch, fake, args):
    monkeypatch.setattr(gpu_pool, "NvidiaSmi", lambda: fake)
    return CliRunner().invoke(cli, ["eval-many", *args], catch_exceptions=False)


def _common(out):
    return ["-d", "rmsnorm_h4096", "-w", str(SMALL), "--device", "cpu", "--budget", "0.05", "--trials", "1", "--out", str(out), "--json"]


def test_solutions_spread_one_per_gpu_each_pinned_and_recorded(tmp_path, monkeypatch):
    sols = [_write(tmp_path, "good", GOOD), _write(tmp_path, "wrong", WRONG), _write(tmp_path, "good2", GOOD.replace("1e-6", "1e-6 "))]
    fake = FakeGPUs(3)
    out = tmp_path / "many"
    with Sampler(3) as seen:
        r = _invoke(monkeypatch, fake, [*map(str, sols), *_common(out), "--gpus", "all"])
    assert r.exit_code == 1, r.output[-3000:]  # "wrong" fails its workloads: a result, not a harness failure
    summary = json.loads((out / "summary.json").read_text())
    runs = summary["runs"]
    assert [x["solution"] for x in runs] == ["good", "wrong", "good2"]  # in the order given
    assert [x["all_passed"] for x in runs] == [True, False, True]
    assert sorted(x["gpu"] for x in runs) == [0, 1, 2]  # one per GPU
    for x in runs:
        rep = json.loads((Path(x["out"]) / "report.json").read_text())
        assert rep["config"]["gpu"]["index"] == x["gpu"] and rep["config"]["gpu"]["uuid"] == f"GPU-fake-{x['gpu']:04d}"
        assert [a["gpu"] for a in x["attempts"]] == [x["gpu"]]
    # Watched from outside: never two workers on one GPU, and the GPUs really ran at the same time.
    assert seen.samples > 10 and max(seen.max_workers.values()) == 1, seen.max_workers
    assert seen.max_busy >= 2
    assert fake.occupied_at_lease == []  # every lease found its GPU empty
    gpus = {g["index"]: g for g in summary["gpus"]}
    assert set(gpus) == {0, 1, 2} and all(g["ceilings"] and g["ceilings"]["device"] == "cpu" for g in gpus.values())
    assert sorted(s for g in gpus.values() for s in g["solutions"]) == ["good", "good2", "wrong"]
    assert summary["wall_s"] > 0


def test_a_gpu_that_dies_mid_evaluation_costs_a_retry_not_a_verdict(tmp_path, monkeypatch):
    sols = [_write(tmp_path, "first", GOOD), _write(tmp_path, "second", GOOD.replace("1e-6", "1e-6 "))]
    fake = FakeGPUs(2)
    fake.die_when_busy(1, after_s=0.5)  # while its worker imports or builds: the worker is SIGKILLed with it
    out = tmp_path / "many"
    r = _invoke(monkeypatch, fake, [*map(str, sols), *_common(out), "--gpus", "2"])
    assert r.exit_code == 0, r.output[-3000:]  # both solutions pass: the crash on the dead GPU was no verdict
    assert fake.kills and fake.kills[0][0] == 1 and fake.kills[0][1], "the fake GPU died with a worker on it"
    summary = json.loads((out / "summary.json").read_text())
    retried = [x for x in summary["runs"] if len(x["attempts"]) == 2]
    assert len(retried) == 1
    x = retried[0]
    assert x["attempts"][0]["gpu"] == 1 and "fell off the bus" in x["attempts"][0]["lost"]
    assert x["gpu"] == 0 and x["all_passed"] is True
    # What the dead GPU's run recorded is kept aside, as the crash it was, and never read as the result.
    aside = Path(x["out"]).with_name(Path(x["out"]).name + ".lost-gpu1")
    crashed = json.loads((aside / "report.json").read_text())
    assert crashed["workloads"] and all(w["status"] == "RUNTIME_ERROR" for w in crashed["workloads"])
    assert json.loads((Path(x["out"]) / "report.json").read_text())["config"]["gpu"]["index"] == 0
    assert {g["index"]: g.get("lost") for g in summary["gpus"]}[1] == "fake GPU fell off the bus"


def test_more_gpus_than_present_is_refused_before_anything_runs(tmp_path, monkeypatch):
    out = tmp_path / "many"
    r = _invoke(monkeypatch, FakeGPUs(2), [str(_write(tmp_path, "good", GOOD)), *_common(out), "--gpus", "3"])
    assert r.exit_code == 2 and "--gpus 3: only 2 GPUs here (0: Fake GPU, 1: Fake GPU)" in r.output
    assert not out.exists()


def test_gpus_with_device_cpu_is_refused(tmp_path):
    out = tmp_path / "many"
    r = CliRunner().invoke(cli, ["eval-many", str(_write(tmp_path, "good", GOOD)), *_common(out), "--gpus", "2"])
    assert r.exit_code == 2 and "--device cpu runs them on the cpu" in r.output
