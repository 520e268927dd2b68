"""The stop rules run by default on the `kbot optimize` path, from the promotion policy's `stop:`
(skills/promotion.yaml, read from the workspace's main): a synthetic plateau stops the campaign before
its rounds are used, and so does a best node at its roofline floor."""

from __future__ import annotations

from bot.campaign.local_loop import Workspace, optimize
from bot.promotion.decision import PromotionPolicy
from tests.controller.synthetic import make_report
from tests.local.test_local_loop_synthetic import SyntheticHarness, _opts


class FlatHarness(SyntheticHarness):
    """Every kernel takes the same time (a plateau): paired ratios of exactly 1. ``floor_ms``: a roofline
    floor per workload (None: no roofline)."""

    def __init__(self, cache: dict, floor_fraction: float | None = None):
        super().__init__(cache)
        self.floor_fraction = floor_fraction

    def evaluate(self, solution, baseline):
        self.runs += 1
        ws = []
        for i, w in enumerate(self.workloads):
            d = {"uuid": w.uuid, "axes": dict(w.axes), "latency_ms": 2.0 * (1 + i), "reference_ms": 4.0 * (1 + i)}
            if baseline is not None:
                d["baseline_ms"] = d["latency_ms"]
            if self.floor_fraction is not None:
                d["floor_ms"] = d["latency_ms"] * self.floor_fraction
            ws.append(d)
        rep = make_report(solution, ws, baseline)
        self.cache[(solution.content_hash(), baseline.content_hash() if baseline else None)] = rep
        return rep


def test_a_plateau_stops_kbot_optimize_before_its_rounds(tmp_path):
    patience = PromotionPolicy().stop.patience
    harness = FlatHarness({})
    s = optimize(_opts(tmp_path, rounds=20, candidates=2), harness=harness)
    assert s["stop_reason"].startswith("plateau"), s["stop_reason"]
    finished = [r for r in s["candidates"] if r["status"]]
    # the start, then `patience` candidates without gain (a round may finish past the count)
    assert patience + 1 <= len(finished) <= patience + 2 < 1 + 20 * 2
    assert all(r["decision"] in ("champion", "reject") for r in s["candidates"])
    ws = Workspace(tmp_path / "ws")
    assert not [p for p in ws.forge.list_prs(state="all") if p.merged]


def test_the_speed_of_light_stops_kbot_optimize(tmp_path):
    target = PromotionPolicy().stop.roofline_target
    s = optimize(_opts(tmp_path, rounds=5, candidates=2), harness=FlatHarness({}, floor_fraction=target + 0.01))
    assert s["stop_reason"].startswith("speed of light"), s["stop_reason"]
    assert len(s["candidates"]) == 1  # the start was already at the floor: no candidate was asked for


def test_stop_rules_follow_the_workspace_policy(tmp_path):
    """`stop: {patience: null, roofline_target: null}` on the workspace's main switches both rules off."""
    ws = Workspace(tmp_path / "ws")
    _, head = ws.forge.default_head()
    text = ws.forge.read_file("skills/promotion.yaml").decode()
    text = text.replace("  roofline_target: 0.9\n", "  roofline_target: null\n").replace("  patience: 6\n", "  patience: null\n")
    assert "patience: null" in text and "roofline_target: null" in text
    ws.forge.commit_files("main", head, {"skills/promotion.yaml": text}, "no stop rules")
    s = optimize(_opts(tmp_path, rounds=4, candidates=1), harness=FlatHarness({}, floor_fraction=0.99))
    assert s["stop_reason"].startswith(("step budget", "candidate budget")), s["stop_reason"]
    assert len(s["candidates"]) == 5  # the start and every round's candidate, at the floor and on a plateau
