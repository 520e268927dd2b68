"""One bench run published: the sticky review, the ``kbot/harness`` status (and a check run as an App),
then promotion when the rules say so. Used by the report workflow, ``kbot serve`` and the local loop."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.campaign.submission import is_person_pr, read_record, trusted_meta
from bot.commands.bot_policy import paused as bot_paused
from bot.forge.base import UnsupportedError
from bot.forge.markers import REVIEW_MARKER, sticky_marker
from bot.forge.trusted_meta import META_KEY_ENV, read_meta, record_fields
from bot.names import STATUS_CONTEXT, is_candidate_pr
from bot.promotion.candidate_gate import NO_KEY, solution_folder
from bot.promotion.champion import read_champion
from bot.promotion.execute import Refresh, bring_up_to_date, champion_summary, current_decision, execute, find_losers, resume_pointer
from bot.review.evidence import Evidence, find_bot_review, read_evidence
from bot.review.markdown import escape_inline
from bot.review.results import ResultsError, read_bench_results
from bot.review.sticky_review import render_review, status_line, with_note
from harness.report import Report


@dataclass
class Published:
    pr: int
    state: str
    decision: Any = None
    review_id: int | None = None
    merged_sha: str | None = None
    closed: list[int] | None = None
    problems: list[str] | None = None
    updated_head: str | None = None  # a stale candidate brought up to date: the head the bench measures next


def find_run_pr(forge: Any, head_branch: str, head_sha: str) -> Any | None:
    """The PR a bench run of ``head_branch`` at ``head_sha`` belongs to: the open PR of the branch, else
    the merged one whose head was that sha (a re-run of the report for a merged PR finishes a promotion
    whose champion-pointer commit failed: ``publish_results`` resumes it)."""
    pr = forge.find_open_pr(head_branch)
    if pr is not None:
        return pr
    merged = [p for p in forge.list_prs(state="all", head_prefix=head_branch)
              if p.head_branch == head_branch and p.merged and p.head_sha == head_sha and not p.from_fork]
    return max(merged, key=lambda p: p.number) if merged else None


MAX_OUTCOME_ERROR = 500


def outcome_of(report: Report) -> dict[str, Any]:
    """What the search memory keeps of one evaluation: its status and first error (the message a
    later prompt and ``bot.controller.memory.facts_from_error`` read), bounded."""
    from bot.controller.summary import summarize

    s = summarize(report)
    err = s.get("error") or {}
    return {"status": s["status"], "error": str(err.get("message") or "")[:MAX_OUTCOME_ERROR] or None}


def remember_outcome(forge: Any, pr: Any, report: Report) -> None:
    """The evaluation's outcome in the bot PR's signed meta block (``outcome``), so that the search
    memory rebuilt from GitHub alone (``bot.campaign.github_campaign.read_snapshot``) has the error
    text, the facts it states and the fixes it leads to. A person's PR keeps no meta block: skipped."""
    meta = read_meta(pr, forge)
    if meta is None or meta.get("solution_hash") != report.solution_hash:
        return
    record_fields(forge, pr.number, meta, {"outcome": outcome_of(report)})


