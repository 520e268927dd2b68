"""The promotion rules as a pure function: ``decide(evidence, policy, champion_hash, pr_head_sha,
up_to_date)`` -> a Decision (promote, reject or rebenchmark) with one Reason per rule.

Evidence comes from a Report or from the evidence block of our own review (``bot.review.evidence``),
the policy from ``skills/promotion.yaml`` on the default branch, the facts from the repository now
(current champion hash, whether the measured head is still the PR head and contains the default branch).
The policy model (PromotionPolicy) is here, beside the rules it sets the thresholds of, so a rule and
its threshold are one edit (and one line of ``skills/promotion.yaml``).

Rule order matters: correctness and guard failures reject whatever else is true; a stale measurement
(other champion, moved head, base behind the default branch) asks for a re-benchmark before any
speed rule is judged, because its speed numbers no longer describe the merge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.policy_file import parse_policy
from bot.review.evidence import Evidence
from harness.geomean import geomean, geomean_ci
from harness.schema import Status

PROMOTION_PATH = "skills/promotion.yaml"


class StopRules(BaseModel):
    """When a campaign stops on its own (``bot.controller.budget.converged``), for ``kbot optimize`` and
    the GitHub campaign alike. A plateau's gain threshold is ``min_speedup``: a candidate that could not
    be promoted over the best is no progress."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Speed of light: stop once the best node is at this fraction of its roofline floor (launch floor
    # included) on every workload. None: never.
    roofline_target: float | None = Field(0.9, gt=0.0, le=1.0)
    # Plateau: stop after this many finished candidates without a gain beyond min_speedup over the best
    # before them. None: never.
    patience: int | None = Field(6, ge=1, le=1000)


class PromotionPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1] = 1
    require_all_passed: Literal[True] = True
    require_guard_clean: bool = True
    min_speedup: float = Field(1.03, ge=1.0, le=100.0)
    min_ci_lower: float = Field(1.0, ge=0.5, le=100.0)
    # The speed rule also passes when the mean latency over the workloads drops by at least this factor
    # (the champion's paired latencies as weights: sum(champion) / sum(champion / ratio)), so a gain on
    # the workloads that hold the time is not diluted by many that did not move. On the mean alone, the
    # mean from each ratio's 95% lower bound must clear min_ci_lower as well; the geomean's confidence and
    # the no-regression rules still apply. None: the geomean alone.
    min_mean_speedup: float | None = Field(1.05, ge=1.0, le=100.0)
    max_regression: float = Field(0.02, ge=0.0, le=0.5)
    first_champion_min_speedup_vs_reference: float = Field(1.0, ge=0.0, le=1000.0)
    require_up_to_date: bool = True
    merge_method: Literal["squash", "merge", "rebase"] = "squash"
    close_losers: bool = True
    # A person's PR (not opened by the bot) is merged only with an approving review of the measured head
    # by an account with at least this role (checked by API; "none": no approval needed).
    people_approval: Literal["none", "write", "maintain", "admin"] = "maintain"
    # Energy breaks a speed tie: a candidate within noise of the champion (its paired geomean's 95%
    # interval contains 1, no workload regresses) is promoted when its energy per call, paired in the
    # same job, is lower by at least this fraction (geomean over workloads). None: speed only.
    energy_tie_break: float | None = Field(0.05, gt=0.0, lt=1.0)
    stop: StopRules = StopRules()

    def budget(self) -> dict[str, Any]:
        """The stop rules as ``bot.controller.budget.Budget`` settings."""
        return {"roofline_target": self.stop.roofline_target, "patience": self.stop.patience,
                "min_gain": self.min_speedup - 1.0}

    @classmethod
    def from_yaml(cls, text: str, where: str = PROMOTION_PATH) -> "PromotionPolicy":
        return parse_policy(cls, text, where)


@dataclass(frozen=True)
class Reason:
    rule: str
    ok: bool
    detail: str
    verdict: Literal["reject", "rebenchmark"] = "reject"  # what a failure of this rule means


@dataclass(frozen=True)
class Decision:
    action: Literal["promote", "reject", "rebenchmark"]
    reasons: tuple[Reason, ...]
    geomean: float | None = None
    ci95: tuple[float, float] | None = None
    first_champion: bool = False
    energy_ratio: float | None = None  # candidate / champion energy per call, when energy broke a speed tie
    mean_ratio: float | None = None  # champion / candidate mean latency (paired), when the evidence has it

    @property
    def headline(self) -> str:
        bad = [r for r in self.reasons if not r.ok]
        if self.action == "promote":
            if self.first_champion:
                return "first champion of this definition"
            text = f"{self.geomean:.3f}x over the champion, 95% CI [{self.ci95[0]:.3f}, {self.ci95[1]:.3f}]"
            if self.mean_ratio is not None:
                text += f"; mean latency {ratio_text(self.mean_ratio)}"
            if self.energy_ratio is not None:
                text += f": a speed tie, broken by {1 - self.energy_ratio:.1%} less energy per call"
            return text
        return "; ".join(r.detail for r in bad[:3])

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "geomean": self.geomean, "ci95": self.ci95,
                "first_champion": self.first_champion, "energy_ratio": self.energy_ratio, "mean_ratio": self.mean_ratio,
                "reasons": [{"rule": r.rule, "ok": r.ok, "detail": r.detail} for r in self.reasons]}



