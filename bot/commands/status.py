"""/status: where this thread stands (PR: status, decision, champion; issue: the campaign's PRs)."""

from __future__ import annotations

from bot.commands.context import CommandContext, CommandResult
from bot.commands.parser import Invocation
from bot.commands.spec import CommandSpec


def run(ctx: CommandContext, inv: Invocation) -> CommandResult:
    pr = ctx.forge.get_pr(ctx.number) if ctx.is_pr else None
    return CommandResult(True, ctx.services.status(ctx.number, pr))


SPEC = CommandSpec(
    name="status",
    summary="show the evaluation and campaign status",
    handler=run,
    permission="read",
    rank=20,
)
