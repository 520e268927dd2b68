"""Promotion: does a candidate replace the champion, and if so, merge it safely.

``decide`` is pure: evidence (from a Report, or from the evidence block of our own review) + the
policy (``skills/promotion.yaml`` from the default branch) + facts about the repository now (current
champion hash, whether the measured head is still the PR head and contains the default branch) →
a Decision: promote, reject, or rebenchmark, with one Reason per rule.

Rule order matters: correctness and guard failures reject whatever else is true; a stale measurement
(other champion, moved head, base behind the default branch) asks for a re-benchmark before any
speed rule is judged, because its speed numbers no longer describe the merge.

``execute`` carries a promote decision out through the forge: a sha-guarded squash merge of exactly
the measured head, then ONE commit on the default branch with the champion pointer
(``kernels/<definition>/champion.json``) and the generated ``LEADERBOARD.md``, then the losing
evaluated PRs of the definition closed with a summary.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field

from bot.forge.base import BranchMovedError, Forge, ForgeError, HeadMovedError, PullRequest
from bot.policy import PolicyError, _parse
from harness.report import Report
from harness.schema import Status

PROMOTION_PATH = "skills/promotion.yaml"
Z95 = 1.959963984540054


class PromotionPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1] = 1
    require_all_passed: Literal[True] = True
    require_guard_clean: bool = True
    min_speedup: float = Field(1.03, ge=1.0, le=100.0)
    min_ci_lower: float = Field(1.0, ge=0.5, le=100.0)
    max_regression: float = Field(0.02, ge=0.0, le=0.5)
    first_champion_min_speedup_vs_reference: float = Field(1.0, ge=0.0, le=1000.0)
    require_up_to_date: bool = True
    merge_method: Literal["squash", "merge", "rebase"] = "squash"
    close_losers: bool = True

    @classmethod
    def from_yaml(cls, text: str, where: str = PROMOTION_PATH) -> "PromotionPolicy":
        return _parse(cls, text, where)


def load_promotion_policy(forge: Forge) -> PromotionPolicy:
    raw = forge.read_file(PROMOTION_PATH, ref=forge.default_branch())
    if raw is None:
        return PromotionPolicy()
    try:
        return PromotionPolicy.from_yaml(raw.decode() if isinstance(raw, bytes) else raw)
    except UnicodeDecodeError:
        raise PolicyError(f"{PROMOTION_PATH}: not UTF-8") from None


# ----------------------------------------------------------------------------------------- evidence


@dataclass(frozen=True)
class WorkloadEvidence:
    uuid: str
    status: str
    failed_trials: int
    ratio: tuple[float, float, float] | None  # paired champion/candidate: median, ci low, ci high
    vs_reference: float | None


@dataclass(frozen=True)
class Evidence:
    definition: str
    solution: str
    solution_hash: str
    baseline_hash: str | None
    head_sha: str | None
    findings: int
    workloads: tuple[WorkloadEvidence, ...]

    @classmethod
    def from_report(cls, report: Report, head_sha: str | None) -> "Evidence":
        ws = []
        for w in report.workloads:
            r = w.speedup_vs_baseline
            ws.append(WorkloadEvidence(
                w.uuid, w.status.value, w.correctness.failed_trials if w.correctness else 0,
                (r.median, r.ci95[0], r.ci95[1]) if r else None, w.speedup_vs_reference))
        return cls(report.definition, report.solution, report.solution_hash, report.baseline_hash, head_sha,
                   len(report.findings) + sum(len(w.findings) for w in report.workloads), tuple(ws))

    @classmethod
    def from_block(cls, data: Mapping[str, Any]) -> "Evidence":
        """From ``bot.review.evidence`` data; raises ValueError on anything malformed."""
        try:
            ws = []
            for uuid, status, failed, ratio, vs_ref in data["w"]:
                rt = None
                if ratio is not None:
                    m, lo, hi = (float(x) for x in ratio)
                    rt = (m, lo, hi)
                ws.append(WorkloadEvidence(str(uuid), str(status), int(failed), rt,
                                           float(vs_ref) if vs_ref is not None else None))
            return cls(str(data["definition"]), str(data["solution"]), str(data["solution_hash"]),
                       data.get("baseline_hash"), data.get("head_sha"), int(data["findings"]), tuple(ws))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"malformed evidence block: {e}") from None


# ----------------------------------------------------------------------------------------- decision


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

    @property
    def headline(self) -> str:
        bad = [r for r in self.reasons if not r.ok]
        if self.action == "promote":
            if self.first_champion:
                return "first champion of this definition"
            return f"{self.geomean:.3f}x over the champion, 95% CI [{self.ci95[0]:.3f}, {self.ci95[1]:.3f}]"
        return "; ".join(r.detail for r in bad[:3])

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "geomean": self.geomean, "ci95": self.ci95,
                "first_champion": self.first_champion,
                "reasons": [{"rule": r.rule, "ok": r.ok, "detail": r.detail} for r in self.reasons]}


def geomean_ci(ratios: list[tuple[float, float, float]]) -> tuple[float, tuple[float, float]]:
    """Geometric mean of paired medians with a 95% interval.

    Per workload, the log-ratio's standard error is read off its 95% interval (width / 2z); workloads
    are independent measurements, so the mean log-ratio has se = sqrt(sum se_i^2) / k.
    """
    k = len(ratios)
    logs = [math.log(m) for m, _, _ in ratios]
    ses = [(math.log(hi) - math.log(lo)) / (2 * Z95) for _, lo, hi in ratios]
    mean = sum(logs) / k
    se = math.sqrt(sum(s * s for s in ses)) / k
    return math.exp(mean), (math.exp(mean - Z95 * se), math.exp(mean + Z95 * se))


def _valid_ratio(r: tuple[float, float, float] | None) -> bool:
    return r is not None and all(math.isfinite(x) and x > 0 for x in r) and r[1] <= r[0] <= r[2]


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

    def finish(geo=None, ci=None, first=False) -> Decision:
        failed = [r for r in reasons if not r.ok]
        if any(r.verdict == "reject" for r in failed):
            action = "reject"
        elif failed:
            action = "rebenchmark"
        else:
            action = "promote"
        return Decision(action, tuple(reasons), geo, ci, first)

    if any(not r.ok for r in reasons):
        # Either already rejected, or stale: speed numbers would not describe the merge; stop here.
        return finish()

    # 4. speed.
    if champion_hash is None:
        refs = [w.vs_reference for w in ev.workloads]
        if any(r is None or not math.isfinite(r) or r <= 0 for r in refs):
            rule("speedup vs reference", False, "no speedup vs the reference for every workload")
            return finish(first=True)
        g = math.exp(sum(math.log(r) for r in refs) / len(refs))  # type: ignore[arg-type]
        rule("speedup vs reference", g >= policy.first_champion_min_speedup_vs_reference,
             f"first champion: geomean {g:.3f}x vs the reference (needs ≥ {policy.first_champion_min_speedup_vs_reference:g})")
        return finish(g, None, True)

    missing = [w for w in ev.workloads if not _valid_ratio(w.ratio)]
    if missing:
        rule("paired measurement", False, f"{len(missing)} workload(s) have no valid paired ratio vs the champion",
             "rebenchmark")
        return finish()
    ratios = [w.ratio for w in ev.workloads]  # type: ignore[misc]
    g, (lo, hi) = geomean_ci(ratios)  # type: ignore[arg-type]
    rule("speedup", g >= policy.min_speedup, f"geomean {g:.3f}x vs champion (needs ≥ {policy.min_speedup:g})")
    rule("confidence", lo > policy.min_ci_lower,
         f"95% CI lower bound {lo:.3f} (needs > {policy.min_ci_lower:g})")
    floor = 1.0 - policy.max_regression
    slow = [w for w in ev.workloads if w.ratio[0] < floor]  # type: ignore[index]
    rule("no regression", not slow,
         f"no workload slower than {floor:.3f}x" if not slow
         else f"{len(slow)} workload(s) slower than the champion beyond {policy.max_regression:.0%} "
              f"(worst {min(w.ratio[0] for w in slow):.3f}x)")  # type: ignore[index]
    return finish(g, (lo, hi))


# ---------------------------------------------------------------------------------------- execution


def champion_path(definition: str) -> str:
    return f"kernels/{definition}/champion.json"


def leaderboard_path(definition: str) -> str:
    return f"kernels/{definition}/LEADERBOARD.md"


def read_champion(forge: Forge, definition: str, ref: str | None = None) -> dict[str, Any] | None:
    raw = forge.read_file(champion_path(definition), ref=ref or forge.default_branch())
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def is_up_to_date(forge: Forge, pr: PullRequest) -> bool:
    """True when the PR head contains every commit of the default branch."""
    try:
        return not forge.branch_commits(forge.default_branch(), base=pr.head_branch)
    except ForgeError:
        return False


@dataclass
class PromotionOutcome:
    decision: Decision
    merged_sha: str | None = None
    pointer_sha: str | None = None
    closed: list[int] = field(default_factory=list)
    note: str = ""


def execute(forge: Forge, pr: PullRequest, ev: Evidence, decision: Decision, policy: PromotionPolicy,
            *, summary: Mapping[str, Any] | None = None, losers: list[tuple[PullRequest, str]] = (),
            solution_path: str | None = None) -> PromotionOutcome:
    """Carry out a promote decision. ``losers``: (PR, one-line result) to close with a summary;
    ``solution_path``: the solution JSON in the repository (the next bench uses it as the baseline)."""
    out = PromotionOutcome(decision)
    if decision.action != "promote":
        return out
    assert ev.head_sha, "a promote decision always has a measured head sha"
    title = f"kbot: promote {ev.solution} for {ev.definition} (#{pr.number})"
    try:
        merged = forge.merge(pr.number, ev.head_sha, method=policy.merge_method, title=title,
                             message=f"{decision.headline}\n\nPromoted by kbot from #{pr.number} at {ev.head_sha}.")
    except HeadMovedError:
        out.decision = Decision("rebenchmark", decision.reasons + (
            Reason("merge", False, "the PR head moved during the merge", "rebenchmark"),), decision.geomean, decision.ci95)
        out.note = "head moved during the merge; re-benchmark"
        return out
    out.merged_sha = merged.sha
    out.pointer_sha, out.note = write_pointer(forge, pr, ev, decision, merged.sha, summary=summary,
                                              solution_path=solution_path)
    if out.pointer_sha:
        # Losers are closed only once the new champion is on record: after an interrupted pointer
        # commit they stay open (resume_pointer finishes the promotion, then closes them).
        out.closed = close_losers(forge, pr, ev, losers, policy)
    return out


def write_pointer(forge: Forge, pr: PullRequest, ev: Evidence, decision: Decision, merge_sha: str | None, *,
                  summary: Mapping[str, Any] | None = None, solution_path: str | None = None) -> tuple[str | None, str]:
    """ONE commit on the default branch with ``champion.json`` + ``LEADERBOARD.md`` for a merged
    promotion; (commit sha, "") or (None, why it failed). Retries while the branch moves."""
    from bot.leaderboard import render_leaderboard, updated_champion

    entry = {
        "solution": ev.solution,
        "solution_hash": ev.solution_hash,
        "solution_path": solution_path,
        "pr": pr.number,
        "sha": ev.head_sha,
        "merge_sha": merge_sha,
        "promoted_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "summary": {
            "speedup_vs_previous": decision.geomean if not decision.first_champion else None,
            "ci95_vs_previous": list(decision.ci95) if decision.ci95 else None,
            "workloads": len(ev.workloads),
            **({k: v for k, v in summary.items() if k in ("mean_speedup_vs_reference", "geomean_speedup_vs_reference")} if summary else {}),
        },
    }
    branch = forge.default_branch()
    try:
        for attempt in range(5):
            base = forge.branch_head(branch)
            old = read_champion(forge, ev.definition, ref=base)
            doc = updated_champion(old, ev.definition, entry)
            files = {
                champion_path(ev.definition): json.dumps(doc, indent=2, sort_keys=True) + "\n",
                leaderboard_path(ev.definition): render_leaderboard(doc),
            }
            try:
                return forge.commit_files(branch, base, files,
                                          f"kbot: {ev.definition} champion is {ev.solution} (#{pr.number})"), ""
            except BranchMovedError:
                time.sleep(0.2 * (attempt + 1))
    except ForgeError as e:
        return None, f"could not update the champion pointer ({type(e).__name__}); `/promote` resumes it"
    return None, "could not update the champion pointer: the default branch kept moving; `/promote` resumes it"


def close_losers(forge: Forge, pr: PullRequest, ev: Evidence, losers: list[tuple[PullRequest, str]] | tuple = (),
                 policy: PromotionPolicy | None = None) -> list[int]:
    from bot.review import escape_inline

    closed: list[int] = []
    if policy is not None and not policy.close_losers:
        return closed
    # Names come from the report (an artifact of a job that ran candidate code): escaped, so they
    # cannot mention people, link, or inject markup into the comment.
    for loser, line in losers:
        if loser.number == pr.number or not loser.is_open:
            continue
        forge.close_pr(loser.number, comment=(
            f"Closed by kbot: #{pr.number} ({escape_inline(ev.solution, 128)}) was promoted as the champion of "
            f"{escape_inline(ev.definition, 128)}.\n\n"
            f"This candidate: {escape_inline(line, 300)}\n\nIt stays in the search tree; `/optimize` on it still works."))
        closed.append(loser.number)
    return closed


def champion_mentions(champ: Mapping[str, Any] | None, pr_number: int) -> bool:
    """Whether the pointer document records ``pr_number`` as the champion or in its lineage."""
    if not champ:
        return False
    entries = [champ] + [h for h in champ.get("history") or [] if isinstance(h, Mapping)]
    return any(e.get("pr") == pr_number for e in entries)


def resume_pointer(forge: Forge, pr: PullRequest, *, policy: PromotionPolicy | None = None) -> PromotionOutcome | None:
    """Finish a promotion that was interrupted after its merge (the pointer commit failed).

    For a merged PR whose ``champion.json`` does not mention it: the evaluation is read back from our
    review and the rules are judged again against today's champion (the one the merge should have
    replaced) with the candidate gate; only a ``promote`` writes the pointer (then the losers are
    closed). None when there is nothing to resume (not merged, already recorded, no evaluation).
    """
    from bot.candidate_gate import solution_folder
    from bot.meta_key import read_meta
    from bot.review import find_evidence

    if not pr.merged:
        return None
    data = find_evidence(forge, pr.number)
    if data is None:
        return None
    try:
        ev = Evidence.from_block(data)
    except ValueError:
        return None
    champ = read_champion(forge, ev.definition)
    if champion_mentions(champ, pr.number):
        return None
    policy = policy or load_promotion_policy(forge)
    champion_hash = champ.get("solution_hash") if champ else None
    # Merged: "up to date" is moot (the merge already happened); the measured head must be the PR's.
    decision = decide(ev, policy, champion_hash=champion_hash if isinstance(champion_hash, str) else None,
                      pr_head_sha=pr.head_sha, up_to_date=True)
    if decision.action == "promote":
        decision = gate_candidate(forge, pr, ev, decision)
    out = PromotionOutcome(decision, merged_sha=pr.merge_commit_sha)
    if decision.action != "promote":
        out.note = "merged, but the rules no longer hold against the current champion: pointer not written"
        return out
    meta = read_meta(pr, forge.info.bot_login)
    path = meta.get("solution_path") if solution_folder(meta) else None
    out.pointer_sha, out.note = write_pointer(forge, pr, ev, decision, pr.merge_commit_sha, solution_path=path)
    if out.pointer_sha:
        losers = find_losers(forge, pr.number, ev.definition) if policy.close_losers else []
        out.closed = close_losers(forge, pr, ev, losers, policy)
    return out


def _loser_line(ev: Evidence) -> str:
    ratios = [w.ratio for w in ev.workloads if _valid_ratio(w.ratio)]
    passed = sum(1 for w in ev.workloads if w.status == Status.PASSED.value and w.failed_trials == 0)
    text = f"{passed}/{len(ev.workloads)} workloads passed"
    if ratios and len(ratios) == len(ev.workloads):
        g, (lo, hi) = geomean_ci(ratios)  # type: ignore[arg-type]
        text += f", {g:.3f}x vs the previous champion [{lo:.3f}, {hi:.3f}]"
    return text


def current_decision(forge: Forge, pr: PullRequest, ev: Evidence,
                     policy: PromotionPolicy | None = None) -> tuple[PullRequest, Decision, PromotionPolicy]:
    """The decision for ``ev`` with today's facts: champion on the default branch, PR head, base."""
    policy = policy or load_promotion_policy(forge)
    champ = read_champion(forge, ev.definition)
    champion_hash = champ.get("solution_hash") if champ else None
    if not isinstance(champion_hash, str):
        champion_hash = None
    current = forge.get_pr(pr.number)
    if not current.is_open:
        return current, Decision("reject", (Reason("open", False, "the PR is not open"),)), policy
    decision = decide(ev, policy, champion_hash=champion_hash, pr_head_sha=current.head_sha,
                      up_to_date=is_up_to_date(forge, current))
    if decision.action == "promote":
        decision = gate_candidate(forge, current, ev, decision)
    return current, decision, policy


