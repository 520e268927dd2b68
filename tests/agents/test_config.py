from __future__ import annotations

import pytest

from bot.agents import AgentError, build_agent, load_config_file
from bot.agents.providers.offline import OfflineAgent
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


def test_composite_agent_tunes_first_then_asks_the_model(rmsnorm_def, monkeypatch):
    from bot.agents import AgentContext, Mode, create_agent
    from bot.agents.base import Agent, Proposal
    from bot.agents.catalog import _REGISTRY
    from bot.agents.providers.offline import load_seeds

    asked = []

    class Writer(Agent):
        def __init__(self, config=None):
            pass

        def propose(self, ctx, n):
            asked.append((ctx.mode, n))
            sol = ctx.parent.model_copy(update={"name": "written"}) if ctx.parent else load_seeds("rmsnorm_h4096")[0]
            return [Proposal(solution=sol, rationale="model wrote this", agent="writer")]

    monkeypatch.setitem(_REGISTRY, "writer", Writer)
    agent = create_agent("composite", {"agents": [{"name": "offline", "use_seeds": False},
                                                   {"name": "writer", "modes": ["optimize", "initial"]}]})
    parent = [s for s in load_seeds("rmsnorm_h4096") if s.name.endswith("single_pass")][0]
    ctx = AgentContext(definition=rmsnorm_def, mode=Mode.OPTIMIZE, parent=parent)
    ps = agent.propose(ctx, 3)
    assert [p.agent for p in ps] == ["offline"] * 3 and asked == []
    for _ in range(30):  # the 23 other configurations of the seed, then the model
        ps = agent.propose(ctx, 3)
        if any(p.agent == "writer" for p in ps):
            break
    assert asked and asked[0][0] is Mode.OPTIMIZE
    # Debug mode: the writer is not a member for it, and the tuner has tried every configuration.
    n_asked = len(asked)
    assert agent.propose(AgentContext(definition=rmsnorm_def, mode=Mode.DEBUG, parent=parent), 2) == []
    assert len(asked) == n_asked
    with pytest.raises(AgentError, match="needs 'agents'"):
        create_agent("composite", {})
    with pytest.raises(AgentError, match="modes"):
        create_agent("composite", {"agents": [{"name": "offline", "modes": ["fix"]}]})
    assert agent.describe()["members"][1]["modes"] == ["initial", "optimize"]
