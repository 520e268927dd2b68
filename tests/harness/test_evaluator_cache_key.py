"""The evaluator's run-folder key changes with everything that changes a measurement, including the
definition's sidecar (its input generators) and the workloads' content, not only their names."""

import shutil
from pathlib import Path

from bot.campaign.harness_evaluator import HarnessEvaluator
from harness.schema import load_definition, load_workloads, parse_solution

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "definitions" / "rmsnorm_h4096"
INDEXER = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"


def _sol():
    return parse_solution({"name": "s", "definition": "rmsnorm_h4096", "author": "t",
                           "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run", "destination_passing_style": False},
                           "sources": [{"path": "main.py", "content": "def run(hidden_states, weight):\n    return hidden_states\n"}]})


def _key(folder: Path, workloads=None) -> str:
    dpath = folder / "definition.json"
    d = load_definition(dpath)
    ws = workloads or load_workloads(folder / "workloads.small.jsonl", d)[:1]
    return HarnessEvaluator(d, ws, folder / "runs", definition_path=dpath).key(_sol(), None)


def test_key_follows_the_sidecar_and_the_reference(tmp_path):
    folder = tmp_path / INDEXER
    shutil.copytree(REPO / "definitions" / INDEXER, folder)
    before = _key(folder)
    assert _key(folder) == before  # stable
    side = folder / "kbot.yaml"
    assert "std: 6.9e-5" in side.read_text()
    side.write_text(side.read_text().replace("std: 6.9e-5", "std: 1.0"))  # the weights' magnitude
    after_gen = _key(folder)
    assert after_gen != before
    ref = folder / "reference.py"
    ref.write_text(ref.read_text() + "\n# changed\n")
    assert _key(folder) != after_gen


def test_key_follows_the_workloads_content_not_only_their_ids(tmp_path):
    folder = tmp_path / "rmsnorm_h4096"
    shutil.copytree(SRC, folder)
    d = load_definition(folder / "definition.json")
    w = load_workloads(folder / "workloads.small.jsonl", d)[0]
    changed = w.model_copy(update={"axes": {**w.axes, "batch_size": int(w.axes.get("batch_size", 1)) + 1}})
    assert changed.uuid == w.uuid
    assert _key(folder, [w]) != _key(folder, [changed])
