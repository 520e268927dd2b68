"""Several agents behind one name, asked in order: e.g. the offline tuner first (no cost), a model when
the tuner has nothing new for a node.

Config: ``{"agents": [{"name": "offline"}, {"name": "anthropic", "model": "...", "modes": ["initial",
"optimize"]}]}``. Each member may restrict itself to some modes (initial, debug, optimize). For ``n``
candidates each member in turn is asked for what is still missing.
"""

from __future__ import annotations

from typing import Any

from ..base import Agent, AgentContext, AgentError, Mode, Proposal
from ..catalog import create_agent, register


@register("composite")
class CompositeAgent(Agent):
    def __init__(self, config: dict[str, Any] | None = None, **kw: Any) -> None:
        cfg = {**(config or {}), **kw}
        specs = cfg.get("agents")
        if not isinstance(specs, list) or not specs:
            raise AgentError("composite agent: config needs 'agents', a non-empty list of agent sections")
        self.members: list[tuple[Agent, set[Mode]]] = []
        for i, spec in enumerate(specs):
            if not isinstance(spec, dict) or "name" not in spec:
                raise AgentError(f"composite agent: agents[{i}] needs a 'name'")
            spec = dict(spec)
            name = spec.pop("name")
            if name == "composite":
                raise AgentError("composite agent: members cannot be composite")
            try:
                modes = {Mode(m) for m in spec.pop("modes", [m.value for m in Mode])}
            except ValueError as e:
                raise AgentError(f"composite agent: agents[{i}].modes: {e}") from None
            self.members.append((create_agent(name, spec), modes))

    def propose(self, ctx: AgentContext, n: int) -> list[Proposal]:
        out: list[Proposal] = []
        for agent, modes in self.members:
            if len(out) >= n:
                break
            if ctx.mode in modes:
                out.extend(agent.propose(ctx, n - len(out)))
        return out[:n] if n > 0 else []

    @property
    def model(self) -> str | None:
        return ",".join(a.model for a, _ in self.members if a.model) or None

    def describe(self) -> dict[str, Any]:
        return {"agent": self.name, "model": self.model,
                "members": [{**a.describe(), "modes": sorted(m.value for m in modes)} for a, modes in self.members]}
