"""Agent configuration: a YAML, TOML or JSON file (or a dict), and the price table.

A config file may hold the whole campaign (``agent:``, ``search:``, ``budget:`` sections) or just an
agent section. Keys never come from a file: ``api_key`` in a config is refused; the key is read from the
environment variable the provider uses (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``) or the one named by
``api_key_env``.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

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


# -- settings a person chooses ----------------------------------------------------------------------
# The model, endpoint and sampling of an LLM agent: what `kbot optimize --model/--base-url/...`, the
# policy's `optimize.agent_settings` and `/optimize model=...` set. One home for their names and their
# hard limits (a policy narrows them further; bot.commands.bot_policy).
SETTING_KEYS = ("model", "base_url", "temperature", "max_tokens", "top_p")
TEMPERATURE_RANGE = (0.0, 2.0)
TOP_P_RANGE = (0.0, 1.0)
MAX_TOKENS_RANGE = (1, 1_000_000)
_MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/@-]{0,127}$")


def check_base_url(url: Any, where: str = "base_url") -> str:
    """An http(s) URL with a host and no credentials in it (a key in a URL would be logged and recorded)."""
    if not isinstance(url, str) or not url.strip():
        raise AgentError(f"{where} must be an http:// or https:// URL, got {url!r}")
    p = urlsplit(url.strip())
    if p.scheme not in ("http", "https") or not p.hostname:
        raise AgentError(f"{where} must be an http:// or https:// URL with a host, got {url!r}")
    if p.username or p.password:
        raise AgentError(f"{where}: no user or password in the URL (keys come from the environment only)")
    return url.strip()


def check_settings(settings: Mapping[str, Any], where: str = "agent settings") -> dict[str, Any]:
    """The settings that are set (None values dropped), each checked against its hard limit; an
    AgentError naming the setting otherwise."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if key not in SETTING_KEYS:
            raise AgentError(f"{where}: unknown setting {key!r}; known: {', '.join(SETTING_KEYS)}")
        if value is None:
            continue
        if key == "model":
            if not isinstance(value, str) or not _MODEL_RE.match(value):
                raise AgentError(f"{where}: model must be a model name (letters, digits, _ . : / @ -), got {value!r}")
        elif key == "base_url":
            value = check_base_url(value, f"{where}: base_url")
        elif key == "max_tokens":
            lo, hi = MAX_TOKENS_RANGE
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise AgentError(f"{where}: max_tokens must be a whole number from {lo} to {hi}, got {value!r}")
        else:
            lo, hi = TEMPERATURE_RANGE if key == "temperature" else TOP_P_RANGE
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= float(value) <= hi:
                raise AgentError(f"{where}: {key} must be a number from {lo} to {hi}, got {value!r}")
            if key == "top_p" and float(value) == 0.0:
                raise AgentError(f"{where}: top_p must be above 0")
            value = float(value)
        out[key] = value
    return out


def agent_config(name: str, *layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """The config section for agent ``name``: ``layers`` merged in order (later ones win; None values
    do not override). Settings (``SETTING_KEYS``) are checked; they need an agent that calls a model:
    naming one for the offline agent is refused rather than silently ignored."""
    from .catalog import get_agent_class

    merged: dict[str, Any] = {}
    for layer in layers:
        for k, v in (layer or {}).items():
            if v is not None:
                merged[k] = v
    refuse_inline_keys(merged)
    settings = check_settings({k: v for k, v in merged.items() if k in SETTING_KEYS}, f"agent '{name}'")
    if settings and not getattr(get_agent_class(name), "calls_model", False):
        raise AgentError(f"the {name} agent calls no model, so it takes no {', '.join(sorted(settings))} "
                         "(those are for agents that do: anthropic, openai, plugins built on LLMAgent)")
    return {**{k: v for k, v in merged.items() if k not in SETTING_KEYS}, **settings}