def publish_results(forge: Any, pr_number: int, head_sha: str, *, results_dir: str | Path | None = None,
                    report: Report | None = None, champion: Report | None = None, run_url: str | None = None,
                    promote: bool = True) -> Published:
    """Sticky review + ``kbot/harness`` status (+ check run as an App) + promotion for one bench run.

    ``results_dir``: a bench results folder (an artifact: hostile), from which exactly one report is
    read, at the place the PR's trusted meta block names, and checked (``bot.review.results``).
    ``report`` (and ``champion``, shown beside it): a report this process measured itself (the local
    loop, tests). ``head_sha`` is the sha GitHub says was benchmarked (the workflow_run's head_sha),
    never a value read from the artifact. Promotion happens only when the kill switch is off and the
    PR passes ``bot.promotion.candidate_gate`` (checked in ``current_decision``).
    """
    if (results_dir is None) == (report is None):
        raise ValueError("give exactly one of results_dir and report")
    problems: list[str] = []
    pr = forge.get_pr(pr_number)
    # A kbot branch (whoever opened it: the candidate gate judges a person's), or a person's PR that a
    # maintainer's /evaluate recorded (bot.campaign.submission).
    if not is_candidate_pr(pr) and not (is_person_pr(forge, pr) and read_record(forge, pr) is not None):
        raise ResultsError(f"PR #{pr_number} is neither a kbot candidate branch of this repository nor a person's PR "
                           "with a submission record (a maintainer's /evaluate writes it)")
    if not pr.is_open:
        # A late or re-run bench of a PR that was merged or closed: its review stays as it was. A merged
        # PR whose champion pointer was never written (interrupted promotion) gets it now.
        if pr.merged and promote and not bot_paused(forge, pr.labels):
            resumed = resume_pointer(forge, pr)
            if resumed is not None and resumed.pointer_sha:
                return Published(pr_number, "resumed", resumed.decision, merged_sha=resumed.merged_sha,
                                 closed=resumed.closed, problems=problems)
        return Published(pr_number, "skipped", problems=problems)
    meta = trusted_meta(forge, pr)  # a bot PR's signed block, or a person's submission record
    if results_dir is not None:
        read = read_bench_results(results_dir, meta)
        report, problems = read.report, read.problems
    if report is None:
        desc = "no usable report in the results" + (f" ({len(problems)} problem(s))" if problems else "")
        forge.set_status(head_sha, "error", context=STATUS_CONTEXT, description=desc[:140], target_url=run_url)
        text = "The bench run produced no usable report.\n\n" + "\n".join(
            f"- {escape_inline(p, 300)}" for p in problems[:20])
        if read_evidence(getattr(find_bot_review(forge, pr_number), "body", None)) is not None:
            # Keep the last real evaluation (``/promote``, ``/status`` and the campaign read it back);
            # say what happened in a note of its own instead.
            note = sticky_marker("bench-error")
            forge.upsert_comment(pr_number, note, f"{note}\n## kbot: bench run without results\n\n"
                                           f"For `{head_sha[:12]}`. {text}\n\nThe review above still shows the last evaluation.")
            return Published(pr_number, "error", None, None, problems=problems)
        body = f"{REVIEW_MARKER}\n## kbot evaluation\n\n{text}"
        review = forge.upsert_review(pr_number, REVIEW_MARKER, body, commit_sha=head_sha)
        return Published(pr_number, "error", None, review.id, problems=problems)

    ev = Evidence.from_report(report, head_sha)
    remember_outcome(forge, pr, report)
    current, decision, policy = current_decision(forge, pr, ev)
    paused = bot_paused(forge, current.labels) if promote and decision.action in ("promote", "rebenchmark") else None
    sol_path = (meta or {}).get("solution_path")
    sol_path = sol_path if isinstance(sol_path, str) else None
    champ_doc = read_champion(forge, report.definition) or {}
    # the champion's file for the reproduction command, when it is the champion this run was paired with
    champ_path = champ_doc.get("solution_path") if champ_doc.get("solution_hash") == report.baseline_hash else None
    champ_path = champ_path if isinstance(champ_path, str) else None
    body = render_review(report, champion, decision, head_sha=head_sha, run_url=run_url, policy=policy, solution_path=sol_path,
                         champion_path=champ_path)
    refresh = Refresh()
    if paused:
        body = with_note(body, f"**Promotion paused:** {escape_inline(paused, 300)}. Nothing was merged; "
                                "run `/promote` once the bot is resumed.")
    elif promote and decision.action == "rebenchmark":
        # Stale: brought up to date and measured again before any decision (never merged as it is).
        refresh = bring_up_to_date(forge, current, decision)
        if refresh.note:
            body = with_note(body, f"**Up to date before judged:** {escape_inline(refresh.note, 600)}")
    review = forge.upsert_review(pr_number, REVIEW_MARKER, body, commit_sha=head_sha)
    state, desc = status_line(report, decision)
    if paused:
        desc = (desc + " (promotion paused)")[:140]
    elif any(not r.ok and NO_KEY in r.detail for r in decision.reasons):
        desc = (desc + f"; not merged: {META_KEY_ENV} is not configured")[:140]
    forge.set_status(head_sha, state, context=STATUS_CONTEXT, description=desc, target_url=run_url)
    if getattr(forge.info, "supports_check_runs", False):
        try:
            forge.create_check_run(head_sha, STATUS_CONTEXT, status="completed",
                                   conclusion={"success": "success", "pending": "neutral"}.get(state, "failure"),
                                   title=desc, summary=body[:60000])
        except UnsupportedError:
            pass
    out = Published(pr_number, state, decision, review.id, problems=problems, updated_head=refresh.head)
    if promote and decision.action == "promote" and not paused:
        losers = find_losers(forge, pr_number, ev.definition) if policy.close_losers else []
        # The bot-written meta block names the solution's file (validated by the candidate gate);
        # never a path from the artifact, which a job running candidate code wrote.
        path = meta.get("solution_path") if solution_folder(meta) else None
        result = execute(forge, current, ev, decision, policy, summary=champion_summary(report), losers=losers,
                         solution_path=path)
        out.merged_sha, out.closed = result.merged_sha, result.closed
        if result.decision is not decision:  # e.g. the head moved during the merge
            out.decision = result.decision
            forge.upsert_review(pr_number, REVIEW_MARKER,
                                render_review(report, champion, result.decision, head_sha=head_sha, run_url=run_url,
                                              policy=policy, solution_path=sol_path, champion_path=champ_path),
                                commit_sha=head_sha)
    return out
