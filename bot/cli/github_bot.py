"""``kbot serve`` and ``kbot bot ...``: the bot on GitHub (registered through the ``kbot.commands`` entry points).

    kbot serve                      GitHub App webhook receiver (App mode)
    kbot bot command                Actions: handle the issue_comment event in $GITHUB_EVENT_PATH
    kbot bot report                 Actions: publish a bench run's results (review, status, promotion)
    kbot bot review REPORT.json     print the review Markdown for a report (local preview)
    kbot bot decide REPORT.json     print the promotion decision for a report (local, no forge)
    kbot bot leaderboard CHAMPION   print LEADERBOARD.md for a champion.json

Everything that talks to GitHub is imported lazily, so ``kbot eval`` on a runner never needs it.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, Callable

import click


def _fail(msg: str) -> None:
    click.echo(f"error: {msg}", err=True)
    sys.exit(2)


# /optimize without --campaign (or with an empty KBOT_CAMPAIGN): propose and open candidate PRs.
DEFAULT_CAMPAIGN = "bot.campaign.github_campaign:campaign"


def _keep_calls_in(state_dir: str) -> None:
    """Model calls go to ``STATE_DIR/calls/`` unless ``KBOT_CALLS_DIR`` says where (the workflows)."""
    from bot.campaign.github_campaign import CALLS_DIR_ENV

    os.environ.setdefault(CALLS_DIR_ENV, str(Path(state_dir) / "calls"))


def _campaign_for(fn: Callable[..., Any] | None, forge: Any) -> Callable[..., Any] | None:
    """The one-argument callable ForgeServices expects: ``fn`` with this forge bound when it takes one."""
    if fn is None:
        return None
    from bot.campaign.github_campaign import bind

    return bind(forge, fn)


def _load_callable(spec: str | None) -> Callable[..., Any] | None:
    """``module:function`` → the function (used for --campaign and --fetch-results)."""
    if not spec:
        return None
    mod, _, fn = spec.partition(":")
    if not mod or not fn:
        _fail(f"{spec!r}: expected module:function")
    return getattr(importlib.import_module(mod), fn)


def _github_forge(repo: str | None, installation_id: int | None = None):
    """A GitHubForge from the environment (App credentials or a token; see docs/bot.md).

    ``KBOT_BOT_LOGIN`` names the account the bot writes as when it cannot be asked (an installation
    token made by actions/create-github-app-token may not call GET /user), e.g. ``kbot[bot]``.
    """
    try:
        from bot.forge.base import ForgeError
        from bot.forge.github import GitHubForge
    except ImportError as e:
        _fail(f"the GitHub forge is unavailable ({e}); install the bot extra: pip install -e '.[bot]'")
    env = dict(os.environ)
    repo = repo or env.get("GITHUB_REPOSITORY")
    if not repo:
        _fail("no repository: pass --repo owner/name or set GITHUB_REPOSITORY")
    env["GITHUB_REPOSITORY"] = repo
    if installation_id is not None:
        env["KBOT_APP_INSTALLATION_ID"] = str(installation_id)
    kwargs = {"bot_login": env["KBOT_BOT_LOGIN"]} if env.get("KBOT_BOT_LOGIN") else {}
    try:
        return GitHubForge.from_env(env, **kwargs)
    except ForgeError as e:
        _fail(str(e))


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_LEVEL_ENV = "KBOT_LOG_LEVEL"
LOG_LEVEL = click.option(
    "--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False), default="INFO", envvar=LOG_LEVEL_ENV, show_default=True,
    help=f"The least severe log records the bot writes to stderr (also ${LOG_LEVEL_ENV}).")


def _configure_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper()), format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        force=True)


def register(cli: click.Group) -> None:
    from bot.cli import init

    init.register(cli)  # `kbot init`: this repository's workflows call the ones kbot publishes

    @cli.command("serve")
    @click.option("--state-dir", type=click.Path(file_okay=False), default=".kbot-state", show_default=True,
                  help="sqlite queue, deliveries and rate limits live here")
    @click.option("--host", default="127.0.0.1", show_default=True)
    @click.option("--port", type=int, default=8080, show_default=True)
    @click.option("--repo", help="owner/name served (default: the repository of each event)")
    @click.option("--campaign", help="module:function called for /optimize with an OptimizeRequest "
                  f"(default {DEFAULT_CAMPAIGN}; a `forge` keyword gets the event's forge)")
    @click.option("--fetch-results", default="bot.intake.artifacts:github_results_fetcher", show_default=True,
                  help="module:function(forge, workflow_run, dest) -> bool that downloads the bench artifacts")
    @LOG_LEVEL
    def serve_cmd(state_dir: str, host: str, port: int, repo: str | None, campaign: str | None,
                  fetch_results: str | None, log_level: str) -> None:
        """Run the GitHub App webhook receiver (secrets from KBOT_WEBHOOK_SECRET[_OLD])."""
        from bot.commands.auth import RateLimiter
        from bot.commands.services import ForgeServices
        from bot.intake.events import EventRouter
        from bot.intake.server import secrets_from_env, serve

        _configure_logging(log_level)
        secrets = secrets_from_env()
        from bot.forge.trusted_meta import META_KEY_ENV, MetaKeyError, meta_key

        try:
            key = meta_key()
        except MetaKeyError as e:
            _fail(str(e))
        if key is None:
            logging.getLogger(__name__).warning("%s is not set: candidates are reviewed but never merged (docs/bot.md)",
                                                META_KEY_ENV)
        Path(state_dir).mkdir(parents=True, exist_ok=True)
        _keep_calls_in(state_dir)
        campaign_fn = _load_callable(campaign or DEFAULT_CAMPAIGN)
        forges: dict[str, Any] = {}

        def forge_for(payload: dict) -> Any:
            name = repo or (payload.get("repository") or {}).get("full_name")
            if not isinstance(name, str):
                raise ValueError("event without repository")
            inst = (payload.get("installation") or {}).get("id")
            inst = inst if isinstance(inst, int) else None
            key = f"{name}#{inst}"
            if key not in forges:
                forges[key] = _github_forge(name, inst)
            return forges[key]

        from bot.campaign.github_campaign import continue_after_results

        router = EventRouter(forge_for, lambda f: ForgeServices(f, _campaign_for(campaign_fn, f)),
                             RateLimiter(Path(state_dir) / "rate.sqlite3"), _load_callable(fetch_results),
                             after_results=continue_after_results)
        serve(state_dir, router.handle, host=host, port=port, secrets=secrets)

    @cli.group("bot")
    @LOG_LEVEL
    def bot_group(log_level: str) -> None:
        """GitHub bot: command handling, reports, promotion (Actions and local tools)."""
        _configure_logging(log_level)

    @bot_group.command("command")
    @click.option("--event-path", type=click.Path(exists=True, dir_okay=False), envvar="GITHUB_EVENT_PATH",
                  required=True, help="the event payload (GitHub sets GITHUB_EVENT_PATH)")
    @click.option("--repo", envvar="GITHUB_REPOSITORY")
    @click.option("--state-dir", type=click.Path(file_okay=False), default=None,
                  help="rate-limit store; without it no per-user rate limit is applied")
    @click.option("--campaign", help=f"module:function called for /optimize (default, also when empty: {DEFAULT_CAMPAIGN})")
    def command_cmd(event_path: str, repo: str | None, state_dir: str | None, campaign: str | None) -> None:
        """Handle one issue_comment event (the command workflow)."""
        from bot.commands.auth import RateLimiter
        from bot.commands.dispatch import CommandDispatcher
        from bot.commands.services import ForgeServices

        payload = json.loads(Path(event_path).read_text())
        forge = _github_forge(repo)
        limiter = RateLimiter(Path(state_dir) / "rate.sqlite3") if state_dir else None
        if state_dir:
            Path(state_dir).mkdir(parents=True, exist_ok=True)
            _keep_calls_in(state_dir)
        services = ForgeServices(forge, _campaign_for(_load_callable(campaign or DEFAULT_CAMPAIGN), forge))
        out = CommandDispatcher(forge, services, limiter).handle_issue_comment(payload)
        click.echo(json.dumps({"status": out.status, "reason": out.reason, "results": out.results}))

    @bot_group.command("report")
    @click.option("--results", "results_dir", type=click.Path(exists=True, file_okay=False), required=True)
    @click.option("--pr", "pr_number", type=int, default=None, help="PR number (default: the open PR of --head-branch)")
    @click.option("--head-branch", default=None)
    @click.option("--head-sha", default=None, help="the sha the bench run checked out (from the workflow_run event)")
    @click.option("--dispatch-title", default=None,
                  help="a dispatched bench's run title (a person's PR): the PR and the sha come from it, checked against the bot's record")
    @click.option("--run-url", default=None)
    @click.option("--repo", envvar="GITHUB_REPOSITORY")
    @click.option("--no-promote", is_flag=True, help="post the review and status only")
    @click.option("--no-rounds", is_flag=True, help="do not open the next round of an /optimize --rounds N campaign")
    def report_cmd(results_dir: str, pr_number: int | None, head_branch: str | None, head_sha: str | None,
                   dispatch_title: str | None, run_url: str | None, repo: str | None, no_promote: bool, no_rounds: bool) -> None:
        """Publish a bench run: sticky review, kbot/harness status, promotion."""
        import re

        from bot.review.publish import find_run_pr, publish_results
        from bot.review.results import ResultsError

        if dispatch_title is None and not (isinstance(head_sha, str) and re.fullmatch(r"[0-9a-f]{40}", head_sha)):
            _fail("--head-sha must be a 40-character hex sha")
        forge = _github_forge(repo)
        if dispatch_title is not None:
            from bot.campaign.submission import dispatched_target

            target = dispatched_target(forge, {"display_title": dispatch_title})
            if target is None:
                click.echo("a dispatched bench for no sha the bot authorized; nothing to report")
                return
            pr_number, head_sha = target[0].number, target[1]
        assert head_sha is not None
        if pr_number is None:
            if not head_branch:
                _fail("give --pr or --head-branch")
            pr = find_run_pr(forge, head_branch, head_sha)  # merged too: a re-run resumes its promotion
            if pr is None:
                click.echo(f"no open PR for {head_branch} (nor a merged one at {head_sha[:12]}); nothing to report")
                return
            pr_number = pr.number
        from bot.commands.bot_policy import paused

        why = paused(forge, forge.get_pr(pr_number).labels)
        if why:
            # Kill switch (or an invalid policy): nothing is published, promoted or continued.
            click.echo(json.dumps({"pr": pr_number, "state": "paused", "reason": why}))
            return
        try:
            out = publish_results(forge, pr_number, head_sha, results_dir=results_dir, run_url=run_url,
                                  promote=not no_promote)
        except ResultsError as e:
            _fail(str(e))
        next_round: list[int] | str = []
        if not no_rounds and out.state != "skipped":
            # The campaign's next round opens when this result completes the current one.
            from bot.campaign.github_campaign import continue_after_results

            try:
                next_round = [p.number for p in continue_after_results(forge, pr_number)]
            except Exception as e:  # noqa: BLE001 - the review is out; a failed next round must not fail the report
                logging.getLogger(__name__).exception("next round after #%s failed", pr_number)
                next_round = f"failed: {type(e).__name__}: {e}"[:300]
        click.echo(json.dumps({"pr": out.pr, "state": out.state,
                               "decision": out.decision.to_dict() if out.decision else None,
                               "merged_sha": out.merged_sha, "closed": out.closed, "problems": out.problems,
                               "next_round": next_round}))

    @bot_group.command("review")
    @click.argument("report_path", type=click.Path(exists=True, dir_okay=False))
    @click.option("--champion", type=click.Path(exists=True, dir_okay=False), default=None)
    def review_cmd(report_path: str, champion: str | None) -> None:
        """Print the review Markdown for a report JSON."""
        from bot.review.sticky_review import render_review
        from harness.report import load_report

        click.echo(render_review(load_report(report_path), load_report(champion) if champion else None))

    @bot_group.command("decide")
    @click.argument("report_path", type=click.Path(exists=True, dir_okay=False))
    @click.option("--policy", "policy_path", type=click.Path(exists=True, dir_okay=False),
                  default=None, help="promotion policy (default: skills/promotion.yaml of the repository, else kbot's)")
    @click.option("--champion-hash", default=None, help="solution_hash of the current champion (none: first)")
    @click.option("--head-sha", default=None)
    @click.option("--behind", is_flag=True, help="the measured head is behind the default branch")
    def decide_cmd(report_path: str, policy_path: str | None, champion_hash: str | None, head_sha: str | None,
                   behind: bool) -> None:
        """Print the promotion decision for a report (no forge, no merge)."""
        from bot.policy_file import PolicyError
        from bot.promotion.decision import PROMOTION_PATH, PromotionPolicy, decide
        from bot.review.evidence import Evidence
        from harness.paths import skill
        from harness.report import load_report

        path = Path(policy_path) if policy_path else skill(PROMOTION_PATH.removeprefix("skills/"))
        try:
            policy = PromotionPolicy.from_yaml(path.read_text(), str(path))
        except PolicyError as e:
            _fail(str(e))
        ev = Evidence.from_report(load_report(report_path), head_sha)
        d = decide(ev, policy, champion_hash=champion_hash, pr_head_sha=head_sha, up_to_date=not behind)
        click.echo(json.dumps(d.to_dict(), indent=2))
        sys.exit(0 if d.action == "promote" else 1)

    @bot_group.command("leaderboard")
    @click.argument("champion_json", type=click.Path(exists=True, dir_okay=False))
    def leaderboard_cmd(champion_json: str) -> None:
        """Print LEADERBOARD.md for a champion.json."""
        from bot.promotion.champion import render_leaderboard

        click.echo(render_leaderboard(json.loads(Path(champion_json).read_text())), nl=False)


def main() -> None:
    """``python -m bot.cli.github_bot ...``: the bot commands alone, without the harness CLI (and without
    torch), for the trusted report/command workflow jobs."""

    @click.group(context_settings={"help_option_names": ["-h", "--help"]})
    def cli() -> None:
        """kbot bot commands."""

    register(cli)
    cli()


if __name__ == "__main__":
    main()
