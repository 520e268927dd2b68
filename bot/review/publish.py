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
from bot.names import STATUS_CONTEXT, is_candidate_pr
from bot.promotion.candidate_gate import solution_folder
from bot.promotion.execute import current_decision, execute, find_losers, resume_pointer
from bot.review.evidence import Evidence, find_bot_review, read_evidence
from bot.review.markdown import escape_inline
from bot.review.results import ResultsError, load_results, pick_reports
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


def publish_results(forge: Any, pr_number: int, head_sha: str, *, reports: list[Report] | None = None,
                    results_dir: str | Path | None = None, run_url: str | None = None,
                    promote: bool = True) -> Published:
    """Sticky review + ``kbot/harness`` status (+ check run as an App) + promotion for one bench run.

    ``head_sha`` is the sha GitHub says was benchmarked (the workflow_run's head_sha), never a value
    read from the artifact. Promotion happens only when the kill switch is off and the PR passes
    ``bot.promotion.candidate_gate`` (checked in ``current_decision``).
    """
    problems: list[str] = []
    if reports is None:
        if results_dir is None:
            raise ValueError("give reports or results_dir")
        reports, problems = load_results(results_dir)
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
    meta = trusted_meta(forge, pr)
    report, champion = pick_reports(reports, meta)
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
    current, decision, policy = current_decision(forge, pr, ev)
    paused = bot_paused(forge, current.labels) if promote and decision.action == "promote" else None
    body = render_review(report, champion, decision, head_sha=head_sha, run_url=run_url)
    if paused:
        body = with_note(body, f"**Promotion paused:** {escape_inline(paused, 300)}. Nothing was merged; "
                                "run `/promote` once the bot is resumed.")
    review = forge.upsert_review(pr_number, REVIEW_MARKER, body, commit_sha=head_sha)
    state, desc = status_line(report, decision)
    if paused:
        desc = (desc + " (promotion paused)")[:140]
    forge.set_status(head_sha, state, context=STATUS_CONTEXT, description=desc, target_url=run_url)
    if getattr(forge.info, "supports_check_runs", False):
        try:
            forge.create_check_run(head_sha, STATUS_CONTEXT, status="completed",
                                   conclusion="success" if state == "success" else "failure",
                                   title=desc, summary=body[:60000])
        except UnsupportedError:
            pass
    out = Published(pr_number, state, decision, review.id, problems=problems)
    if promote and decision.action == "promote" and not paused:
        losers = find_losers(forge, pr_number, ev.definition) if policy.close_losers else []
        # The bot-written meta block names the solution's file (validated by the candidate gate);
        # never a path from the artifact, which a job running candidate code wrote.
        path = meta.get("solution_path") if solution_folder(meta) else None
        result = execute(forge, current, ev, decision, policy, summary=report.summary(), losers=losers,
                         solution_path=path)
        out.merged_sha, out.closed = result.merged_sha, result.closed
        if result.decision is not decision:  # e.g. the head moved during the merge
            out.decision = result.decision
            forge.upsert_review(pr_number, REVIEW_MARKER,
                                render_review(report, champion, result.decision, head_sha=head_sha, run_url=run_url),
                                commit_sha=head_sha)
    return out
