"""The command policy file: the shipped example equals the built-in defaults; mistakes are errors."""

from __future__ import annotations

import pytest
from policykit import example_policy

from bot.commands.bot_policy import BotPolicy, load_policy_text
from bot.policy_file import PolicyError


def test_example_equals_defaults():
    assert example_policy() == BotPolicy() == load_policy_text(None)


@pytest.mark.parametrize("text,needle", [
    ("enabled: maybe\n", "enabled"),
    ("commands:\n  optimise: {permission: write}\n", "unknown command"),
    ("commands:\n  promote: {permission: owner}\n", "permission"),
    ("commands:\n  promote: {permission: admin, teams: [justaname]}\n", "org/team-slug"),
    ("rate_limit: {per_command: {optimize: 0}}\n", "must be >= 1"),
    ("optimize: {max_candidates: 2, default_candidates: 4}\n", "exceeds"),
    ("optimize: {agents: [offline], default_agent: openai}\n", "default_agent"),
    ("surprise: 1\n", "surprise"),
    ("[1, 2]\n", "mapping"),
    ("a: [\n", "not valid YAML"),
])
def test_bad_policies(text, needle):
    with pytest.raises(PolicyError, match=needle):
        BotPolicy.from_yaml(text)


def test_unlisted_commands_keep_safe_defaults():
    p = BotPolicy.from_yaml("commands:\n  optimize: {permission: admin}\n")
    assert p.rule("optimize").permission == "admin"
    assert p.rule("promote").permission == "maintain" and p.rule("help").permission == "none"
