"""Promotion decisions on constructed reports: each rule can reject (or ask for a re-benchmark)."""

from __future__ import annotations

import math

import pytest
from reportkit import FINDING, good, report, workload

from bot.policy_file import PolicyError
from bot.promotion.decision import PromotionPolicy, decide
from bot.review.evidence import Evidence, evidence, evidence_block, read_evidence
from harness.geomean import geomean_ci
from harness.schema import Status

P = PromotionPolicy()
CH = "b" * 64
HEAD = "a" * 40


def run(rep, *, champion_hash=CH, pr_head=HEAD, measured=HEAD, up_to_date=True, policy=P):
    return decide(Evidence.from_report(rep, measured), policy, champion_hash=champion_hash,
                  pr_head_sha=pr_head, up_to_date=up_to_date)


def failed_rules(d):
    return {r.rule for r in d.reasons if not r.ok}


def test_promote_when_every_rule_holds():
    d = run(good())
    assert d.action == "promote", d.reasons
    assert d.geomean == pytest.approx(1.10)
    assert 1.0 < d.ci95[0] < 1.10 < d.ci95[1]
    assert not failed_rules(d)


def test_shipped_policy_file_parses_and_matches_defaults(repo):
    p = PromotionPolicy.from_yaml((repo / "skills/promotion.yaml").read_text())
    assert p == PromotionPolicy()


def test_policy_typo_is_an_error():
    with pytest.raises(PolicyError, match="min_speedupp"):
        PromotionPolicy.from_yaml("min_speedupp: 1.0\n")
    with pytest.raises(PolicyError):
        PromotionPolicy.from_yaml("require_all_passed: false\n")  # not optional


def test_failed_workload_rejects():
    rep = report([workload(0), workload(1, status=Status.INCORRECT_NUMERICAL, ratio=None)])
    d = run(rep)
    assert d.action == "reject" and "all passed" in failed_rules(d)


def test_one_failed_trial_rejects():
    rep = report([workload(0), workload(1, failed_trials=1)])
    d = run(rep)
    assert d.action == "reject" and "all passed" in failed_rules(d)


def test_guard_finding_rejects_even_if_fast():
    d = run(good(ratio=(3.0, 2.9, 3.1), findings=[FINDING]))
    assert d.action == "reject" and failed_rules(d) == {"guard clean"}


def test_workload_finding_rejects():
    rep = report([workload(0), workload(1, findings=[FINDING])])
    assert run(rep).action == "reject"


def test_below_threshold_rejects():
    d = run(good(ratio=(1.02, 1.01, 1.03)))
    assert d.action == "reject" and failed_rules(d) == {"speedup"}


def test_interval_must_clear_one():
    d = run(good(n=1, ratio=(1.05, 0.97, 1.14)))
    assert d.action == "reject" and failed_rules(d) == {"confidence"}


def test_single_regression_rejects():
    rep = report([workload(0, (1.30, 1.28, 1.32)), workload(1, (1.30, 1.28, 1.32)), workload(2, (0.95, 0.94, 0.96))])
    d = run(rep)
    assert d.geomean > 1.03
    assert d.action == "reject" and failed_rules(d) == {"no regression"}


def test_regression_within_tolerance_is_fine():
    rep = report([workload(0, (1.30, 1.28, 1.32)), workload(1, (0.99, 0.985, 0.995))])
    assert run(rep).action == "promote"


def test_slower_point_within_noise_is_not_a_regression():
    # 2.5% slower on the point, but the interval contains 1: noise, not a measured slowdown
    noisy = report([workload(0, (1.30, 1.28, 1.32)), workload(1, (1.30, 1.28, 1.32)), workload(2, (0.975, 0.958, 1.007))])
    assert run(noisy).action == "promote"
    # the same point with an interval below 1 is measured: rejected
    measured = report([workload(0, (1.30, 1.28, 1.32)), workload(1, (1.30, 1.28, 1.32)), workload(2, (0.975, 0.965, 0.985))])
    d = run(measured)
    assert d.action == "reject" and failed_rules(d) == {"no regression"}
    assert "0.975x" in d.headline and "interval below 1" in d.headline


