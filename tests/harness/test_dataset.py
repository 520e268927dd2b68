"""Which definition and which workloads a command uses (harness/dataset.py), and that it says so.

The bug this guards against: given the official ``rmsnorm_h4096.json`` without ``-w``, ``kbot eval``
measured kbot's own 8 workloads instead of the official 14, silently.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.dataset import DATASET_ENV, dataset_root, interface_difference, resolve
from harness.operators import official_definition_path
from harness.schema import SchemaError, load_definition, load_workloads

REPO = Path(__file__).resolve().parents[2]
OURS = REPO / "definitions" / "rmsnorm_h4096" / "definition.json"
SOLUTION = REPO / "kernels" / "rmsnorm_h4096" / "triton_rows" / "solution.json"


def official(shared: Path) -> Path:
    return (shared / "flashinfer-trace").resolve()


def uuids(path: Path) -> set[str]:
    return {json.loads(line)["workload"]["uuid"] for line in path.read_text().splitlines() if line.strip()}


def make_dataset(root: Path, *, definition: Path = OURS, workloads: Path | None = None, name: str | None = None,
                 change: dict | None = None) -> Path:
    """A small FlashInfer-Trace folder: definitions/<op_type>/<name>.json (+ workloads/<op_type>/<name>.jsonl)."""
    data = json.loads(definition.read_text())
    if name:
        data["name"] = name
    data.update(change or {})
    (root / "definitions" / data["op_type"]).mkdir(parents=True, exist_ok=True)
    (root / "definitions" / data["op_type"] / f"{data['name']}.json").write_text(json.dumps(data))
    (root / "workloads" / data["op_type"]).mkdir(parents=True, exist_ok=True)
    if workloads is not None:
        lines = [json.loads(x) for x in workloads.read_text().splitlines() if x.strip()]
        for rec in lines:
            rec["definition"] = data["name"]
        (root / "workloads" / data["op_type"] / f"{data['name']}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return root


def test_an_official_path_uses_the_official_workloads(shared):
    ds = official(shared)
    path = official_definition_path(shared, "rmsnorm_h4096", "rmsnorm").resolve()
    for r in (resolve(str(path)), resolve(str(path), dataset=ds)):  # found by the path's own dataset, or named
        assert r.origin == "dataset" and r.dataset == ds.resolve()
        assert r.workloads_path == ds / "workloads" / "rmsnorm" / "rmsnorm_h4096.jsonl"
        got = {w.uuid for w in r.workloads()}
        assert got == uuids(r.workloads_path) and len(got) == 14
        assert not got & uuids(REPO / "definitions" / "rmsnorm_h4096" / "workloads.jsonl")
        assert "official dataset" in r.describe(14) and "14 workloads" in r.describe(14)


def test_a_name_means_the_dataset_s_definition_when_a_dataset_is_given(shared):
    ds = official(shared)
    r = resolve("rmsnorm_h4096", dataset=ds)
    assert r.origin == "dataset" and len(r.workloads()) == 14
    plain = resolve("rmsnorm_h4096")
    assert plain.origin == "kbot" and plain.path == OURS and len(plain.workloads()) == 8
    assert "kbot's" in plain.describe()


def test_dataset_from_the_environment(shared, monkeypatch):
    monkeypatch.setenv(DATASET_ENV, str(official(shared)))
    assert dataset_root(None) == official(shared).resolve()
    assert resolve("rmsnorm_h4096", dataset=dataset_root(None)).origin == "dataset"
    with pytest.raises(SchemaError, match="not a FlashInfer-Trace dataset"):
        dataset_root(None, env={DATASET_ENV: str(REPO / "harness")})


def test_a_dataset_without_the_workloads_refuses_instead_of_using_kbot_s(shared):
    # The shared dataset has GDN definitions but no GDN workloads: kbot's own set is never used in their place.
    ds = official(shared)
    path = official_definition_path(shared, "gdn_decode_qk4_v8_d128_k_last", "gdn")
    with pytest.raises(SchemaError, match="has no workloads for gdn_decode_qk4_v8_d128_k_last"):
        resolve(str(path))
    with pytest.raises(SchemaError, match="has no workloads"):
        resolve("gdn_decode_qk4_v8_d128_k_last", dataset=ds)
    given = REPO / "definitions" / "gdn_decode_qk4_v8_d128_k_last" / "workloads.small.jsonl"
    r = resolve(str(path), workloads=given)  # named explicitly: used, and said to be given
    assert r.workloads_origin == "given" and r.workloads_path == given and r.origin == "dataset"
    assert resolve(str(path), require_workloads=False).workloads_path is None


def test_a_loose_copy_of_an_official_file_refuses_without_workloads(tmp_path, shared):
    loose = tmp_path / "rmsnorm_h4096.json"
    shutil.copy(official_definition_path(shared, "rmsnorm_h4096", "rmsnorm"), loose)
    with pytest.raises(SchemaError, match="no workloads for the definition at") as e:
        resolve(str(loose))
    assert "-d rmsnorm_h4096" in str(e.value)  # says how to get kbot's set, does not take it
    r = resolve(str(loose), dataset=official(shared))
    assert r.origin == "file" and r.workloads_origin == "the official dataset's" and len(r.workloads()) == 14
    (tmp_path / "workloads.jsonl").write_text((REPO / "definitions" / "rmsnorm_h4096" / "workloads.small.jsonl").read_text())
    assert resolve(str(loose)).workloads_origin == "beside the definition"


def test_kbot_s_definition_with_a_dataset_takes_the_official_workloads(shared):
    r = resolve(str(OURS), dataset=official(shared))
    assert r.origin == "kbot" and r.workloads_origin == "the official dataset's" and len(r.workloads()) == 14


def test_a_name_with_a_different_interface_is_a_collision(tmp_path):
    ds = make_dataset(tmp_path / "ds", workloads=REPO / "definitions" / "rmsnorm_h4096" / "workloads.small.jsonl",
                      change={"axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": 2048}}})
    path = ds / "definitions" / "rmsnorm" / "rmsnorm_h4096.json"
    for attempt in (lambda: resolve(str(path)), lambda: resolve("rmsnorm_h4096", dataset=ds.resolve()),
                    lambda: resolve(str(OURS), dataset=ds.resolve())):
        with pytest.raises(SchemaError, match="definition name collision.*axes.hidden_size"):
            attempt()
    # Only descriptions differ: the same operator, no collision.
    ok = make_dataset(tmp_path / "ok", workloads=REPO / "definitions" / "rmsnorm_h4096" / "workloads.small.jsonl",
                      change={"description": "another text", "tags": []})
    assert resolve("rmsnorm_h4096", dataset=ok.resolve()).origin == "dataset"


def test_a_path_in_one_dataset_and_another_dataset_named_is_refused(tmp_path):
    a = make_dataset(tmp_path / "a", workloads=REPO / "definitions" / "rmsnorm_h4096" / "workloads.small.jsonl")
    b = make_dataset(tmp_path / "b", workloads=REPO / "definitions" / "rmsnorm_h4096" / "workloads.small.jsonl")
    with pytest.raises(SchemaError, match="say which one you mean"):
        resolve(str(a / "definitions" / "rmsnorm" / "rmsnorm_h4096.json"), dataset=b.resolve())


def test_unknown_names_and_missing_files_are_bad_input():
    with pytest.raises(SchemaError, match="no definition 'no_such_op'"):
        resolve("no_such_op")
    with pytest.raises(SchemaError, match="no such file"):
        resolve("nowhere/at_all.json")


def test_kbot_s_editions_of_official_definitions_have_the_official_interface(shared):
    """A name means one operator: every kbot definition that reuses an official name promises exactly
    the official interface (only descriptions, tags and the reference's text may differ)."""
    checked = 0
    for ours in sorted((REPO / "definitions").glob("*/definition.json")):
        d = load_definition(ours)
        off = official_definition_path(shared, d.name, d.op_type)
        if off.is_file():
            assert interface_difference(d, load_definition(off)) is None, d.name
            checked += 1
    assert checked >= 7


def _kbot(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k != DATASET_ENV}
    e.update(PYTHONPATH=str(REPO), **(env or {}))
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=REPO, env=e, timeout=600)


