"""The command table: every module of ``bot.commands`` that defines ``SPEC`` (a CommandSpec) is a chat command.

A spec says what the parser accepts (positionals, flags with bounds), where the command makes sense
(PR only or any thread), its help line and place in /help, the handler to call once the caller is
authorized, and the defaults the policy starts from (the permission it needs, its rate limit). The
policy file (``skills/bot-policy.yaml``) can tighten or loosen those; the dispatcher and the policy
only ever see the table, so adding a command is adding one file here (Prow-style plugins).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping

from bot.commands.parser import Flag, Positional
from bot.forge.base import Permission

# handler(ctx: bot.commands.context.CommandContext, inv: bot.commands.parser.Invocation) -> CommandResult.
# (Spelled loosely: the context holds the policy, and the policy reads this table.)
Handler = Callable[..., Any]
# A repository role, weakest first (the values of bot.forge.base.Permission).
Role = Literal[tuple(p.value for p in Permission)]  # type: ignore[valid-type]

PACKAGE = "bot.commands"
_TABLE: dict[str, "CommandSpec"] = {}


@dataclass(frozen=True)
class CommandSpec:
    name: str
    summary: str
    handler: Handler
    positionals: tuple[Positional, ...] = ()
    flags: Mapping[str, Flag] = field(default_factory=dict)
    pr_only: bool = False
    permission: str = "write"      # the role needed when the policy file does not mention the command
    rate_limit: int | None = None  # uses per user and rate-limit window when the policy does not say
    rate_limited: bool = True      # counts against the policy's per-user limits (False: /help)
    rank: int = 100                # place in /help (lower first; ties by name)

    def __post_init__(self) -> None:
        Permission(self.permission)  # ValueError for a role that does not exist

    @property
    def usage(self) -> str:
        return self.usage_for(None)

    def usage_for(self, policy: Any) -> str:
        """The usage line; with a policy, choice flags list what that policy enables."""
        parts = [f"/{self.name}"]
        for p in self.positionals:
            parts.append(f"<{p.name}>" if p.required else f"[{p.name}]")
        for f in self.flags.values():
            if f.kind == "int":
                parts.append(f"[--{f.name} {int(f.lo)}..{int(f.hi)}]")
            elif f.kind == "number":
                parts.append(f"[--{f.name} {f.lo:g}..{f.hi:g}]")
            elif f.kind == "text":
                parts.append(f"[--{f.name} NAME]")
            elif f.kind == "choice":
                parts.append(f"[--{f.name} {'|'.join(f.shown(policy))}]")
            else:
                parts.append(f"[--{f.name}]")
        return " ".join(parts)


def specs() -> dict[str, CommandSpec]:
    """Every command, in /help order. The modules of the package are imported on first use, so that
    importing the parser alone does not pull in every handler."""
    if not _TABLE:
        package = importlib.import_module(PACKAGE)
        found: dict[str, CommandSpec] = {}
        for module in pkgutil.iter_modules(package.__path__):
            spec = getattr(importlib.import_module(f"{PACKAGE}.{module.name}"), "SPEC", None)
            if not isinstance(spec, CommandSpec):
                continue
            if spec.name in found:
                raise ValueError(f"command /{spec.name} defined twice ({module.name})")
            found[spec.name] = spec
        _TABLE.update(sorted(found.items(), key=lambda kv: (kv[1].rank, kv[0])))
    return dict(_TABLE)
