"""/profile: re-run the harness with the profiler and the feedback rules on."""

from __future__ import annotations

from bot.commands.context import CommandContext, CommandResult
from bot.commands.parser import Invocation
from bot.commands.spec import CommandSpec


def run(ctx: CommandContext, inv: Invocation) -> CommandResult:
    return CommandResult(True, ctx.services.request_evaluation(ctx.pr(), profile=True, actor=ctx.actor))


SPEC = CommandSpec(
    name="profile",
    summary="benchmark with the profiler and feedback rules",
    handler=run,
    pr_only=True,
    permission="write",
    rate_limit=10,
    rank=50,
)