def test_kbot_eval_of_the_official_path_measures_the_official_workloads(shared, tmp_path):
    ds = official(shared)
    path = official_definition_path(shared, "rmsnorm_h4096", "rmsnorm")
    wl = load_workloads(ds / "workloads" / "rmsnorm" / "rmsnorm_h4096.jsonl")
    one = next(w for w in wl if w.axes["batch_size"] == 1)
    out = tmp_path / "run"
    p = _kbot("eval", str(SOLUTION), "-d", str(path), "--dataset", str(ds), "--device", "cpu", "--workload", one.uuid,
              "--budget", "0.05", "--timing", "min_iters=3", "--out", str(out), "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "the official dataset's" in p.stderr and str(ds / "workloads" / "rmsnorm" / "rmsnorm_h4096.jsonl") in p.stderr
    report = json.loads(p.stdout)
    assert [w["uuid"] for w in report["workloads"]] == [one.uuid]
    assert report["config"]["inputs"]["workloads_origin"] == "the official dataset's"
    assert report["config"]["inputs"]["definition_path"] == str(path)


def test_kbot_eval_refuses_when_it_cannot_tell_which_workloads(tmp_path, shared):
    loose = tmp_path / "rmsnorm_h4096.json"
    shutil.copy(official_definition_path(shared, "rmsnorm_h4096", "rmsnorm"), loose)
    p = _kbot("eval", str(SOLUTION), "-d", str(loose), "--device", "cpu")
    assert p.returncode == 2 and "no workloads for the definition at" in p.stderr, p.stderr
    p = _kbot("definitions", "show", "rmsnorm_h4096", env={DATASET_ENV: str(official(shared))})
    assert p.returncode == 0 and "the official dataset's" in p.stderr
    assert json.loads(p.stdout)["description"] == load_definition(official_definition_path(shared, "rmsnorm_h4096", "rmsnorm")).description
