"""Carrying a promote decision out through the forge, with today's facts.

``current_decision`` judges evidence against the repository as it is now (champion on the default
branch, PR head, base) and the candidate gate; ``execute`` then does a sha-guarded squash merge of
exactly the measured head, ONE commit on the default branch with the champion pointer
(``kernels/<definition>/champion.json``) and the generated ``LEADERBOARD.md``, and closes the losing
evaluated PRs of the definition with a summary. ``resume_pointer`` finishes a promotion that was
interrupted between its merge and its pointer commit.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping

from bot.campaign.submission import trusted_meta
from bot.forge.base import BranchMovedError, Forge, ForgeError, HeadMovedError, NotMergeableError, PullRequest, UnsupportedError
from bot.names import STATUS_CONTEXT, definition_branch_prefix
from bot.policy_file import PolicyError
from bot.promotion.candidate_gate import candidate_problems, solution_folder
from bot.promotion.champion import champion_mentions, champion_path, leaderboard_path, read_champion, render_leaderboard, updated_champion
from bot.promotion.decision import PROMOTION_PATH, Decision, PromotionPolicy, Reason, decide, valid_ratio
from bot.review.evidence import Evidence, find_evidence
from bot.review.markdown import commit_text, escape_inline
from harness.geomean import geomean_ci
from harness.schema import Status

# What a champion entry keeps of its report's summary (the leaderboard renders these), and ``measured_on``:
# the card of the paired evaluation (a lineage can span cards; each ratio holds on its own one).
SUMMARY_KEYS = ("mean_speedup_vs_reference", "geomean_speedup_vs_reference", "geomean_speedup_vs_best_baseline",
                "best_baselines", "baselines_could_not_run", "measured_on")


def champion_summary(report: Any) -> dict[str, Any]:
    """The report's summary plus the device it was measured on, as a champion entry records them."""
    return {**report.summary(), "measured_on": report.device.name}


def load_promotion_policy(forge: Forge) -> PromotionPolicy:
    """The promotion policy on the default branch now (defaults when the file is absent; PolicyError if invalid)."""
    raw = forge.read_file(PROMOTION_PATH, ref=forge.default_branch())
    if raw is None:
        return PromotionPolicy()
    try:
        return PromotionPolicy.from_yaml(raw.decode() if isinstance(raw, bytes) else raw)
    except UnicodeDecodeError:
        raise PolicyError(f"{PROMOTION_PATH}: not UTF-8") from None


def is_up_to_date(forge: Forge, pr: PullRequest) -> bool:
    """True when the PR head contains every commit of the default branch."""
    try:
        # By sha: a fork PR's head branch is not a branch of this repository.
        return not forge.branch_commits(forge.default_branch(), base=pr.head_sha)
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
    # Names come from the report: one defused line each, so nothing in them acts as a git trailer.
    title = f"kbot: promote {commit_text(ev.solution, 128)} for {commit_text(ev.definition, 128)} (#{pr.number})"
    try:
        merged = forge.merge(pr.number, ev.head_sha, method=policy.merge_method, title=title,
                             message=f"{commit_text(decision.headline, 600)}\n\nPromoted by kbot from #{pr.number} at {ev.head_sha}.")
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
            **({"mean_latency_vs_previous": decision.mean_ratio} if decision.mean_ratio is not None and not decision.first_champion else {}),
            "workloads": len(ev.workloads),
            **({k: v for k, v in summary.items() if k in SUMMARY_KEYS} if summary else {}),
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
                                          f"kbot: {commit_text(ev.definition, 128)} champion is {commit_text(ev.solution, 128)} (#{pr.number})"), ""
            except BranchMovedError:
                time.sleep(0.2 * (attempt + 1))
    except ForgeError as e:
        return None, f"could not update the champion pointer ({type(e).__name__}); `/promote` resumes it"
    return None, "could not update the champion pointer: the default branch kept moving; `/promote` resumes it"


def close_losers(forge: Forge, pr: PullRequest, ev: Evidence, losers: list[tuple[PullRequest, str]] | tuple = (),
                 policy: PromotionPolicy | None = None) -> list[int]:
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



def resume_pointer(forge: Forge, pr: PullRequest, *, policy: PromotionPolicy | None = None) -> PromotionOutcome | None:
    """Finish a promotion that was interrupted after its merge (the pointer commit failed).

    For a merged PR whose ``champion.json`` does not mention it: the evaluation is read back from our
    review and the rules are judged again against today's champion (the one the merge should have
    replaced) with the candidate gate; only a ``promote`` writes the pointer (then the losers are
    closed). None when there is nothing to resume (not merged, already recorded, no evaluation).
    """
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
        decision = gate_candidate(forge, pr, ev, decision, policy)
    out = PromotionOutcome(decision, merged_sha=pr.merge_commit_sha)
    if decision.action != "promote":
        out.note = "merged, but the rules no longer hold against the current champion: pointer not written"
        return out
    meta = trusted_meta(forge, pr)
    path = meta.get("solution_path") if solution_folder(meta) else None
    out.pointer_sha, out.note = write_pointer(forge, pr, ev, decision, pr.merge_commit_sha, solution_path=path)
    if out.pointer_sha:
        losers = find_losers(forge, pr.number, ev.definition) if policy.close_losers else []
        out.closed = close_losers(forge, pr, ev, losers, policy)
    return out


