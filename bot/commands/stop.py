"""/stop (maintainers): stop the campaign of this thread; no new candidates are generated for it."""

from __future__ import annotations

from bot.commands.context import CommandContext, CommandResult
from bot.commands.parser import Invocation
from bot.commands.registry import CommandSpec, register


def run(ctx: CommandContext, inv: Invocation) -> CommandResult:
    return CommandResult(True, ctx.services.stop_campaign(ctx.number, ctx.actor))


SPEC = register(CommandSpec(name="stop", summary="stop the optimization campaign of this thread", handler=run))