def valid_ratio(r: tuple[float, float, float] | None) -> bool:
    return r is not None and all(math.isfinite(x) and x > 0 for x in r) and r[1] <= r[0] <= r[2]


def mean_latency_ratio(ev: Evidence) -> tuple[float, float] | None:
    """Champion over candidate mean latency across the workloads, from each workload's paired ratio and
    the champion's latency in the same job: sum(b) / sum(b / ratio), and the same with each ratio's 95%
    lower bound (a conservative bound on the mean's gain). None unless every workload has both."""
    rows = [(w.baseline_ms, w.ratio[0], w.ratio[1]) for w in ev.workloads if w.ratio is not None]
    if not rows or len(rows) != len(ev.workloads) or any(b is None or not math.isfinite(b) or b <= 0 for b, _, _ in rows):
        return None
    total = sum(b for b, _, _ in rows)  # type: ignore[misc]
    return total / sum(b / r for b, r, _ in rows), total / sum(b / lo for b, _, lo in rows)  # type: ignore[operator]


def ratio_text(x: float) -> str:
    """A champion/candidate latency ratio in words: '1.199x lower' or '1.010x higher'."""
    return f"{x:.3f}x lower" if x >= 1.0 else f"{1.0 / x:.3f}x higher"


def decide(ev: Evidence, policy: PromotionPolicy, *, champion_hash: str | None, pr_head_sha: str | None,
           up_to_date: bool) -> Decision:
    reasons: list[Reason] = []

    def rule(name: str, ok: bool, detail: str, verdict: Literal["reject", "rebenchmark"] = "reject") -> bool:
        reasons.append(Reason(name, ok, detail, verdict))
        return ok

    # 1. correctness: every workload PASSED in every trial.
    bad = [w for w in ev.workloads if w.status != Status.PASSED.value or w.failed_trials > 0]
    if not ev.workloads:
        rule("all passed", False, "the report has no workloads")
    elif bad:
        first = bad[0]
        rule("all passed", False, f"{len(bad)} of {len(ev.workloads)} workloads did not pass every trial "
             f"(first: {first.status}, {first.failed_trials} failed trials)")
    else:
        rule("all passed", True, f"{len(ev.workloads)}/{len(ev.workloads)} workloads passed every trial")
    # 1b. kbot's extra checks (sidecar ``checks:``, beside the official verdict): failing one anywhere rejects.
    flagged = [w for w in ev.workloads if w.failed_checks]
    if flagged:
        names = sorted({c for w in flagged for c in w.failed_checks})
        rule("kbot checks", False, f"{len(flagged)} workload(s) failed kbot's extra check(s) {', '.join(names)} "
             f"(first: {flagged[0].uuid[:8]}); the official verdict passed them")
    # 2. guard.
    if policy.require_guard_clean:
        rule("guard clean", ev.findings == 0, "no guard findings" if ev.findings == 0 else f"{ev.findings} guard finding(s)")

    # 3. freshness: what was measured is what would be merged, against today's champion and main.
    if champion_hash is not None:
        rule("measured against the current champion", ev.baseline_hash == champion_hash,
             "paired against the current champion" if ev.baseline_hash == champion_hash
             else "measured against another champion than the current one", "rebenchmark")
    if pr_head_sha is not None:
        same = ev.head_sha is not None and ev.head_sha == pr_head_sha
        rule("measured the PR head", same, "measured the current PR head" if same
             else "the PR head moved since it was measured", "rebenchmark")
    if policy.require_up_to_date:
        rule("up to date with the default branch", up_to_date,
             "head contains the default branch" if up_to_date else "head is behind the default branch", "rebenchmark")

    def finish(geo=None, ci=None, first=False, mean=None) -> Decision:
        failed = [r for r in reasons if not r.ok]
        if any(r.verdict == "reject" for r in failed):
            action = "reject"
        elif failed:
            action = "rebenchmark"
        else:
            action = "promote"
        return Decision(action, tuple(reasons), geo, ci, first, mean_ratio=mean)

    if any(not r.ok for r in reasons):
        # Either already rejected, or stale: speed numbers would not describe the merge; stop here.
        return finish()

    # 4. speed.
    if champion_hash is None:
        refs = [w.vs_reference for w in ev.workloads]
        if any(r is None or not math.isfinite(r) or r <= 0 for r in refs):
            rule("speedup vs reference", False, "no speedup vs the reference for every workload")
            return finish(first=True)
        g = geomean(refs)
        assert g is not None  # every value was checked positive and finite just above
        rule("speedup vs reference", g >= policy.first_champion_min_speedup_vs_reference,
             f"first champion: geomean {g:.3f}x vs the reference (needs ≥ {policy.first_champion_min_speedup_vs_reference:g})")
        return finish(g, None, True)

    missing = [w for w in ev.workloads if not valid_ratio(w.ratio)]
    if missing:
        rule("paired measurement", False, f"{len(missing)} workload(s) have no valid paired ratio vs the champion",
             "rebenchmark")
        return finish()
    ratios = [w.ratio for w in ev.workloads]  # type: ignore[misc]
    g, (lo, hi) = geomean_ci(ratios)  # type: ignore[arg-type]
    floor = 1.0 - policy.max_regression
    # A regression is a workload measured slower: its paired ratio beyond max_regression and its 95%
    # interval below parity. A ratio whose interval contains 1 is the comparison's noise (a 5 µs workload
    # on an unchanged code path read 0.975x [0.958, 1.007]), and rejecting on it rejects honest code.
    slow = [w for w in ev.workloads if w.ratio[0] < floor and w.ratio[2] < 1.0]  # type: ignore[index]
    m = mean_latency_ratio(ev)
    mean, mean_lo = m if m is not None else (None, None)
    # on the mean alone, its own conservative bound must clear min_ci_lower too (a heavy workload's wide
    # interval could otherwise carry a noisy mean over the threshold)
    on_mean = (policy.min_mean_speedup is not None and mean is not None and mean >= policy.min_mean_speedup
               and mean_lo is not None and mean_lo > policy.min_ci_lower)
    faster = (g >= policy.min_speedup or on_mean) and lo > policy.min_ci_lower
    tie = energy_tie(ev, policy, g, lo, hi) if not faster and not slow else None
    if tie is not None and tie[0]:
        # Lexicographic: speed decided nothing (a tie within noise), so energy decides.
        rule("speedup", True, f"geomean {g:.3f}x vs champion, 95% CI [{lo:.3f}, {hi:.3f}] contains 1: a speed tie")
        rule("energy tie-break", True, tie[1])
    else:
        detail = f"geomean {g:.3f}x vs champion (needs ≥ {policy.min_speedup:g})"
        if policy.min_mean_speedup is not None and mean is not None and mean_lo is not None:
            if g >= policy.min_speedup:
                detail += f"; mean latency {ratio_text(mean)}"
            else:
                detail += (f", or mean latency {ratio_text(mean)} with its lower bound {mean_lo:.3f} "
                           f"(needs ≥ {policy.min_mean_speedup:g} and > {policy.min_ci_lower:g}{': met' if on_mean else ''})")
        rule("speedup", g >= policy.min_speedup or on_mean, detail)
        rule("confidence", lo > policy.min_ci_lower,
             f"95% CI lower bound {lo:.3f} (needs > {policy.min_ci_lower:g})")
        if tie is not None:
            rule("energy tie-break", True, f"not applied: {tie[1]}")  # informative: speed alone decided
    rule("no regression", not slow,
         f"no workload measured slower than {floor:.3f}x (95% interval below 1)" if not slow
         else f"{len(slow)} workload(s) slower than the champion beyond {policy.max_regression:.0%} "
              f"(worst {min(w.ratio[0] for w in slow):.3f}x, 95% interval below 1)")  # type: ignore[index]
    d = finish(g, (lo, hi), mean=mean)
    if d.action == "promote" and tie is not None and tie[0]:
        d = Decision(d.action, d.reasons, d.geomean, d.ci95, d.first_champion, energy_ratio=tie[2], mean_ratio=mean)
    return d


