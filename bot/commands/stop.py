"""/stop (maintainers): stop the campaign of this thread; no new candidates are generated for it."""

from __future__ import annotations

from bot.commands.context import CommandContext, CommandResult
from bot.commands.parser import Invocation
from bot.commands.spec import CommandSpec


def run(ctx: CommandContext, inv: Invocation) -> CommandResult:
    return CommandResult(True, ctx.services.stop_campaign(ctx.number, ctx.actor))


SPEC = CommandSpec(
    name="stop",
    summary="stop the optimization campaign of this thread",
    handler=run,
    permission="maintain",
    rank=70,
)
