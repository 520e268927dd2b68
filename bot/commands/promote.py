"""/promote (maintainers): apply the promotion rules to this PR's latest evaluation now.

It never bypasses a rule: a PR that fails the policy is reported, not merged.
"""

from __future__ import annotations

from bot.commands.context import CommandContext, CommandResult
from bot.commands.parser import Invocation
from bot.commands.registry import CommandSpec, register


def run(ctx: CommandContext, inv: Invocation) -> CommandResult:
    return CommandResult(True, ctx.services.promote(ctx.pr(), ctx.actor))


SPEC = register(CommandSpec(name="promote", summary="apply the promotion rules now and merge a winner", handler=run, pr_only=True))