def energy_tie(ev: Evidence, policy: PromotionPolicy, g: float, lo: float, hi: float) -> tuple[bool, str, float | None] | None:
    """Whether energy breaks a speed tie: (promote on energy?, why, candidate/champion energy ratio).
    None when the speeds are not tied (the paired interval excludes 1) or the policy has no tie-break.
    A tie needs every workload's energy, candidate and champion measured in the same job; on a runner
    without an energy counter (a CPU) the answer says so and speed alone decides."""
    if policy.energy_tie_break is None or not (lo <= 1.0 <= hi):
        return None
    pairs = [w.energy for w in ev.workloads]
    if not pairs or any(p is None or not all(math.isfinite(x) and x > 0 for x in p) for p in pairs):
        n = sum(1 for p in pairs if p is not None)
        return False, (f"a speed tie (geomean {g:.3f}x), but energy per call was measured on {n} of "
                       f"{len(pairs)} workloads (no NVML counter on this runner?)"), None
    ratio = geomean([c / b for c, b in pairs])  # type: ignore[misc]
    assert ratio is not None  # every value was checked positive and finite just above
    need = 1.0 - policy.energy_tie_break
    ok = ratio <= need
    return ok, (f"energy per call {ratio:.3f}x the champion's, geomean over {len(pairs)} workloads "
                f"(needs ≤ {need:.3f})"), ratio


