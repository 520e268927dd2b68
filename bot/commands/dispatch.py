"""Comment → commands → effects, with the acknowledgement/success/confusion protocol.

Order of checks (each can end the handling; see docs/bot.md):

1. only ``created`` comments; bots (and the bot itself) are ignored silently;
2. the body is parsed; a comment with no command is ignored silently;
3. the policy is read from the default branch (invalid: the defaults bound the answer below);
4. the author's role is asked from the API: below the policy's ``answer_min_permission`` the comment is
   ignored silently, and so is one past the author's write budget (``auth.write_budget``, counted by
   the rate limiter): comments cannot make the bot write without bound, /help and errors included;
5. the comment gets an ``eyes`` reaction (we saw it); an invalid policy or the kill switch refuses all;
6. parse errors → nothing runs, ``confused`` + a reply with the errors and the help;
7. per command: PR-only check, rate limit, authorization by API, then the handler;
8. ``rocket`` if every command succeeded, else ``confused``; one reply per comment, kept sticky by a
   marker that names the comment, so a re-delivered event edits the reply instead of adding one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping

from bot.commands.auth import WRITES_PER_ANSWER, RateLimiter, authorize, is_bot_account, role_of, write_budget
from bot.commands.bot_policy import BotPolicy, kill_switch, load_policy
from bot.commands.context import CommandContext, CommandFailed, CommandResult, Services
from bot.commands.help import help_text
from bot.commands.parser import parse_comment
from bot.commands.spec import specs
from bot.forge.base import Forge, ForgeError, Permission
from bot.forge.markers import sticky_marker
from bot.policy_file import PolicyError
from bot.review.markdown import escape_inline

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    status: str                      # ignored | refused | done | failed
    reason: str = ""
    results: list[tuple[str, bool]] = field(default_factory=list)


def reply_marker(comment_id: int) -> str:
    return sticky_marker(f"reply:{comment_id}")


class CommandDispatcher:
    def __init__(self, forge: Forge, services: Services, limiter: RateLimiter | None = None):
        self.forge = forge
        self.services = services
        self.limiter = limiter

    # -- helpers ---------------------------------------------------------------------------------
    def _reply(self, number: int, comment_id: int, text: str) -> None:
        marker = reply_marker(comment_id)
        self.forge.upsert_comment(number, marker, f"{marker}\n{text}")

    def _react(self, comment_id: int, reaction: str) -> None:
        try:
            self.forge.add_reaction(comment_id, reaction)  # type: ignore[arg-type]
        except ForgeError as e:  # a lost reaction must not lose the command
            log.warning("reaction %s on %s failed: %s", reaction, comment_id, e)

    # -- entry point -----------------------------------------------------------------------------
    def handle_issue_comment(self, payload: Mapping[str, Any]) -> Outcome:
        if payload.get("action") != "created":
            return Outcome("ignored", "not a new comment")
        comment, issue = payload.get("comment"), payload.get("issue")
        if not isinstance(comment, Mapping) or not isinstance(issue, Mapping):
            return Outcome("ignored", "payload without comment/issue")
        repo = (payload.get("repository") or {}).get("full_name")
        if isinstance(repo, str) and self.forge.info.kind == "github" and repo.lower() != self.forge.info.repo.lower():
            return Outcome("ignored", "event for another repository")
        user = comment.get("user")
        if is_bot_account(user, self.forge.info.bot_login) or is_bot_account(payload.get("sender"), self.forge.info.bot_login):
            return Outcome("ignored", "comment by a bot")
        body = comment.get("body")
        parsed = parse_comment(body if isinstance(body, str) else "", specs())
        if parsed.empty:
            return Outcome("ignored", "no command")
        try:
            comment_id = int(comment["id"])
            number = int(issue["number"])
        except (KeyError, TypeError, ValueError):
            return Outcome("ignored", "payload without comment id / issue number")
        actor = user["login"]
        is_pr = bool(issue.get("pull_request"))
        labels = tuple(
            lab["name"] for lab in issue.get("labels") or [] if isinstance(lab, Mapping) and isinstance(lab.get("name"), str)
        )

        try:
            policy, invalid = load_policy(self.forge), None
        except PolicyError as e:
            policy, invalid = BotPolicy(), e  # the defaults bound the answer; nothing runs
        if is_bot_account(user, self.forge.info.bot_login, policy.ignore_logins):
            return Outcome("ignored", "login ignored by policy")
        role = role_of(self.forge, actor)
        budget = write_budget(policy, role if role is not None else Permission.NONE)
        if budget == 0:
            return Outcome("ignored", f"the author's role is below {policy.rate_limit.answer_min_permission}")
        if self.limiter is not None and not self.limiter.take_writes(actor, WRITES_PER_ANSWER, budget,
                                                                     policy.rate_limit.window_seconds):
            return Outcome("ignored", "the author's write budget for this window is spent")

        self._react(comment_id, "eyes")
        if invalid is not None:
            self._react(comment_id, "confused")
            self._reply(number, comment_id, f"kbot refuses commands: the policy file is invalid.\n\n<pre>{escape_inline(str(invalid), 1500, code=True)}</pre>")
            return Outcome("refused", "invalid policy")
        paused = kill_switch(self.forge, policy, labels)
        if paused:
            self._react(comment_id, "confused")
            self._reply(number, comment_id, f"kbot is paused: {paused}.")
            return Outcome("refused", "kill switch")
        if parsed.errors:
            self._react(comment_id, "confused")
            errs = "\n".join(f"- line {e.line}: {escape_inline(e.message, 300)}" if e.line else f"- {escape_inline(e.message, 300)}" for e in parsed.errors)
            self._reply(number, comment_id, f"I could not run that:\n{errs}\n\n{help_text(policy)}")
            return Outcome("refused", "parse errors")

        table = specs()
        results: list[tuple[str, bool]] = []
        messages: list[str] = []
        for inv in parsed.invocations:
            spec = table[inv.name]
            res = self._run_one(spec, inv, policy, actor, number, is_pr, comment_id, labels, role)
            results.append((inv.name, res.ok))
            if res.message:
                messages.append(f"**/{inv.name}** {'✅' if res.ok else '❌'}\n\n{res.message}")
        ok = all(r for _, r in results)
        self._react(comment_id, "rocket" if ok else "confused")
        if messages:
            text = "\n\n".join(messages)
            if not ok:
                text += "\n\n<details><summary>help</summary>\n\n" + help_text(policy) + "\n\n</details>"
            self._reply(number, comment_id, text)
        return Outcome("done" if ok else "failed", "", results)

    def _run_one(self, spec, inv, policy, actor, number, is_pr, comment_id, labels, role=None) -> CommandResult:
        if spec.pr_only and not is_pr:
            return CommandResult(False, f"/{spec.name} works on pull requests only.")
        if self.limiter is not None and spec.rate_limited:
            rl = self.limiter.take(actor, spec.name, policy)
            if not rl.allowed:
                return CommandResult(False, rl.reason)
        auth = authorize(self.forge, policy, actor, spec.name, role)
        if not auth.allowed:
            return CommandResult(False, f"not allowed: {auth.reason}.")
        ctx = CommandContext(self.forge, policy, self.services, actor, number, is_pr, comment_id, labels)
        try:
            return spec.handler(ctx, inv)
        except CommandFailed as e:
            return CommandResult(False, str(e))
        except ForgeError as e:
            log.exception("/%s failed", spec.name)
            return CommandResult(False, f"the code host refused an operation ({type(e).__name__}).")
        except Exception as e:  # noqa: BLE001 - answer the user; a blind retry could repeat side effects
            log.exception("/%s crashed", spec.name)
            return CommandResult(False, f"internal error ({type(e).__name__}); the bot's log has the details.")