def test_behind_main_asks_for_rebenchmark():
    d = run(good(), up_to_date=False)
    assert d.action == "rebenchmark" and failed_rules(d) == {"up to date with the default branch"}


def test_moved_head_asks_for_rebenchmark():
    d = run(good(), pr_head="f" * 40)
    assert d.action == "rebenchmark"


def test_other_champion_asks_for_rebenchmark():
    d = run(good(), champion_hash="d" * 64)
    assert d.action == "rebenchmark"


def test_correctness_beats_staleness():
    rep = report([workload(0, failed_trials=2)])
    assert run(rep, up_to_date=False).action == "reject"


def test_missing_paired_ratio_rebenchmarks():
    rep = report([workload(0), workload(1, ratio=None)])
    assert run(rep).action == "rebenchmark"


def test_first_champion_uses_reference():
    rep = good(baseline=None, baseline_hash=None)
    d = run(rep, champion_hash=None)
    assert d.action == "promote" and d.first_champion
    slow = report([workload(0, vs_ref=0.5)], baseline=None, baseline_hash=None)
    assert run(slow, champion_hash=None).action == "reject"


def test_empty_report_rejects():
    assert run(report([])).action == "reject"


def test_geomean_ci_math():
    g, (lo, hi) = geomean_ci([(1.2, 1.1, 1.3), (1.0, 0.9, 1.1)])
    assert g == pytest.approx(math.sqrt(1.2))
    assert lo < g < hi
    # Independent workloads: the interval of the mean is narrower than each one's.
    g1, (lo1, hi1) = geomean_ci([(1.2, 1.1, 1.3)] * 4)
    assert (hi1 - lo1) < (1.3 - 1.1)


def test_evidence_block_roundtrip_gives_same_decision():
    rep = good()
    body = "review text\n" + evidence_block(rep, HEAD)
    data = read_evidence(body)
    assert data == evidence(rep, HEAD)
    d1 = run(rep)
    d2 = decide(Evidence.from_block(data), P, champion_hash=CH, pr_head_sha=HEAD, up_to_date=True)
    assert d1 == d2


def test_malformed_evidence_is_refused():
    with pytest.raises(ValueError):
        Evidence.from_block({"w": [["x"]], "definition": "d"})
    assert read_evidence("<!-- kbot:evidence not-base64!! -->") is None


def test_a_failed_kbot_check_rejects_and_says_which_also_through_the_evidence_block():
    """kbot's extra checks sit beside the official verdict (the status stays PASSED); a candidate that
    fails one on any workload is not promoted, and the reason names the check."""
    from harness.report import CheckResult

    rep = good()
    rep.workloads[1].correctness.checks["token_l2"] = CheckResult(ok=False, value=0.21, limit=0.08, trials=3, failed_trials=1)
    rep.workloads[0].correctness.checks["token_l2"] = CheckResult(ok=True, value=0.02, limit=0.08, trials=3)
    d = run(rep)
    assert d.action == "reject" and failed_rules(d) == {"kbot checks"}
    why = next(r.detail for r in d.reasons if r.rule == "kbot checks")
    assert "token_l2" in why and "1 workload(s)" in why
    data = read_evidence("x\n" + evidence_block(rep, HEAD))
    assert decide(Evidence.from_block(data), P, champion_hash=CH, pr_head_sha=HEAD, up_to_date=True) == d
    # a block written before the checks were carried (5 fields a row) still reads, with none failed
    old = {**data, "w": [row[:5] for row in data["w"]]}
    assert all(w.failed_checks == () for w in Evidence.from_block(old).workloads)


# -- energy breaks a speed tie (lexicographic: speed first) ---------------------------------------------


def with_energy(rep, cand, champ):
    for w in rep.workloads:
        w.energy_j_per_call, w.baseline_energy_j_per_call = cand, champ
    return rep


