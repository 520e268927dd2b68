"""The offline agent and the campaign against the real harness on CPU (Triton interpreter): the seeds
and their variants build, pass the guard and match the reference, and the reports flow into the tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.agents.providers.offline import OfflineAgent, load_seeds
from bot.controller.campaign import Campaign

REPO = Path(__file__).resolve().parents[2]
DEF_DIR = REPO / "definitions" / "rmsnorm_h4096"


class CpuHarness:
    """Adapter from the campaign's Evaluator protocol to harness.runner.evaluate (CPU, short timing)."""

    def __init__(self, definition, workloads, out: Path) -> None:
        from harness.runner import RunConfig

        self.definition, self.workloads, self.out = definition, workloads, out
        self.cfg = RunConfig(trials=1, timing={"warmup": 1, "min_iters": 2, "max_iters": 3, "budget_s": 0.1, "recheck": 1})
        self.n = 0

    def evaluate(self, solution, baseline):
        from harness.runner import evaluate

        self.n += 1
        return evaluate(self.definition, solution, self.workloads, self.out / f"run{self.n}", self.cfg, baseline=baseline)


@pytest.mark.slow
def test_offline_campaign_on_the_cpu_harness(tmp_path):
    if not (DEF_DIR / "definition.json").exists():
        pytest.skip("definitions/rmsnorm_h4096 not in this checkout")
    from harness.schema import load_definition, load_workloads

    d = load_definition(DEF_DIR / "definition.json")
    wl = load_workloads(DEF_DIR / "workloads.small.jsonl", d)[:2]
    seeds = [s for s in load_seeds(d.name) if s.name.endswith("single_pass")]
    camp = Campaign.start(d, seeds, OfflineAgent({"use_seeds": False}), CpuHarness(d, wl, tmp_path / "runs"),
                          {"fsync": False, "budget": {"max_candidates": 3, "patience": None}}, tmp_path / "c", workloads=wl)
    camp.run()
    nodes = [n for n in camp.tree.nodes.values() if n.solution is not None]
    assert len(nodes) == 3
    for n in nodes:
        assert n.passed, (n.summary or {}).get("error")
        assert n.summary["speedup_vs_reference"] > 0
    # The variants were measured against the seed (paired), as the campaign asked.
    child = next(n for n in nodes if not n.is_baseline)
    assert child.summary["baseline_hash"] == camp.tree.baseline.solution.content_hash()
    assert camp.report()["best"] is not None
