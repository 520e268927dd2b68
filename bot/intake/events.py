"""Webhook event → handler. Shared by the App (``kbot serve``) and the Actions entry points.

* ``issue_comment`` (created) → the command dispatcher;
* ``pull_request`` (opened / synchronize / reopened) on a kbot branch of this repository, opened by the
  bot's login → the commit status ``kbot/harness`` goes to pending (the bench workflow itself starts
  on the same event);
* both only while the bot is not paused (kill switch: policy ``enabled: false``, the kill-switch file,
  the kill-switch label on the PR; an invalid policy file pauses too);
* ``workflow_run`` (completed) of ``bench.yml`` for a kbot branch, or dispatched by the bot for a
  person's PR (``bot.campaign.submission``) → results fetched (injected function: the artifact
  download needs the App's token), then review, status and promotion.
"""

from __future__ import annotations

import logging
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from bot.campaign.submission import dispatched_target
from bot.commands.auth import RateLimiter
from bot.commands.bot_policy import paused
from bot.commands.context import Services
from bot.commands.dispatch import CommandDispatcher
from bot.forge.base import Forge
from bot.names import BENCH_WORKFLOW, STATUS_CONTEXT, is_candidate_branch
from bot.review.publish import find_run_pr, publish_results

log = logging.getLogger(__name__)

HANDLED = {
    "issue_comment": {"created"},
    "pull_request": {"opened", "synchronize", "reopened"},
    "workflow_run": {"completed"},
}
_SHA = re.compile(r"^[0-9a-f]{40}$")
FINISHED = ("success", "failure")  # bench conclusions that carry results worth publishing

# (forge, workflow_run payload, destination dir) -> True when results were written there
FetchResults = Callable[[Forge, Mapping[str, Any], Path], bool]


def wanted(event: str, payload: Mapping[str, Any]) -> bool:
    """Should this delivery become a job? (Cheap filter at intake; handlers re-check everything.)"""
    return payload.get("action") in HANDLED.get(event, set())


@dataclass
class EventRouter:
    forge_for: Callable[[Mapping[str, Any]], Forge]
    services_for: Callable[[Forge], Services]
    limiter: RateLimiter | None = None
    fetch_results: FetchResults | None = None
    # Called with (forge, pr number) once a result is published: opens a campaign's next round.
    after_results: Callable[[Forge, int], Any] | None = None

    def handle(self, event: str, payload: Mapping[str, Any]) -> str:
        if not wanted(event, payload):
            return "ignored"
        forge = self.forge_for(payload)
        if event == "issue_comment":
            out = CommandDispatcher(forge, self.services_for(forge), self.limiter).handle_issue_comment(payload)
            return out.status
        if event == "pull_request":
            return self._pull_request(forge, payload)
        return self._workflow_run(forge, payload)

    @staticmethod
    def _same_repo_bot_branch(head: Mapping[str, Any] | None, base_repo: str | None, branch: str | None) -> bool:
        head_repo = ((head or {}).get("repo") or {}).get("full_name") if head is not None else None
        return (isinstance(branch, str) and is_candidate_branch(branch) and isinstance(head_repo, str)
                and isinstance(base_repo, str) and head_repo.lower() == base_repo.lower())

    def _pull_request(self, forge: Forge, payload: Mapping[str, Any]) -> str:
        pr = payload.get("pull_request") or {}
        head = pr.get("head") or {}
        base_repo = ((pr.get("base") or {}).get("repo") or {}).get("full_name")
        if not self._same_repo_bot_branch(head, base_repo, head.get("ref")):
            return "ignored"
        author = (pr.get("user") or {}).get("login")
        if not isinstance(author, str) or author.lower() != forge.info.bot_login.lower():
            return "ignored"  # bench.yml skips PRs not opened by the bot: no status would ever follow
        sha = head.get("sha")
        if not isinstance(sha, str) or not _SHA.match(sha):
            return "ignored"
        labels = [lab.get("name") for lab in pr.get("labels") or [] if isinstance(lab, Mapping)]
        why = paused(forge, [n for n in labels if isinstance(n, str)])
        if why:
            log.info("pull_request #%s: kbot is paused (%s)", pr.get("number"), why)
            return "paused"
        forge.set_status(sha, "pending", context=STATUS_CONTEXT, description="waiting for the GPU bench")
        return "done"

    def _workflow_run(self, forge: Forge, payload: Mapping[str, Any]) -> str:
        run = payload.get("workflow_run") or {}
        repo = (payload.get("repository") or {}).get("full_name")
        if run.get("event") not in ("pull_request", "workflow_dispatch") or run.get("path") != BENCH_WORKFLOW:
            return "ignored"
        if run.get("conclusion") not in FINISHED:
            # cancelled / skipped / timed out runs have no results: the review must stay as it is
            return "ignored"
        head_repo = (run.get("head_repository") or {}).get("full_name")
        if not (isinstance(head_repo, str) and isinstance(repo, str) and head_repo.lower() == repo.lower()):
            return "ignored"
        if run.get("event") == "workflow_dispatch":
            # A person's kernel, dispatched by the bot after a maintainer's /evaluate: the PR and the
            # measured sha come from the run's title, and count only for a sha the bot's record authorized.
            target = dispatched_target(forge, run)
            if target is None:
                return "ignored"
            pr, sha = target
            if not pr.is_open:
                return "ignored"
            branch = pr.head_branch
        else:
            branch, sha = run.get("head_branch"), run.get("head_sha")
            if not (isinstance(branch, str) and is_candidate_branch(branch)):
                return "ignored"
            if not isinstance(sha, str) or not _SHA.match(sha):
                return "ignored"
            pr = find_run_pr(forge, branch, sha)  # a merged PR too: its interrupted promotion is finished
            if pr is None:
                return "ignored"
        why = paused(forge, pr.labels)
        if why:
            # Kill switch: nothing is published, promoted or continued; `/evaluate` after resuming.
            log.info("workflow_run for #%s: kbot is paused (%s)", pr.number, why)
            return "paused"
        run_url = run.get("html_url") if isinstance(run.get("html_url"), str) else None
        if self.fetch_results is None:
            log.warning("workflow_run for %s: no results fetcher configured; review not posted", branch)
            return "skipped"
        with tempfile.TemporaryDirectory(prefix="kbot-results-") as tmp:
            if not self.fetch_results(forge, run, Path(tmp)):
                forge.set_status(sha, "error", context=STATUS_CONTEXT,
                                 description=f"bench run {run.get('conclusion')}: no results", target_url=run_url)
                return "failed"
            publish_results(forge, pr.number, sha, results_dir=tmp, run_url=run_url)
        if self.after_results is not None:
            try:
                self.after_results(forge, pr.number)
            except Exception:  # noqa: BLE001 — the review is out; a failed next round must not undo it
                log.exception("next round after #%s failed", pr.number)
        return "done"
