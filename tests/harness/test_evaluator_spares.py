"""The campaign's harness evaluator keeps spare workers for the next candidate (on by default on the GPU)."""

from pathlib import Path

from bot.campaign.harness_evaluator import HarnessEvaluator
from harness.schema import Status, load_definition, load_workloads, parse_solution

REPO = Path(__file__).resolve().parents[2]
DEF = REPO / "definitions" / "rmsnorm_h4096" / "definition.json"
SMALL = REPO / "definitions" / "rmsnorm_h4096" / "workloads.small.jsonl"

CODE = '''import torch

def run(hidden_states, weight):
    x = hidden_states.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    return (y * weight.float()).to(hidden_states.dtype)  # {tag}
'''


def _sol(tag: str):
    return parse_solution({"name": f"s{tag}", "definition": "rmsnorm_h4096", "author": "t",
                           "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run", "destination_passing_style": False},
                           "sources": [{"path": "main.py", "content": CODE.format(tag=tag)}]})


def test_later_evaluations_start_from_spares_and_close_ends_them(tmp_path):
    d = load_definition(DEF)
    ws = load_workloads(SMALL, d)[:1]
    ev = HarnessEvaluator(d, ws, tmp_path / "runs", device="cpu", trials=1, timing={"budget_s": 0.02}, definition_path=DEF, spare_workers=True)
    try:
        first = ev.evaluate(_sol("a"), None)
        second = ev.evaluate(_sol("b"), None)
        again = ev.evaluate(_sol("b"), None)  # a cache hit: no evaluation, the spares stay for the next one
        assert [w.status for w in first.workloads + second.workloads] == [Status.PASSED, Status.PASSED]
        assert first.config["spare_worker"] is False and second.config["spare_worker"] is True
        assert again.run_id == second.run_id and ev.cache_hits == 1 and ev.runs == 2
        idle = [sp.proc for _, sp in ev._spares._idle]
        assert len(idle) == 1  # on the CPU: the timing worker only (no observer)
    finally:
        ev.close()
    assert all(p.poll() is not None for p in idle) and ev._spares is None
    ev.close()  # twice is fine


def test_off_by_default_on_the_cpu(tmp_path):
    d = load_definition(DEF)
    ev = HarnessEvaluator(d, load_workloads(SMALL, d)[:1], tmp_path / "runs", device="cpu", trials=1, timing={"budget_s": 0.02})
    rep = ev.evaluate(_sol("c"), None)
    assert "spare_worker" not in rep.config and ev._spares is None