def _loser_line(ev: Evidence) -> str:
    ratios = [w.ratio for w in ev.workloads if valid_ratio(w.ratio)]
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
        decision = gate_candidate(forge, current, ev, decision, policy)
    return current, decision, policy


def gate_candidate(forge: Forge, pr: PullRequest, ev: Evidence, decision: Decision, policy: PromotionPolicy | None = None) -> Decision:
    """A promote decision turned into a reject when the PR is not a bot-made candidate for exactly the
    evaluated solution, or a person's submission without its record and approval
    (``bot.promotion.candidate_gate``): only the bot's own, unmodified branches, and people's approved
    submissions, are merged."""
    policy = policy or PromotionPolicy()
    problems = candidate_problems(forge, pr, definition=ev.definition, solution_hash=ev.solution_hash,
                                  head_sha=ev.head_sha, people_approval=policy.people_approval)
    if not problems:
        return decision
    rule = "bot-made candidate" if pr.author.lower() == forge.info.bot_login.lower() else "person's submission"
    extra = tuple(Reason(rule, False, f"not promoted: {p}") for p in problems)
    return Decision("reject", decision.reasons + extra, decision.geomean, decision.ci95, decision.first_champion)


def find_losers(forge: Forge, winner: int, definition: str) -> list[tuple[PullRequest, str]]:
    """Other open, already evaluated candidate PRs of ``definition`` with a one-line result each."""
    losers: list[tuple[PullRequest, str]] = []
    for other in forge.list_prs(state="open", head_prefix=definition_branch_prefix(definition)):
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


# The rules whose failure means "measured before the default branch moved": cured by bringing the PR
# up to date and measuring it again (bot.promotion.decision's freshness rules).
STALE_RULES = ("up to date with the default branch", "measured against the current champion")


@dataclass
class Refresh:
    head: str | None = None  # the new head to be measured; None when nothing was updated
    note: str = ""           # one sentence for the review / the reply ("" when there is nothing to say)


def bring_up_to_date(forge: Forge, pr: PullRequest, decision: Decision) -> Refresh:
    """A candidate judged ``rebenchmark`` because it fell behind the default branch (or was paired with
    an older champion) is brought up to date by the bot (``bot.campaign.attempts.update_attempt``:
    GitHub's "Update branch" with the expected head, the merge checked by content and recorded in the
    signed block) and its new head marked pending: the bench runs on the new head (its ``synchronize``
    event) and the report step judges that measurement, never the old one. Nothing happens for a head
    the bot did not record (a person's push: the gate refuses it), a person's PR, or a forge that
    cannot merge into a PR head."""
    from bot.campaign.attempts import UpdateRefused, update_attempt

    stale = [r for r in decision.reasons if not r.ok and r.rule in STALE_RULES]
    if decision.action != "rebenchmark" or not stale or not pr.is_open:
        return Refresh()
    if pr.author.lower() != forge.info.bot_login.lower():
        return Refresh()  # a person's PR: they update it, a maintainer's /evaluate measures it again
    try:
        head = update_attempt(forge, pr.number)
    except UnsupportedError:
        return Refresh()
    except NotMergeableError:
        return Refresh(None, "It conflicts with the default branch, so it was not brought up to date; it will not be promoted.")
    except (UpdateRefused, BranchMovedError) as e:
        return Refresh(None, f"It was not brought up to date: {e}")
    except ForgeError as e:
        return Refresh(None, f"Bringing it up to date failed ({type(e).__name__}); `/evaluate` tries again.")
    if head == pr.head_sha:
        return Refresh()
    forge.set_status(head, "pending", context=STATUS_CONTEXT,
                     description="brought up to date with the default branch; measuring the new head")
    return Refresh(head, f"Brought up to date with the default branch as `{head[:12]}` (a merge commit checked by "
                         "the bot); the bench measures the new head and the decision is taken on that measurement.")


def run_promotion(forge: Forge, pr: PullRequest, ev: Evidence, *, summary: Mapping[str, Any] | None = None,
                  policy: PromotionPolicy | None = None) -> PromotionOutcome:
    """Decide with today's repository facts and, on promote, execute. Used by the report pipeline and /promote."""
    current, decision, policy = current_decision(forge, pr, ev, policy)
    losers = find_losers(forge, pr.number, ev.definition) if decision.action == "promote" and policy.close_losers else []
    # The pointer records the solution's file as the bot's own record names it (meta block or
    # submission record), so the next bench finds the champion's kernel.
    meta = trusted_meta(forge, current) if decision.action == "promote" else None
    path = meta.get("solution_path") if solution_folder(meta) else None
    return execute(forge, current, ev, decision, policy, summary=summary, losers=losers, solution_path=path)
