"""Agents by name: a new provider is one module that registers a class.

Lookup order for ``get_agent_class(name)``:
1. classes already registered with ``@register("name")`` (importing a module registers its agents);
2. the built-in modules (``bot.agents.<module>``) listed in BUILTIN, imported on first use so that an
   SDK is imported only when its agent is asked for;
3. installed plugins: an entry point in group ``kbot.agents`` whose name is the agent name and whose
   value is ``module:Class`` (declare it in the plugin's pyproject under
   ``[project.entry-points."kbot.agents"]``).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any, Callable

from .base import Agent, AgentError

ENTRY_POINT_GROUP = "kbot.agents"
BUILTIN = {
    "anthropic": "bot.agents.anthropic_agent",
    "openai": "bot.agents.openai_agent",
    "offline": "bot.agents.offline",
    "replay": "bot.agents.replay",
    "composite": "bot.agents.composite",
}

_REGISTRY: dict[str, type[Agent]] = {}


def register(name: str) -> Callable[[type[Agent]], type[Agent]]:
    def deco(cls: type[Agent]) -> type[Agent]:
        if not (isinstance(cls, type) and issubclass(cls, Agent)):
            raise TypeError(f"{cls!r} is not an Agent subclass")
        prev = _REGISTRY.get(name)
        if prev is not None and prev is not cls and prev.__qualname__ != cls.__qualname__:
            raise AgentError(f"agent name '{name}' is already registered by {prev.__module__}.{prev.__qualname__}")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return deco


def _from_entry_points(name: str) -> type[Agent] | None:
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            cls = ep.load()
            if not (isinstance(cls, type) and issubclass(cls, Agent)):
                raise AgentError(f"entry point {ENTRY_POINT_GROUP}:{name} = {ep.value} is not an Agent subclass")
            _REGISTRY.setdefault(name, cls)
            return cls
    return None


def get_agent_class(name: str) -> type[Agent]:
    if name in _REGISTRY:
        return _REGISTRY[name]
    if name in BUILTIN:
        importlib.import_module(BUILTIN[name])
        if name in _REGISTRY:
            return _REGISTRY[name]
    cls = _from_entry_points(name)
    if cls is not None:
        return cls
    raise AgentError(f"no agent named '{name}'; known: {sorted(available())}")


def available() -> list[str]:
    names = set(_REGISTRY) | set(BUILTIN)
    try:
        names |= {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    except Exception:  # a broken third-party distribution must not hide the built-ins
        pass
    return sorted(names)


def create_agent(name: str, config: dict[str, Any] | None = None, **kwargs: Any) -> Agent:
    """Instantiate agent ``name`` with its config section (a dict; see config.py for files)."""
    cls = get_agent_class(name)
    return cls(config or {}, **kwargs)  # type: ignore[call-arg]
