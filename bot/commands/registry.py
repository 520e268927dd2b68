"""The command registry: one module per command registers a CommandSpec (Prow-style plugins).

A spec says what the parser accepts (positionals, flags with bounds), where the command makes sense
(PR only or any thread), its help line, and the handler to call once the caller is authorized.
The policy file decides who may call it; the spec never does.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping

from bot.commands.parser import Flag, Invocation, Positional

if TYPE_CHECKING:
    from bot.commands.context import CommandContext, CommandResult

Handler = Callable[["CommandContext", Invocation], "CommandResult"]

# The modules that register commands; imported lazily by `specs()` so importing the parser alone
# does not pull in every handler.
PLUGINS = ("help", "status", "optimize", "evaluate", "profile", "promote", "stop")

_REGISTRY: dict[str, "CommandSpec"] = {}


@dataclass(frozen=True)
class CommandSpec:
    name: str
    summary: str
    handler: Handler
    positionals: tuple[Positional, ...] = ()
    flags: Mapping[str, Flag] = field(default_factory=dict)
    pr_only: bool = False

    @property
    def usage(self) -> str:
        parts = [f"/{self.name}"]
        for p in self.positionals:
            parts.append(f"<{p.name}>" if p.required else f"[{p.name}]")
        for f in self.flags.values():
            if f.kind == "int":
                parts.append(f"[--{f.name} {f.lo}..{f.hi}]")
            elif f.kind == "choice":
                parts.append(f"[--{f.name} {'|'.join(f.choices)}]")
            else:
                parts.append(f"[--{f.name}]")
        return " ".join(parts)


def register(spec: CommandSpec) -> CommandSpec:
    if spec.name in _REGISTRY and _REGISTRY[spec.name] is not spec:
        raise ValueError(f"command /{spec.name} registered twice")
    _REGISTRY[spec.name] = spec
    return spec


def specs() -> dict[str, CommandSpec]:
    """All registered commands, plugins imported on first use."""
    for mod in PLUGINS:
        importlib.import_module(f"bot.commands.{mod}")
    return dict(_REGISTRY)
