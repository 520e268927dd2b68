"""End to end: every corpus solution through ``kbot eval --device cpu`` (the harness CLI).

Hostile solutions must not be PASSED (REJECTED / RUNTIME_ERROR / TIMEOUT / INCORRECT_*), honest ones
must be PASSED, the CLI exits 0 only when every workload passed, and every workload has a trace line
whatever happened. A second test switches the static guard off (through the runner's RunConfig) and
checks that the runtime layer alone still stops the solutions expected.yaml marks with ``runtime:``.

Slow by nature (worker processes, the Triton interpreter). Solutions the static guard refuses run
through the same click command in-process (they never start a worker); the others through
``python -m harness.cli`` (what the ``kbot`` script runs) as separate processes, two at a time.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness.schema import Status, Trace, load_definition, load_solution, load_workloads

from guardkit import CORPUS, WORKLOADS

sys.path.insert(0, str(CORPUS))
import make_corpus  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXPECTED = make_corpus.expected()
PARALLEL = 2  # the CI machine has 2 cores; Triton-interpreter workloads are CPU-bound
HAS_CLI = importlib.util.find_spec("harness.cli") is not None
needs_cli = pytest.mark.skipif(not HAS_CLI, reason="harness.cli (the `kbot eval` CLI, issue 2) does not exist yet")

pytestmark = [pytest.mark.slow, needs_cli]


def _run_cli(name: str, definition: Path, out: Path, device: str) -> dict:
    # `python -m harness.cli` is what the `kbot` console script runs; it works without an installed script.
    cmd = [sys.executable, "-m", "harness.cli", "eval", str(CORPUS / f"{name}.json"),
           "--definition", str(definition), "--workloads", str(WORKLOADS), "--device", device,
           "--out", str(out), "--json", "--trials", "2", "--timeout", "90", "--budget", "0.2"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"name": name, "rc": None, "out": out, "stderr": "the CLI itself did not finish in 300 s"}
    return {"name": name, "rc": p.returncode, "out": out, "stderr": p.stderr[-3000:]}


def _run_cli_in_process(name: str, definition: Path, out: Path, device: str) -> dict:
    """The same `kbot eval` command through click's test runner: no interpreter start-up (about 2 s of
    torch import per solution). Used for solutions the static guard refuses, which never start a worker."""
    from click.testing import CliRunner

    from harness.cli import cli

    args = ["eval", str(CORPUS / f"{name}.json"), "--definition", str(definition), "--workloads", str(WORKLOADS),
            "--device", device, "--out", str(out), "--json", "--trials", "2", "--timeout", "90", "--budget", "0.2"]
    r = CliRunner().invoke(cli, args)
    err = "" if r.exception is None or isinstance(r.exception, SystemExit) else repr(r.exception)
    return {"name": name, "rc": r.exit_code, "out": out, "stderr": err}


def _statuses(out: Path, n_workloads: int, name: str) -> list[str]:
    traces_path = out / "traces.jsonl"
    assert traces_path.exists(), f"{name}: no traces.jsonl"
    lines = [ln for ln in traces_path.read_text().splitlines() if ln.strip()]
    traces = [Trace.model_validate_json(ln) for ln in lines]
    assert len(traces) == n_workloads, f"{name}: {len(traces)} trace lines for {n_workloads} workloads"
    assert all(t.evaluation is not None for t in traces), f"{name}: a trace without an evaluation"
    return [t.evaluation.status.value for t in traces]


def _check_corpus_through_cli(definition_path: Path, base: Path, device: str) -> None:
    definition = load_definition(definition_path)
    n = len(load_workloads(WORKLOADS, definition))
    names = [nm for nm, m in sorted(EXPECTED.items()) if device in m.get("devices", ["cpu", "cuda"])]
    refused = [nm for nm in names if EXPECTED[nm]["static"] not in ("honest", [])]
    runs = {nm: _run_cli_in_process(nm, definition_path, base / nm, device) for nm in refused}
    with ThreadPoolExecutor(PARALLEL) as pool:
        rest = [nm for nm in names if nm not in runs]
        runs.update({r["name"]: r for r in pool.map(lambda nm: _run_cli(nm, definition_path, base / nm, device), rest)})
    problems = []
    for name in names:
        meta = EXPECTED[name]
        r = runs[name]
        honest = meta["static"] == "honest"
        if r["rc"] is None:
            problems.append(f"{name}: {r['stderr']}")
            continue
        try:
            statuses = _statuses(r["out"], n, name)
            report = json.loads((r["out"] / "report.json").read_text())
        except (AssertionError, FileNotFoundError, ValueError) as e:
            problems.append(f"{name}: {e} (rc={r['rc']}, stderr: {r['stderr'][-400:]})")
            continue
        report_statuses = sorted(w["status"] for w in report["workloads"])
        if report_statuses != sorted(statuses):
            problems.append(f"{name}: report.json statuses {report_statuses} differ from traces {sorted(statuses)}")
        msgs = [w.get("message", "")[:160] for w in report["workloads"]]
        if honest:
            if statuses != [Status.PASSED.value] * n or r["rc"] != 0:
                problems.append(f"{name} (honest): statuses {statuses}, rc {r['rc']}: {msgs}")
        else:
            if Status.PASSED.value in statuses or r["rc"] == 0:
                problems.append(f"{name} (hostile): statuses {statuses}, rc {r['rc']}: a cheat passed")
            unexpected = set(statuses) - set(meta["e2e"])
            if unexpected:
                problems.append(f"{name}: statuses {sorted(unexpected)} not among the expected {meta['e2e']}: {msgs}")
    assert not problems, "\n".join(problems)


def test_every_corpus_solution_through_the_cli(rmsnorm_def_path, tmp_path):
    _check_corpus_through_cli(rmsnorm_def_path, tmp_path, "cpu")


@pytest.mark.gpu
def test_every_corpus_solution_through_the_cli_on_gpu(rmsnorm_def_path, tmp_path):
    _check_corpus_through_cli(rmsnorm_def_path, tmp_path, "cuda")


RUNTIME_ONLY = sorted(n for n, m in EXPECTED.items() if "runtime" in m)


def _runtime_names(device: str) -> list[str]:
    return [n for n in RUNTIME_ONLY if device in EXPECTED[n].get("devices", ["cpu", "cuda"])]


def _check_runtime_layer_alone(definition_path: Path, base: Path, device: str) -> None:
    from harness.runner import RunConfig, evaluate  # the lead's runner; RunConfig.guard switches the static guard

    definition = load_definition(definition_path)
    workloads = load_workloads(WORKLOADS, definition)
    cfg = RunConfig(device=device, trials=2, timeout_s=8, startup_timeout_s=120, timing={"budget_s": 0.2}, guard=False)

    def one(name: str):
        report = evaluate(definition, load_solution(CORPUS / f"{name}.json"), workloads, base / name, cfg)
        return name, [w.status.value for w in report.workloads], [w.message[:160] for w in report.workloads]

    with ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(one, _runtime_names(device)))
    problems = []
    for name, statuses, msgs in results:
        if len(statuses) != len(workloads):
            problems.append(f"{name}: {len(statuses)} results for {len(workloads)} workloads")
        bad = [s for s in statuses if s not in EXPECTED[name]["runtime"]]
        if bad:
            problems.append(f"{name}: runtime-only statuses {statuses} (expected {EXPECTED[name]['runtime']}): {msgs}")
    assert not problems, "\n".join(problems)


def test_runtime_layer_alone(rmsnorm_def_path, tmp_path):
    """The hostile solutions marked `runtime:` with the static guard off: the runtime layer (integrity
    snapshot, output checks, thread count, launch counting, timed-output re-checks, fault isolation)
    must still stop them."""
    _check_runtime_layer_alone(rmsnorm_def_path, tmp_path, "cpu")


@pytest.mark.gpu
def test_runtime_layer_alone_on_gpu(rmsnorm_def_path, tmp_path):
    _check_runtime_layer_alone(rmsnorm_def_path, tmp_path, "cuda")
