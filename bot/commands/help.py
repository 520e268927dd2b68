"""/help: the command list with usage, generated from the registry and the policy."""

from __future__ import annotations

from bot.commands.context import CommandContext, CommandResult
from bot.commands.parser import Invocation
from bot.commands.spec import CommandSpec, specs


def help_text(policy=None) -> str:
    lines = ["**kbot commands** (one per line, at the start of the line):", ""]
    for spec in specs().values():
        who = ""
        if policy is not None:
            rule = policy.rule(spec.name)
            who = f" — needs `{rule.permission}`" if rule.permission != "none" else ""
            if rule.teams:
                who += f" or team {', '.join(f'`{t}`' for t in rule.teams)}"
        where = " (on a PR)" if spec.pr_only else ""
        lines.append(f"- `{spec.usage_for(policy)}` — {spec.summary}{where}{who}")
    lines += ["", "Commands inside code blocks, quotes, HTML comments or tags and `<details>` are ignored."]
    return "\n".join(lines)


def run(ctx: CommandContext, inv: Invocation) -> CommandResult:
    return CommandResult(True, help_text(ctx.policy))


SPEC = CommandSpec(
    name="help",
    summary="show this help",
    handler=run,
    permission="none",
    rate_limited=False,
    rank=10,
)
