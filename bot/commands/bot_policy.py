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

from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bot.agents.base import AgentError
from bot.agents.catalog import available as available_agents
from bot.agents.config import MAX_TOKENS_RANGE, TEMPERATURE_RANGE, TOP_P_RANGE, agent_config, check_base_url, check_settings
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


def _range(v: tuple[float, float], hard: tuple[float, float], what: str) -> tuple[float, float]:
    lo, hi = v
    if not hard[0] <= lo <= hi <= hard[1]:
        raise ValueError(f"{what} must be [low, high] within {list(hard)}, got {list(v)}")
    return v


class AgentSettings(_Strict):
    """One agent's settings on GitHub, and how far ``/optimize`` may move them.

    ``model``, ``base_url``, ``temperature``, ``max_tokens``, ``top_p``: what a campaign uses when the
    comment does not say (None: the provider's default). ``models``: the models ``/optimize model=``
    may name besides ``model``. ``endpoints``: base URLs by name, the only ones ``/optimize
    endpoint=NAME`` may choose; a comment never writes a URL (it could send the API key anywhere).
    ``temperature_range``, ``top_p_range``, ``max_tokens_limit``: the bounds for the comment's values.
    """

    model: str | None = None
    models: tuple[str, ...] = ()
    base_url: str | None = None
    endpoints: dict[str, str] = Field(default_factory=dict)
    temperature: float | None = None
    temperature_range: tuple[float, float] = (0.0, 1.0)
    max_tokens: int | None = None
    max_tokens_limit: int = Field(16384, ge=MAX_TOKENS_RANGE[0], le=MAX_TOKENS_RANGE[1])
    top_p: float | None = None
    top_p_range: tuple[float, float] = (0.0, 1.0)

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        try:
            return None if v is None else check_base_url(v)
        except AgentError as e:
            raise ValueError(str(e)) from None

    @field_validator("endpoints")
    @classmethod
    def _endpoints(cls, v: dict[str, str]) -> dict[str, str]:
        import re

        for name, url in v.items():
            if not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", name):
                raise ValueError(f"endpoint name {name!r}: lowercase letters, digits, _ -; at most 32")
            try:
                check_base_url(url, f"endpoints.{name}")
            except AgentError as e:
                raise ValueError(str(e)) from None
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "AgentSettings":
        _range(self.temperature_range, TEMPERATURE_RANGE, "temperature_range")
        _range(self.top_p_range, TOP_P_RANGE, "top_p_range")
        try:
            check_settings({"model": self.model, "temperature": self.temperature, "max_tokens": self.max_tokens,
                            "top_p": self.top_p}, "agent_settings")
            for m in self.models:
                check_settings({"model": m}, "agent_settings.models")
        except AgentError as e:
            raise ValueError(str(e)) from None
        if self.temperature is not None and not self.temperature_range[0] <= self.temperature <= self.temperature_range[1]:
            raise ValueError("temperature is outside temperature_range")
        if self.top_p is not None and not self.top_p_range[0] <= self.top_p <= self.top_p_range[1]:
            raise ValueError("top_p is outside top_p_range")
        if self.max_tokens is not None and self.max_tokens > self.max_tokens_limit:
            raise ValueError("max_tokens exceeds max_tokens_limit")
        return self

    def defaults(self) -> dict[str, Any]:
        return {"model": self.model, "base_url": self.base_url, "temperature": self.temperature,
                "max_tokens": self.max_tokens, "top_p": self.top_p}


# What /optimize may ask of an agent's settings: comment argument -> setting.
CHOICES = ("model", "endpoint", "temperature", "max_tokens", "top_p")


class OptimizeBounds(_Strict):
    max_candidates: int = Field(8, ge=1, le=64)
    default_candidates: int = Field(4, ge=1)
    max_rounds: int = Field(5, ge=1, le=100)
    default_rounds: int = Field(1, ge=1)
    agents: tuple[str, ...] = DEFAULT_AGENTS
    default_agent: str = DEFAULT_AGENT
    agent_settings: dict[str, AgentSettings] = Field(default_factory=dict)

    @field_validator("agents")
    @classmethod
    def _agents_known(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_known_agent(a) for a in v)

    @field_validator("agent_settings")
    @classmethod
    def _settings_for_model_agents(cls, v: dict[str, AgentSettings]) -> dict[str, AgentSettings]:
        for name, st in v.items():
            _known_agent(name)
            try:
                agent_config(name, st.defaults(), {"base_url": next(iter(st.endpoints.values()), None)},
                             {"model": st.models[0] if st.models else None})
            except AgentError as e:
                raise ValueError(f"agent_settings.{name}: {e}") from None
        return v

    def settings_for(self, agent: str) -> AgentSettings:
        return self.agent_settings.get(agent) or AgentSettings()

    def resolve_agent(self, agent: str, choice: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The agent config a campaign uses: the policy's settings for ``agent`` with the comment's
        ``choice`` (keys of ``CHOICES``) applied. Each value must lie within the policy's limits;
        ValueError with a sentence for the person who asked otherwise."""
        if agent not in self.agents:
            raise ValueError(f"agent `{agent}` is not enabled by the policy (enabled: {', '.join(self.agents)})")
        st = self.settings_for(agent)
        cfg = st.defaults()
        for key, value in (choice or {}).items():
            if value is None:
                continue
            if key == "model":
                allowed = tuple(dict.fromkeys(((st.model,) if st.model else ()) + st.models))
                if value not in allowed:
                    raise ValueError(f"model `{value}` is not allowed for the {agent} agent by the policy"
                                     + (f" (allowed: {', '.join(allowed)})" if allowed
                                        else " (it allows no choice of model: optimize.agent_settings)"))
                cfg["model"] = value
            elif key == "endpoint":
                if value not in st.endpoints:
                    raise ValueError(f"endpoint `{value}` is not one the policy names for the {agent} agent"
                                     + (f" (named: {', '.join(st.endpoints)})" if st.endpoints else " (it names none)"))
                cfg["base_url"] = st.endpoints[value]
            elif key in ("temperature", "top_p"):
                lo, hi = st.temperature_range if key == "temperature" else st.top_p_range
                if not lo <= float(value) <= hi or (key == "top_p" and float(value) == 0.0):
                    raise ValueError(f"{key} {value} is outside the policy's range [{lo}, {hi}] for the {agent} agent")
                cfg[key] = float(value)
            elif key == "max_tokens":
                if not 1 <= int(value) <= st.max_tokens_limit:
                    raise ValueError(f"max_tokens {value} is above the policy's limit of {st.max_tokens_limit} for the {agent} agent")
                cfg["max_tokens"] = int(value)
            else:
                raise ValueError(f"unknown agent setting `{key}` (known: {', '.join(CHOICES)})")
        try:
            return agent_config(agent, cfg)
        except AgentError as e:
            raise ValueError(str(e)) from None

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
