"""The command policy (`skills/bot-policy.yaml`): who may run what, rate limits, the kill switch.

The bot reads the policy from the repository's default branch at the time of each command, never from
a pull request's head: a PR must not be able to grant itself rights. A policy that does not parse fails
closed (every command refused with the reason), because a typo must not silently open the bot up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bot.policy_file import PolicyError, parse_policy

POLICY_PATH = "skills/bot-policy.yaml"
REPO_ROOT = Path(__file__).resolve().parents[1]

# Repository roles in increasing order of rights (the same order as bot.forge.Permission).
ROLES = ("none", "read", "triage", "write", "maintain", "admin")
Role = Literal["none", "read", "triage", "write", "maintain", "admin"]
COMMAND_NAMES = ("help", "status", "optimize", "evaluate", "profile", "promote", "stop")
AGENTS = ("offline", "anthropic", "openai")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CommandRule(_Strict):
    permission: Role = "write"
    teams: tuple[str, ...] = ()

    @field_validator("teams")
    @classmethod
    def _team_slugs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for t in v:
            org, _, slug = t.partition("/")
            if not org or not slug or "/" in slug:
                raise ValueError(f"team {t!r} must be written org/team-slug")
        return v


class RateLimit(_Strict):
    window_seconds: int = Field(3600, ge=1, le=7 * 86400)
    max_commands: int = Field(20, ge=1, le=10_000)
    per_command: dict[str, int] = Field(default_factory=lambda: {"optimize": 4, "evaluate": 10, "profile": 10})

    @field_validator("per_command")
    @classmethod
    def _known(cls, v: dict[str, int]) -> dict[str, int]:
        for name, n in v.items():
            if name not in COMMAND_NAMES:
                raise ValueError(f"rate_limit.per_command: unknown command {name!r}")
            if n < 1:
                raise ValueError(f"rate_limit.per_command.{name} must be >= 1")
        return v


class OptimizeBounds(_Strict):
    max_candidates: int = Field(8, ge=1, le=64)
    default_candidates: int = Field(4, ge=1)
    max_rounds: int = Field(5, ge=1, le=100)
    default_rounds: int = Field(1, ge=1)
    agents: tuple[Literal["offline", "anthropic", "openai"], ...] = AGENTS
    default_agent: Literal["offline", "anthropic", "openai"] = "offline"

    @model_validator(mode="after")
    def _defaults_in_bounds(self) -> "OptimizeBounds":
        if self.default_candidates > self.max_candidates:
            raise ValueError("optimize.default_candidates exceeds max_candidates")
        if self.default_rounds > self.max_rounds:
            raise ValueError("optimize.default_rounds exceeds max_rounds")
        if self.default_agent not in self.agents:
            raise ValueError("optimize.default_agent is not in optimize.agents")
        return self


def _default_commands() -> dict[str, CommandRule]:
    return {
        "help": CommandRule(permission="none"),
        "status": CommandRule(permission="read"),
        "optimize": CommandRule(permission="write"),
        "evaluate": CommandRule(permission="write"),
        "profile": CommandRule(permission="write"),
        "promote": CommandRule(permission="maintain"),
        "stop": CommandRule(permission="maintain"),
    }


class BotPolicy(_Strict):
    version: Literal[1] = 1
    enabled: bool = True
    kill_switch_file: str | None = ".kbot/STOP"
    kill_switch_label: str | None = "kbot:stop"
    ignore_logins: tuple[str, ...] = ("kbot[bot]",)
    commands: dict[str, CommandRule] = Field(default_factory=_default_commands)
    rate_limit: RateLimit = Field(default_factory=RateLimit)
    optimize: OptimizeBounds = Field(default_factory=OptimizeBounds)

    @field_validator("commands")
    @classmethod
    def _all_known(cls, v: dict[str, CommandRule]) -> dict[str, CommandRule]:
        unknown = sorted(set(v) - set(COMMAND_NAMES))
        if unknown:
            raise ValueError(f"unknown command(s) {unknown}; known: {list(COMMAND_NAMES)}")
        # A command the file does not mention keeps its safe default rather than becoming open.
        merged = _default_commands()
        merged.update(v)
        return merged

    def rule(self, command: str) -> CommandRule:
        return self.commands[command]

    @classmethod
    def from_yaml(cls, text: str, where: str = POLICY_PATH) -> "BotPolicy":
        return parse_policy(cls, text, where)


def load_policy_text(text: str | None, where: str = POLICY_PATH) -> BotPolicy:
    """The policy from file text; no file (None) means the built-in defaults (same as the example)."""
    if text is None:
        return BotPolicy()
    return BotPolicy.from_yaml(text, where)


def example_policy() -> BotPolicy:
    """The example policy shipped in this repository (tests and the docs use it)."""
    return BotPolicy.from_yaml((REPO_ROOT / POLICY_PATH).read_text(), str(POLICY_PATH))