def test_energy_breaks_a_speed_tie():
    rep = with_energy(good(ratio=(1.00, 0.98, 1.02)), 0.90e-3, 1.00e-3)  # same speed, 10% less energy
    d = run(rep)
    assert d.action == "promote", d.reasons
    assert d.energy_ratio == pytest.approx(0.90) and "less energy per call" in d.headline
    assert "energy tie-break" in {r.rule for r in d.reasons if r.ok} and not failed_rules(d)
    # the evidence block carries the pairs, so a decision read back from the review is the same
    ev = Evidence.from_block(read_evidence(evidence_block(rep, HEAD)))
    assert ev.workloads[0].energy == (0.90e-3, 1.00e-3)
    assert decide(ev, P, champion_hash=CH, pr_head_sha=HEAD, up_to_date=True).action == "promote"


def test_energy_does_not_decide_when_the_speeds_differ_or_the_saving_is_small():
    # clearly slower (the interval excludes 1): speed decides, whatever the energy
    assert run(with_energy(good(ratio=(0.97, 0.96, 0.98)), 0.5e-3, 1.0e-3)).action == "reject"
    # clearly faster: promoted on speed, energy not consulted
    d = run(with_energy(good(ratio=(1.10, 1.08, 1.12)), 2.0e-3, 1.0e-3))
    assert d.action == "promote" and d.energy_ratio is None
    # a tie, but only 2% less energy (the policy asks 5%)
    d = run(with_energy(good(ratio=(1.00, 0.98, 1.02)), 0.98e-3, 1.00e-3))
    assert d.action == "reject" and any("not applied" in r.detail for r in d.reasons if r.rule == "energy tie-break")
    # a tie with a regressing workload: the regression rule still rejects
    rep = with_energy(report([workload(0, (1.05, 0.99, 1.10)), workload(1, (0.95, 0.91, 0.99))]), 0.5e-3, 1.0e-3)
    assert run(rep).action == "reject"
    # the policy switch
    off = PromotionPolicy(energy_tie_break=None)
    assert run(with_energy(good(ratio=(1.00, 0.98, 1.02)), 0.5e-3, 1.0e-3), policy=off).action == "reject"


def test_without_an_energy_counter_a_tie_says_so_and_speed_decides():
    d = run(good(ratio=(1.00, 0.98, 1.02)))  # CPU runner: no energy anywhere
    assert d.action == "reject"
    why = [r.detail for r in d.reasons if r.rule == "energy tie-break"]
    assert why and "measured on 0 of 4 workloads" in why[0]
    rep = good(ratio=(1.00, 0.98, 1.02))
    rep.workloads[0].energy_j_per_call, rep.workloads[0].baseline_energy_j_per_call = 0.5e-3, 1e-3  # one of four
    assert run(rep).action == "reject"


def test_evidence_block_carries_the_top_feedback_items():
    """What a later /optimize shows the agent comes back from the block: the most severe items, one per
    (rule, title), texts cut, only small evidence values; blocks written before it carry none."""
    from reportkit import FB

    from harness.report import FeedbackItem

    rep = good()
    low = FeedbackItem(rule="roofline_distance", severity="low", title="At 40% of the roofline", cause="c" * 900,
                       evidence={"roofline_fraction": 0.4, "note": "x" * 200, "nested": {"a": 1}})
    rep.workloads[0].feedback = [low, FB]
    rep.workloads[1].feedback = [FB]  # the same item on another workload: once
    ev = Evidence.from_block(read_evidence(evidence_block(rep, HEAD)))
    assert [f.rule for f in ev.feedback] == ["uncoalesced", "roofline_distance"]  # most severe first
    assert ev.feedback[0] == FB
    assert len(ev.feedback[1].cause) == 400 and ev.feedback[1].evidence == {"roofline_fraction": 0.4}
    assert ev == Evidence.from_report(rep, HEAD)
    old = evidence(rep, HEAD)
    del old["fb"]
    assert Evidence.from_block(old).feedback == ()
    for bad in ([["r", "high"]], [["r", "loud", "t", "", "", None, {}]], "x"):
        with pytest.raises(ValueError, match="feedback"):
            Evidence.from_block({**evidence(rep, HEAD), "fb": bad})


def _heavy_two(heavy_ratio=(1.25, 1.24, 1.26), light_ratio=(1.0, 0.99, 1.01), light_n=17):
    """Many light workloads that did not move and two heavy ones (20x the time) that did."""
    light = [workload(i, light_ratio, median=0.2) for i in range(light_n)]
    heavy = [workload(light_n + i, heavy_ratio, median=4.0) for i in range(2)]
    return report(light + heavy)