def gate_candidate(forge: Forge, pr: PullRequest, ev: Evidence, decision: Decision) -> Decision:
    """A promote decision turned into a reject when the PR is not a bot-made candidate for exactly the
    evaluated solution (``bot.candidate_gate``): only the bot's own, unmodified branches are merged."""
    from bot.candidate_gate import candidate_problems

    problems = candidate_problems(forge, pr, definition=ev.definition, solution_hash=ev.solution_hash)
    if not problems:
        return decision
    extra = tuple(Reason("bot-made candidate", False, f"not promoted: {p}") for p in problems)
    return Decision("reject", decision.reasons + extra, decision.geomean, decision.ci95, decision.first_champion)


def find_losers(forge: Forge, winner: int, definition: str) -> list[tuple[PullRequest, str]]:
    """Other open, already evaluated candidate PRs of ``definition`` with a one-line result each."""
    from bot.review import find_evidence

    losers: list[tuple[PullRequest, str]] = []
    for other in forge.list_prs(state="open", head_prefix=f"kbot/{definition}/"):
        if other.number == winner or other.from_fork or other.author.lower() != forge.info.bot_login.lower():
            continue  # only the bot's own candidates are closed on its behalf
        data = find_evidence(forge, other.number)
        if data is None:
            continue  # not evaluated yet: it will be measured against the new champion
        try:
            losers.append((other, _loser_line(Evidence.from_block(data))))
        except ValueError:
            continue
    return losers


def run_promotion(forge: Forge, pr: PullRequest, ev: Evidence, *, summary: Mapping[str, Any] | None = None,
                  policy: PromotionPolicy | None = None) -> PromotionOutcome:
    """Decide with today's repository facts and, on promote, execute. Used by the report pipeline and /promote."""
    current, decision, policy = current_decision(forge, pr, ev, policy)
    losers = find_losers(forge, pr.number, ev.definition) if decision.action == "promote" and policy.close_losers else []
    return execute(forge, current, ev, decision, policy, summary=summary, losers=losers)
