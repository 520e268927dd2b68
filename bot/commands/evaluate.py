"""/evaluate: re-run the harness on this PR's current head."""

from __future__ import annotations

from bot.commands.context import CommandContext, CommandResult
from bot.commands.parser import Invocation
from bot.commands.spec import CommandSpec


def run(ctx: CommandContext, inv: Invocation) -> CommandResult:
    return CommandResult(True, ctx.services.request_evaluation(ctx.pr(), profile=False))


SPEC = CommandSpec(
    name="evaluate",
    summary="re-run the benchmark on the PR head",
    handler=run,
    pr_only=True,
    permission="write",
    rate_limit=10,
    rank=40,
)
