"""The bot policy (`skills/bot-policy.yaml`): who may run what, rate limits, /optimize bounds, the kill switch.

The bot reads the policy from the repository's default branch at the time of each command, never from
a pull request's head: a PR must not be able to grant itself rights. A policy that does not parse fails
closed (every command refused with the reason), because a typo must not silently open the bot up.

The policy names commands and agents, and validates them against the one list of each: the commands
registered in ``bot.commands`` (``bot.commands.spec.specs``, where each command also says its default
permission and rate limit) and the agents the catalog offers (``bot.agents.catalog.available``, plugins
included). Handlers that are not commands (events, results, later rounds) ask ``paused`` first.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bot.agents.catalog import available as available_agents
from bot.commands.spec import Role, specs
from bot.forge.base import Forge, ForgeError
from bot.names import KILL_SWITCH_LABEL
from bot.policy_file import PolicyError, parse_policy

POLICY_PATH = "skills/bot-policy.yaml"
# The agents /optimize may name when the policy file does not say (the example file lists the same).
DEFAULT_AGENTS = ("offline", "anthropic", "openai")
DEFAULT_AGENT = "offline"


def _known_agent(name: str) -> str:
    known = available_agents()
    if name not in known:
        raise ValueError(f"unknown agent {name!r}; known: {', '.join(known)}")
    return name


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
    # default: each command's own ``rate_limit`` (bot.commands.<name>.SPEC)
    per_command: dict[str, int] = Field(default_factory=lambda: {n: s.rate_limit for n, s in specs().items() if s.rate_limit})
    # Writes the bot makes answering one account per window (its reactions and replies: /help and
    # parse-error replies included). An account with `write` or more may have every comment its
    # max_commands allow answered; past the budget the bot reads and writes nothing.
    max_writes: int = Field(9, ge=0, le=10_000)
    # The least repository role an account needs for the bot to answer it at all.
    answer_min_permission: Role = "read"

    @field_validator("per_command")
    @classmethod
    def _known(cls, v: dict[str, int]) -> dict[str, int]:
        for name, n in v.items():
            if name not in specs():
                raise ValueError(f"rate_limit.per_command: unknown command {name!r}")
            if n < 1:
                raise ValueError(f"rate_limit.per_command.{name} must be >= 1")
        return v


class OptimizeBounds(_Strict):
    max_candidates: int = Field(8, ge=1, le=64)
    default_candidates: int = Field(4, ge=1)
    max_rounds: int = Field(5, ge=1, le=100)
    default_rounds: int = Field(1, ge=1)
    agents: tuple[str, ...] = DEFAULT_AGENTS
    default_agent: str = DEFAULT_AGENT

    @field_validator("agents")
    @classmethod
    def _agents_known(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_known_agent(a) for a in v)

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
    """Every registered command with the permission its spec asks for by default."""
    return {name: CommandRule(permission=spec.permission) for name, spec in specs().items()}


class BotPolicy(_Strict):
    version: Literal[1] = 1
    enabled: bool = True
    kill_switch_file: str | None = ".kbot/STOP"
    kill_switch_label: str | None = KILL_SWITCH_LABEL
    ignore_logins: tuple[str, ...] = ("kbot[bot]",)
    commands: dict[str, CommandRule] = Field(default_factory=_default_commands)
    rate_limit: RateLimit = Field(default_factory=RateLimit)
    optimize: OptimizeBounds = Field(default_factory=OptimizeBounds)

    @field_validator("commands")
    @classmethod
    def _all_known(cls, v: dict[str, CommandRule]) -> dict[str, CommandRule]:
        known = list(specs())
        unknown = sorted(set(v) - set(known))
        if unknown:
            raise ValueError(f"unknown command(s) {unknown}; known: {known}")
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


def load_policy(forge: Forge) -> BotPolicy:
    """The policy from the default branch (built-in defaults when the file is absent).

    Raises PolicyError when the file exists but is invalid; callers refuse every command then.
    """
    try:
        raw = forge.read_file(POLICY_PATH, ref=forge.default_branch())
    except ForgeError as e:
        raise PolicyError(f"could not read {POLICY_PATH} from the default branch: {e}") from None
    if raw is None:
        return load_policy_text(None)
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
    except UnicodeDecodeError:
        raise PolicyError(f"{POLICY_PATH}: not UTF-8") from None
    return load_policy_text(text)


def kill_switch(forge: Forge, policy: BotPolicy, labels: tuple[str, ...] | list[str] = ()) -> str | None:
    """Why the bot is paused, or None. Labels are those of the issue/PR the command came from."""
    if not policy.enabled:
        return f"the bot is disabled (`enabled: false` in {POLICY_PATH})"
    if policy.kill_switch_label and policy.kill_switch_label in labels:
        return f"the `{policy.kill_switch_label}` label is set on this thread"
    if policy.kill_switch_file:
        try:
            present = forge.read_file(policy.kill_switch_file, ref=forge.default_branch()) is not None
        except ForgeError:
            present = True  # cannot tell: stay paused rather than run unchecked
        if present:
            return f"`{policy.kill_switch_file}` exists on the default branch"
    return None


def paused(forge: Forge, labels: tuple[str, ...] | list[str] = ()) -> str | None:
    """Why the bot must not act now, for handlers that are not commands (events, results, rounds):
    the kill switch of the default branch's policy, or an invalid policy file (fail closed)."""
    try:
        policy = load_policy(forge)
    except PolicyError as e:
        return f"the policy file is invalid ({str(e).splitlines()[0]})"
    return kill_switch(forge, policy, labels)
