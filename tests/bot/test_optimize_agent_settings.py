"""Agents you can choose: /optimize model=/endpoint=/temperature=/max_tokens=/top_p= within the limits
of the policy's optimize.agent_settings, a clear refusal outside them, and never a URL from a comment."""

from __future__ import annotations

import pytest
from eventkit import comment_event
from memforge import BOT, MemForge

from bot.commands.bot_policy import POLICY_PATH, BotPolicy
from bot.commands.dispatch import CommandDispatcher
from bot.commands.services import ForgeServices
from bot.forge.base import Permission
from bot.policy_file import PolicyError

DEF = "gdn_decode_qk4_v8_d128_k_last"
POLICY = """
version: 1
optimize:
  agents: [offline, anthropic]
  default_agent: offline
  agent_settings:
    anthropic:
      model: claude-sonnet-4-5
      models: [claude-haiku-4-5]
      endpoints: {proxy: "https://llm-proxy.internal.example/anthropic"}
      temperature: 0.2
      temperature_range: [0.0, 0.8]
      max_tokens_limit: 8192
"""


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, req):
        self.calls.append(req)
        return [101]


@pytest.fixture
def setup():
    forge = MemForge(files={POLICY_PATH: POLICY})
    forge.perms.update(alice=Permission.WRITE)
    rec = Recorder()
    return forge, rec, CommandDispatcher(forge, ForgeServices(forge, rec), None)


def say(shared, setup, body, cid=555):
    forge, rec, disp = setup
    out = disp.handle_issue_comment(comment_event(shared, body=body, comment_id=cid))
    reply = [c for c in forge.comments.get(1, []) if c.author == BOT][-1].body
    return out, reply


def test_settings_within_the_policy_reach_the_campaign(shared, setup):
    out, _ = say(shared, setup, f"/optimize {DEF} agent=anthropic model=claude-haiku-4-5 temperature=0.7 "
                                "max_tokens=4096 top_p=0.9 endpoint=proxy")
    assert out.status == "done", out
    (req,) = setup[1].calls
    assert req.agent == "anthropic"
    assert dict(req.agent_config) == {"model": "claude-haiku-4-5", "temperature": 0.7, "max_tokens": 4096, "top_p": 0.9,
                                      "base_url": "https://llm-proxy.internal.example/anthropic"}
    # what was asked is kept by name (endpoint, not its URL) for the later rounds
    assert dict(req.agent_choice) == {"model": "claude-haiku-4-5", "endpoint": "proxy", "temperature": 0.7,
                                      "max_tokens": 4096, "top_p": 0.9}


def test_policy_defaults_without_choices(shared, setup):
    out, _ = say(shared, setup, f"/optimize {DEF} --agent anthropic")
    assert out.status == "done"
    assert dict(setup[1].calls[0].agent_config) == {"model": "claude-sonnet-4-5", "temperature": 0.2}


@pytest.mark.parametrize("args,needle", [
    ("agent=anthropic model=claude-opus-4-1", "model `claude-opus-4-1` is not allowed for the anthropic agent"),
    ("agent=anthropic temperature=0.9", "outside the policy's range [0.0, 0.8]"),
    ("agent=anthropic max_tokens=9000", "above the policy's limit of 8192"),
    ("agent=anthropic endpoint=attacker", "endpoint `attacker` is not one the policy names"),
    ("temperature=0.5", "the offline agent calls no model"),
])
def test_outside_the_policy_is_refused(shared, setup, args, needle):
    out, reply = say(shared, setup, f"/optimize {DEF} {args}")
    assert out.status == "failed" and setup[1].calls == []
    assert needle in reply.replace("\\", ""), reply


@pytest.mark.parametrize("args,needle", [
    # a URL cannot even be written: '/' is outside the argument alphabet
    ("agent=anthropic base_url=https://evil.example/v1", "characters outside"),
    ("agent=anthropic endpoint=https://evil.example", "characters outside"),
    ("agent=anthropic endpoint=evil.example:443", "is not valid"),
    ("agent=anthropic base-url=http:evil", "unknown option"),
    ("temperature=3", "between 0 and 2"),
    ("temperature=hot", "decimal number"),
    ("max_tokens=0", "between 1 and 1000000"),
])
def test_hostile_or_malformed_values_are_parse_errors(shared, setup, args, needle):
    out, reply = say(shared, setup, f"/optimize {DEF} {args}")
    assert setup[1].calls == [] and out.status != "done"
    assert needle in reply, reply


def test_policy_file_limits_are_checked():
    bad = [
        ("temperature_range: [0.0, 3.0]", "temperature_range"),
        ("endpoints: {proxy: 'ftp://x'}", "http:// or https://"),
        ("endpoints: {proxy: 'https://user:pw@x.example'}", "no user or password"),
        ("max_tokens: 9000\n      max_tokens_limit: 8192", "max_tokens exceeds"),
    ]
    for text, needle in bad:
        y = f"version: 1\noptimize:\n  agent_settings:\n    anthropic:\n      {text}\n"
        with pytest.raises(PolicyError, match=needle.replace("(", r"\(").replace("[", r"\[")):
            BotPolicy.from_yaml(y)
    with pytest.raises(PolicyError, match="calls no model"):
        BotPolicy.from_yaml("version: 1\noptimize:\n  agent_settings:\n    offline: {model: x}\n")
