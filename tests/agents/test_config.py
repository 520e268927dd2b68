from __future__ import annotations

import pytest

from bot.agents import AgentError, build_agent, load_config_file
from bot.agents.offline import OfflineAgent
from bot.controller import load_campaign_config

YAML = """
agent:
  name: openai
  model: gpt-5-mini
  base_url: http://127.0.0.1:9/v1
  stream: true
  max_tokens: 4096
search:
  c_uct: 0.8
budget:
  max_candidates: 12
  max_cost_usd: 2.5
proposals_per_step: 2
"""


def test_campaign_config_from_yaml_and_toml(tmp_path):
    (tmp_path / "c.yaml").write_text(YAML)
    cfg, agent = load_campaign_config(tmp_path / "c.yaml")
    assert cfg.search.c_uct == 0.8 and cfg.budget.max_candidates == 12 and cfg.proposals_per_step == 2
    assert agent["name"] == "openai"
    a = build_agent(load_config_file(tmp_path / "c.yaml"))
    assert a.model == "gpt-5-mini" and a.stream and a.max_tokens == 4096
    (tmp_path / "c.toml").write_text('[agent]\nname = "offline"\n[budget]\nmax_steps = 3\n')
    cfg, agent = load_campaign_config(tmp_path / "c.toml")
    assert cfg.budget.max_steps == 3 and isinstance(build_agent({"agent": agent}), OfflineAgent)


def test_config_errors(tmp_path):
    with pytest.raises(AgentError, match="no such config file"):
        load_config_file(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("agent: [unclosed")
    with pytest.raises(AgentError, match="cannot parse"):
        load_config_file(tmp_path / "bad.yaml")
    with pytest.raises(AgentError, match="'agent' section"):
        build_agent({"budget": {}})
    with pytest.raises(AgentError, match="environment only"):
        build_agent({"agent": {"name": "anthropic", "model": "claude-haiku-4-5", "api_key": "sk-x"}})
    with pytest.raises(ValueError, match="unknown campaign settings"):
        load_campaign_config({"budjet": {}})


def test_provider_defaults_need_no_config():
    from bot.agents import create_agent

    assert create_agent("anthropic").model == "claude-opus-4-5"
    assert create_agent("openai").model == "gpt-5"
