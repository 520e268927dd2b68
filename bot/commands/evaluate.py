"""/evaluate: run the harness on this PR's current head: the bot's own candidate again, or a person's
kernel (a branch or a fork) once, for this head, authorized by the caller's API-checked permission."""

from __future__ import annotations

from bot.commands.context import CommandContext, CommandResult
from bot.commands.parser import Invocation
from bot.commands.spec import CommandSpec


def run(ctx: CommandContext, inv: Invocation) -> CommandResult:
    return CommandResult(True, ctx.services.request_evaluation(ctx.pr(), profile=False, actor=ctx.actor))


SPEC = CommandSpec(
    name="evaluate",
    summary="benchmark the PR head (a kbot candidate, or a person's kernel PR)",
    handler=run,
    pr_only=True,
    permission="write",
    rate_limit=10,
    rank=40,
)
