"""Declared baselines (harness/baselines.py): declarations that hold, "could not run here" with the
precise reason, the baseline trust level (and that a candidate can never claim it), and baselines
measured beside a candidate, paired with it, in the candidate's worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import harness.baselines as hb
from harness.baselines import BaselineError, declared, declared_match, find, hardware_reason, unavailable_reason
from harness.runner import RunConfig, evaluate
from harness.schema import SchemaError, Status, load_definition, load_workloads, parse_solution

REPO = Path(__file__).resolve().parents[2]
DEF = REPO / "definitions" / "rmsnorm_h4096" / "definition.json"
SMALL = REPO / "definitions" / "rmsnorm_h4096" / "workloads.small.jsonl"
FAST = {"budget_s": 0.05, "warmup": 1, "min_iters": 5, "recheck": 2}
CONTEST_GDN = ("gdn_decode_qk4_v8_d128_k_last", "gdn_prefill_qk4_v8_d128_k_last")

# Reads a file and imports pathlib: refused by the candidate policy (file-io), fine for trusted code.
TRUSTED = '''import pathlib

import torch

_HERE = pathlib.Path(__file__).parent  # a trusted author may look around its own folder


def run(hidden_states, weight):
    x = hidden_states.float()
    return (x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
'''
WRONG = TRUSTED.replace("+ 1e-5", "+ 1.0")
CANDIDATE = '''import torch


def run(hidden_states, weight):
    x = hidden_states.float()
    inv = torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-5)
    return (x * inv * weight.float()).to(hidden_states.dtype)
'''


def solution(code: str, name: str, *, deps=("torch>=2.4",), hardware=("cpu", "cuda"), **extra):
    return parse_solution({"name": name, "definition": "rmsnorm_h4096", "author": "kbot maintainers",
                           "spec": {"language": "python", "target_hardware": list(hardware), "entry_point": "main.py::run",
                                    "dependencies": list(deps), "destination_passing_style": False},
                           "sources": [{"path": "main.py", "content": code}], **extra})


def declare(root: Path, name: str, sol) -> None:
    folder = root / "rmsnorm_h4096" / "baselines" / name
    folder.mkdir(parents=True)
    (folder / "main.py").write_text(sol.sources[0].content)
    (folder / "solution.json").write_text(sol.to_json(indent=2))


@pytest.fixture
def defs(tmp_path, monkeypatch):
    """A definitions/ tree with rmsnorm_h4096 and three declared baselines: honest, wrong, absent library."""
    root = tmp_path / "definitions"
    (root / "rmsnorm_h4096").mkdir(parents=True)
    (root / "rmsnorm_h4096" / "definition.json").write_text(DEF.read_text())
    declare(root, "trusted_torch", solution(TRUSTED, "rmsnorm_baseline_trusted_torch"))
    declare(root, "wrong_eps", solution(WRONG, "rmsnorm_baseline_wrong_eps"))
    declare(root, "absent_lib", solution(TRUSTED + "\n# needs a library\n", "rmsnorm_baseline_absent_lib", deps=("kbot-no-such-distribution==1.0",)))
    monkeypatch.setattr(hb, "DEFINITIONS_DIR", root)
    return root


def run(sol, tmp_path, name="out", **kw):
    d = load_definition(DEF)
    wl = load_workloads(SMALL, d)[:2]
    cfg = RunConfig(device="cpu", timing=FAST, timeout_s=120, trials=2)
    return evaluate(d, sol, wl, tmp_path / name, cfg, definition_path=DEF, **kw)


def test_every_declared_baseline_of_the_repository_holds():
    """solution.json holds the files beside it (and a torch_compile's reference.py is the definition's
    own reference), requirements are PEP 508, each GDN contest operator has fla and torch_compile."""
    names = {}
    for folder in sorted((REPO / "definitions").glob("*/baselines")):
        d = folder.parent.name
        found = declared(d)
        assert found, folder
        names[d] = {b.name for b in found}
        for b in found:
            assert b.solution.definition == d and b.solution.spec.dependencies
            if any(s.path == "reference.py" for s in b.solution.sources):
                assert b.solution.source("reference.py") == hb.reference_source(d)
    for d in CONTEST_GDN:
        assert {"torch_compile"} < names[d] and any(n.startswith("fla_") for n in names[d])


def test_a_stale_declaration_is_an_error(defs):
    (defs / "rmsnorm_h4096" / "baselines" / "trusted_torch" / "main.py").write_text(TRUSTED + "\n# edited\n")
    with pytest.raises(BaselineError, match="does not hold the current main.py"):
        declared("rmsnorm_h4096")
    hb.pack(defs / "rmsnorm_h4096" / "baselines" / "trusted_torch", "rmsnorm_h4096")
    assert "# edited" in find("rmsnorm_h4096", "trusted_torch").solution.source("main.py")


def test_why_a_baseline_cannot_run_here(monkeypatch):
    s = solution(TRUSTED, "x", deps=("kbot-no-such-distribution==1.0",))
    assert unavailable_reason(s, "cpu") == "kbot-no-such-distribution is not installed (the baseline needs kbot-no-such-distribution==1.0)"
    monkeypatch.setattr(hb, "_installed", lambda name: "0.5.0")
    assert unavailable_reason(solution(TRUSTED, "x", deps=("fla-core==0.6.0",)), "cuda") == \
        "fla-core 0.5.0 is installed; the baseline is pinned to fla-core==0.6.0"
    assert hardware_reason(["cuda"], "cpu", None) == "needs a GPU (cuda); this run is on the CPU"
    assert hardware_reason(["cpu"], "cuda", "9.0") == "runs on the CPU only (cpu)"
    # a GPU named by product beside cpu (the MoE torch.compile baseline) runs on the GPU: the H200 said "CPU only"
    assert hardware_reason(["NVIDIA_H200", "cpu"], "cuda", "9.0") is None
    assert hardware_reason(["NVIDIA_H200", "cpu"], "cpu", None) is None
    assert hardware_reason(["sm_100"], "cuda", "9.0") == "needs compute capability 10.0 (sm_100); this GPU is 9.0"
    assert hardware_reason(["sm_100", "sm_90"], "cuda", "9.0") is None
    assert hardware_reason(["sm_90+"], "cuda", "10.0") is None
    assert hardware_reason(["sm_100"], "cuda", None) is None  # not known yet: the worker checks it
    assert hardware_reason(["NVIDIA_H200"], "cpu", None) is None  # informative only
    with pytest.raises(BaselineError, match="not a PEP 508 requirement"):
        unavailable_reason(solution(TRUSTED, "x", deps=("fla core ==",)), "cpu")


def test_a_declared_baseline_runs_under_the_baseline_trust_level(defs, tmp_path):
    b = find("rmsnorm_h4096", "trusted_torch")
    rep = run(b.solution, tmp_path, trust="baseline")
    assert rep.trust == "baseline" and rep.all_passed and not rep.findings, [w.message + w.log for w in rep.workloads]
    # The very same code as a candidate: the candidate policy refuses it before it runs.
    rep = run(b.solution, tmp_path, name="as-candidate")
    assert {w.status for w in rep.workloads} == {Status.REJECTED} and any(f.rule == "file-io" for f in rep.findings)


def test_a_candidate_can_never_claim_the_baseline_level(defs, tmp_path):
    # Other code (one comment more) that says it is the declared baseline in every field it has.
    claims = solution(TRUSTED + "\n# one line more than the declared baseline\n", "rmsnorm_baseline_trusted_torch", trust="baseline",
                      kbot_trust="baseline",
                      description="a declared baseline (definitions/rmsnorm_h4096/baselines/trusted_torch)")
    with pytest.raises(SchemaError, match="not a baseline declared"):
        run(claims, tmp_path, trust="baseline")  # asked for by a caller: refused, it is not in the folder
    rep = run(claims, tmp_path, name="claimed")  # the fields themselves claim nothing
    assert rep.trust == "candidate" and {w.status for w in rep.workloads} == {Status.REJECTED}
    assert declared_match("rmsnorm_h4096", claims) is None
    # On the command line a file is always a candidate, even one in a baselines folder of the real tree.
    path = defs / "rmsnorm_h4096" / "baselines" / "trusted_torch" / "solution.json"
    p = subprocess.run([sys.executable, "-m", "harness.cli", "eval", str(path), "-d", "rmsnorm_h4096", "-w", str(SMALL), "--device", "cpu",
                        "--trials", "1", "--budget", "0.05", "--out", str(tmp_path / "cli"), "--json"],
                       cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 1, p.stderr[-2000:]
    report = json.loads(p.stdout)
    assert report["trust"] == "candidate" and {w["status"] for w in report["workloads"]} == {"REJECTED"}


def test_baselines_beside_a_candidate_are_paired_and_the_absent_ones_said(defs, tmp_path):
    rep = run(solution(CANDIDATE, "cand"), tmp_path, declared_baselines=declared("rmsnorm_h4096"))
    assert rep.all_passed
    states = {b.name: (b.state, b.reason) for b in rep.baselines}
    assert states["trusted_torch"] == ("ran", "") and states["wrong_eps"][0] == "ran"
    assert states["absent_lib"] == ("could not run", "kbot-no-such-distribution is not installed (the baseline needs kbot-no-such-distribution==1.0)")
    for w in rep.workloads:
        good, wrong = w.baselines["trusted_torch"], w.baselines["wrong_eps"]
        assert good.status is Status.PASSED and good.speedup is not None and good.latency_ms.median > 0
        assert good.speedup.ci95[0] <= good.speedup.median <= good.speedup.ci95[1]
        assert wrong.status is Status.INCORRECT_NUMERICAL and wrong.speedup is None
        assert "absent_lib" not in w.baselines
    s = rep.summary()
    assert s["best_baselines"] == {"trusted_torch": 2} and s["best_baseline_workloads"] == 2
    assert s["geomean_speedup_vs_best_baseline"] > 0
    assert s["baselines_could_not_run"] == {"absent_lib": states["absent_lib"][1]}
    # A failed candidate workload carries no baseline figures (nothing to pair with).
    bad = run(solution(CANDIDATE.replace("+ 1e-5", "+ 3.0"), "bad"), tmp_path, name="bad", declared_baselines=declared("rmsnorm_h4096"))
    assert all(not w.baselines for w in bad.workloads)


def test_kbot_eval_of_a_baseline_that_cannot_run_here_says_why(tmp_path):
    """fla-core is not installed on this machine: `could not run here` with the reason, exit 4, nothing measured."""
    if hb._installed("fla-core"):
        pytest.skip("fla-core is installed here")
    p = subprocess.run([sys.executable, "-m", "harness.cli", "eval", "baseline:fla_fused_recurrent", "-d", CONTEST_GDN[0], "--device", "cpu",
                        "--out", str(tmp_path / "fla")], cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 4, p.stderr[-2000:]
    assert "could not run here: fla-core is not installed (the baseline needs fla-core==0.6.0)" in p.stderr
    rep = json.loads((tmp_path / "fla" / "report.json").read_text())
    assert rep["trust"] == "baseline" and rep["workloads"] == [] and rep["unavailable"].startswith("fla-core is not installed")
    p = subprocess.run([sys.executable, "-m", "harness.cli", "eval", "baseline:no_such", "-d", CONTEST_GDN[0], "--device", "cpu"],
                       cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 2 and "no baseline 'no_such' declared" in p.stderr


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_torch_compile_of_the_gdn_reference_beside_the_reference_solution_on_cpu(tmp_path):
    """The real torch_compile baseline of GDN decode, measured beside the shipped reference solution on
    the CPU: it compiles once, passes every workload, pairs with the candidate; fla cannot run here; the
    candidate is not blamed for anything torch.compile did in its process (threads, imports)."""
    d = CONTEST_GDN[0]
    wl = REPO / "definitions" / d / "workloads.small.jsonl"
    p = subprocess.run([sys.executable, "-m", "harness.cli", "eval", str(REPO / "definitions" / d / "reference_solution.json"), "-d", d,
                        "-w", str(wl), "--device", "cpu", "--trials", "1", "--budget", "0.05", "--timing", "min_iters=3",
                        "--baselines", "all", "--out", str(tmp_path / "run"), "--json"],
                       cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=1150)
    assert p.returncode == 0, p.stderr[-3000:]
    rep = json.loads(p.stdout)
    states = {b["name"]: b["state"] for b in rep["baselines"]}
    assert states["torch_compile"] == "ran"
    if not hb._installed("fla-core"):
        assert states["fla_fused_recurrent"] == "could not run"
    for w in rep["workloads"]:
        assert w["status"] == "PASSED" and w["baselines"]["torch_compile"]["status"] == "PASSED", w
        assert w["baselines"]["torch_compile"]["speedup"]["median"] > 0
    assert rep["summary"]["best_baselines"] == {"torch_compile": len(rep["workloads"])}
