"""Our definitions: official names/axes/inputs/outputs, our own references agree with the official ones."""

import json

import pytest
import torch

from harness.defconfig import load_config
from harness.inputs import make_inputs
from harness.schema import load_definition, load_workloads

OURS = ["rmsnorm_h4096", "fused_add_rmsnorm_h4096", "gemm_n4096_k4096"]
OFFICIAL_DIR = {"rmsnorm_h4096": "rmsnorm", "fused_add_rmsnorm_h4096": "rmsnorm", "gemm_n4096_k4096": "gemm"}


def _run(reference: str, inputs):
    ns = {}
    exec(reference, ns)
    return ns["run"](**{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()})


@pytest.mark.parametrize("name", OURS)
def test_interface_matches_official(repo, shared, name):
    ours = load_definition(repo / "definitions" / name / "definition.json")
    official = load_definition(shared / "flashinfer-trace" / "definitions" / OFFICIAL_DIR[name] / f"{name}.json")
    assert ours.name == official.name
    for part in ("axes", "inputs", "outputs"):
        a = {k: {f: v for f, v in x.model_dump().items() if f != "description"} for k, x in getattr(ours, part).items()}
        b = {k: {f: v for f, v in x.model_dump().items() if f != "description"} for k, x in getattr(official, part).items()}
        assert a == b, part
    assert ours.reference != official.reference  # written by us


@pytest.mark.parametrize("name", OURS)
@pytest.mark.parametrize("seed", [0, 1])
def test_reference_agrees_with_official(repo, shared, name, seed):
    ours = load_definition(repo / "definitions" / name / "definition.json")
    official = load_definition(shared / "flashinfer-trace" / "definitions" / OFFICIAL_DIR[name] / f"{name}.json")
    cfg = load_config(name)
    for w in load_workloads(repo / "definitions" / name / "workloads.small.jsonl", ours):
        inputs = make_inputs(ours, w, seed=seed, config=cfg)
        a, b = _run(ours.reference, inputs), _run(official.reference, inputs)
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a.float(), b.float(), atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("name", OURS)
def test_workload_files_are_valid_and_realistic(repo, name):
    d = load_definition(repo / "definitions" / name / "definition.json")
    ws = load_workloads(repo / "definitions" / name / "workloads.jsonl", d)
    sizes = sorted(next(iter(w.axes.values())) for w in ws)
    assert sizes[0] == 1 and sizes[-1] >= 8192  # decode-sized up to prefill-sized
    assert len({w.uuid for w in ws}) == len(ws)


def test_definitions_cli_validate(repo):
    from click.testing import CliRunner

    from harness.cli import cli

    r = CliRunner().invoke(cli, ["definitions", "validate", str(repo / "definitions" / "rmsnorm_h4096")])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["definitions", "list", "--json"])
    names = {x["name"] for x in json.loads(r.output)}
    assert set(OURS) <= names
