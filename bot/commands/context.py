"""What a command handler gets (CommandContext) and gives back (CommandResult), and the services
interface through which handlers reach the controller, the bench and promotion.

Handlers never talk to the controller or the workflow machinery directly: they call ``Services``, so
the same handlers run in the Actions workflow, in the webhook app and in tests (with an injected
campaign function instead of a real agent).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.campaign.request import OptimizeRequest
from bot.commands.bot_policy import BotPolicy
from bot.forge.base import Forge, PullRequest


class CommandFailed(Exception):
    """A handler could not do what was asked; the message is shown to the user (trusted text only)."""


@dataclass(frozen=True)
class CommandResult:
    ok: bool
    message: str = ""                # Markdown; any untrusted piece already escaped by the handler


@dataclass
class CommandContext:
    forge: Forge
    policy: BotPolicy
    services: "Services"
    actor: str
    number: int                      # issue/PR number
    is_pr: bool
    comment_id: int
    labels: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def pr(self) -> PullRequest:
        if not self.is_pr:
            raise CommandFailed("this command works on pull requests only")
        return self.forge.get_pr(self.number)


class Services(Protocol):
    """The effects commands may have. ``bot.commands.services.ForgeServices`` is the default."""

    def start_campaign(self, request: OptimizeRequest) -> str:
        """Start (or continue) an optimization campaign; returns a Markdown summary."""
        ...

    def stop_campaign(self, thread: int, actor: str) -> str: ...

    def request_evaluation(self, pr: PullRequest, *, profile: bool = False, actor: str = "") -> str: ...

    def promote(self, pr: PullRequest, actor: str) -> str: ...

    def status(self, thread: int, pr: PullRequest | None) -> str: ...
