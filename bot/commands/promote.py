"""/promote (maintainers): apply the promotion rules to this PR's latest evaluation now.

It never bypasses a rule: a PR that fails the policy is reported, not merged.
"""

from __future__ import annotations

from bot.commands.context import CommandContext, CommandResult
from bot.commands.parser import Invocation
from bot.commands.spec import CommandSpec


def run(ctx: CommandContext, inv: Invocation) -> CommandResult:
    return CommandResult(True, ctx.services.promote(ctx.pr(), ctx.actor))


SPEC = CommandSpec(
    name="promote",
    summary="apply the promotion rules now and merge a winner",
    handler=run,
    pr_only=True,
    permission="maintain",
    rank=60,
)