def test_mean_latency_gain_promotes_what_the_geomean_dilutes():
    rep = _heavy_two()
    d = run(rep)
    g, _ = geomean_ci([(w.speedup_vs_baseline.median, *w.speedup_vs_baseline.ci95) for w in rep.workloads])
    assert g < P.min_speedup and d.geomean == pytest.approx(g)  # the geomean alone would reject it
    champion = sum(w.baseline_latency_ms.median for w in rep.workloads)
    candidate = sum(w.baseline_latency_ms.median / w.speedup_vs_baseline.median for w in rep.workloads)
    assert d.mean_ratio == pytest.approx(champion / candidate) and d.mean_ratio > 1.15
    assert d.action == "promote", d.reasons
    speed = next(r for r in d.reasons if r.rule == "speedup")
    assert "mean latency" in speed.detail and "met" in speed.detail
    assert "mean latency" in d.headline
    # the geomean-only policy rejects the same evidence
    assert run(rep, policy=PromotionPolicy(min_mean_speedup=None)).action == "reject"


def test_mean_latency_gain_still_needs_no_regression_and_confidence():
    rep = _heavy_two()
    rep.workloads[0] = workload(0, (0.95, 0.94, 0.96), median=0.2)  # one light workload 5% slower
    d = run(rep)
    assert d.action == "reject" and failed_rules(d) == {"no regression"}
    small = run(_heavy_two(heavy_ratio=(1.04, 1.03, 1.05)))  # mean only 1.03x lower: under 1.05
    assert small.action == "reject" and "speedup" in failed_rules(small)


def test_mean_latency_needs_every_champion_latency():
    rep = _heavy_two()
    block = evidence(rep, HEAD)
    assert len(block["bms"]) == len(rep.workloads)
    ev = Evidence.from_block(read_evidence(evidence_block(rep, HEAD)))
    assert [w.baseline_ms for w in ev.workloads] == [w.baseline_latency_ms.median for w in rep.workloads]
    assert decide(ev, P, champion_hash=CH, pr_head_sha=HEAD, up_to_date=True).action == "promote"
    old = {k: v for k, v in block.items() if k != "bms"}  # a block written before the field existed
    old_ev = Evidence.from_block(old)
    d = decide(old_ev, P, champion_hash=CH, pr_head_sha=HEAD, up_to_date=True)
    assert d.mean_ratio is None and d.action == "reject"  # the geomean alone decides
    with pytest.raises(ValueError, match="bms"):
        Evidence.from_block({**block, "bms": block["bms"][:-1]})


def test_a_noisy_heavy_workload_cannot_carry_the_mean_alone():
    """The mean's own conservative bound (each ratio at its interval's low end) must clear min_ci_lower:
    two heavy workloads at 1.30x with intervals [0.80, 1.90] give a mean of 1.2x but a bound under 1."""
    rep = _heavy_two(heavy_ratio=(1.30, 0.80, 1.90))
    d = run(rep)
    assert d.action == "reject" and "speedup" in failed_rules(d)
    speed = next(r for r in d.reasons if r.rule == "speedup")
    assert "lower bound" in speed.detail and "met" not in speed.detail


def test_mean_wording_and_a_missing_champion_latency():
    # a geomean promotion whose mean moved the other way says so in words, not "0.99x lower"
    light = [workload(i, (1.08, 1.07, 1.09), median=0.2) for i in range(6)]
    heavy = [workload(6, (0.985, 0.98, 0.99), median=20.0)]
    d = run(report(light + heavy))
    assert d.action == "promote" and d.mean_ratio < 1 and "higher" in d.headline and "lower" not in d.headline
    # one workload without the champion's latency: no mean, the geomean alone decides
    block = evidence(_heavy_two(), HEAD)
    block["bms"][3] = None
    ev = Evidence.from_block(block)
    d = decide(ev, P, champion_hash=CH, pr_head_sha=HEAD, up_to_date=True)
    assert d.mean_ratio is None and d.action == "reject"
