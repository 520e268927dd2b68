"""Agent configuration: a YAML, TOML or JSON file (or a dict), and the price table.

A config file may hold the whole campaign (``agent:``, ``search:``, ``budget:`` sections) or just an
agent section. Keys never come from a file: ``api_key`` in a config is refused; the key is read from the
environment variable the provider uses (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``) or the one named by
``api_key_env``.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from .base import AgentError

# yaml is imported where it is used: the offline agent (and scripts/gpu/) must import on a device image
# that has torch and triton but not PyYAML.

PRICES_FILE = Path(__file__).with_name("prices.yaml")


def load_config_file(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.exists():
        raise AgentError(f"{p}: no such config file")
    text = p.read_text()
    import yaml

    try:
        if p.suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text) or {}
        elif p.suffix == ".toml":
            data = tomllib.loads(text)
        elif p.suffix == ".json":
            data = json.loads(text)
        else:
            raise AgentError(f"{p}: config files are .yaml, .yml, .toml or .json")
    except (yaml.YAMLError, tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise AgentError(f"{p}: cannot parse config: {e}") from None
    if not isinstance(data, dict):
        raise AgentError(f"{p}: the top level of a config must be a mapping")
    return data


def agent_section(config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(agent name, its settings) from a campaign config with an ``agent:`` section."""
    sec = config.get("agent")
    if not isinstance(sec, dict) or "name" not in sec:
        raise AgentError("config needs an 'agent' section with a 'name' (anthropic, openai, offline, replay, ...)")
    sec = dict(sec)
    return sec.pop("name"), sec


def refuse_inline_keys(config: dict[str, Any]) -> None:
    for k in config:
        if k.lower() in ("api_key", "apikey", "key", "token", "secret"):
            raise AgentError(f"config key '{k}': API keys come from the environment only (see api_key_env)")


def load_prices(provider: str, overrides: dict[str, Any] | None = None) -> dict[str, dict[str, float]]:
    import yaml

    table = yaml.safe_load(PRICES_FILE.read_text()) or {}
    prices = dict(table.get(provider, {}))
    for model, p in (overrides or {}).items():
        if not isinstance(p, dict) or not {"input", "output"} <= set(p):
            raise AgentError(f"prices.{model}: give input and output USD per million tokens")
        prices[model] = {"input": float(p["input"]), "output": float(p["output"])}
    return prices


def price_for(prices: dict[str, dict[str, float]], model: str) -> dict[str, float] | None:
    """Exact model name, else the longest listed prefix (dated snapshots like claude-sonnet-4-5-20250929)."""
    if model in prices:
        return prices[model]
    best = max((m for m in prices if model.startswith(m + "-")), key=len, default=None)
    return prices[best] if best else None


def build_agent(config: dict[str, Any], **kwargs: Any):
    """The agent named in a config's ``agent:`` section, built through the registry."""
    from .catalog import create_agent

    name, section = agent_section(config)
    return create_agent(name, section, **kwargs)
