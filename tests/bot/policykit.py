"""The example policy shipped in this repository (skills/bot-policy.yaml), as the tests read it."""

from __future__ import annotations

from bot.commands.bot_policy import POLICY_PATH, BotPolicy
from harness.paths import shipped


def example_policy() -> BotPolicy:
    return BotPolicy.from_yaml((shipped() / POLICY_PATH).read_text(), str(POLICY_PATH))
