"""Agents by name: the one list of agents, which the policy validates ``/optimize --agent`` against.

* Built-in agents are the modules of ``bot.agents.providers``: each registers its class with
  ``@register("name")`` when imported, and every one of them is imported the first time the catalog
  is asked (no list of them anywhere else; their SDKs are imported only when an agent calls a model).
  A new provider is one module there.
* Installed plugins: an entry point in group ``kbot.agents`` whose name is the agent name and whose
  value is ``module:Class`` (declare it in the plugin's pyproject under
  ``[project.entry-points."kbot.agents"]``). The policy accepts them like the built-ins.
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points
from typing import Any, Callable

from .base import Agent, AgentError

ENTRY_POINT_GROUP = "kbot.agents"
PROVIDERS = "bot.agents.providers"

_REGISTRY: dict[str, type[Agent]] = {}
_LOADED: list[bool] = []


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


def _load_providers() -> None:
    """Import every module of ``bot.agents.providers`` once (each registers its agents)."""
    if _LOADED:
        return
    _LOADED.append(True)
    package = importlib.import_module(PROVIDERS)
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{PROVIDERS}.{module.name}")


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
    _load_providers()
    if name in _REGISTRY:
        return _REGISTRY[name]
    cls = _from_entry_points(name)
    if cls is not None:
        return cls
    raise AgentError(f"no agent named '{name}'; known: {sorted(available())}")


def available() -> list[str]:
    """Every agent name: the built-in providers, anything registered since, and installed plugins."""
    _load_providers()
    names = set(_REGISTRY)
    try:
        names |= {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    except Exception:  # noqa: BLE001 - a broken third-party distribution must not hide the built-ins
        pass
    return sorted(names)


def create_agent(name: str, config: dict[str, Any] | None = None, **kwargs: Any) -> Agent:
    """Instantiate agent ``name`` with its config section (a dict; see config.py for files)."""
    cls = get_agent_class(name)
    return cls(config or {}, **kwargs)  # type: ignore[call-arg]
