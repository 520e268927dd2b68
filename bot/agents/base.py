"""The one interface every agent implements: context in, candidate solutions plus rationale out.

An agent never evaluates anything and never decides where to search; the controller does both. What an
agent returns is a list of ``Proposal``: a ``harness.schema.Solution`` (or ``None`` with the reason when
the agent could not produce one, e.g. model output that stayed malformed after the repair turn), a
rationale, the configuration key when the agent knows one (offline agent), and the records of every
model call it made.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from harness.report import FeedbackItem
from harness.schema import Definition, Solution, Workload

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .calllog import CallLog, CallRecord


class Mode(str, Enum):
    """What the agent is asked to do, which selects the prompt template."""

    INITIAL = "initial"  # no parent kernel: write one from the definition
    DEBUG = "debug"  # the parent failed to build or was incorrect: fix it
    OPTIMIZE = "optimize"  # the parent passed: make it faster, guided by feedback


class AgentError(RuntimeError):
    """An agent could not run at all (bad configuration, no key, provider gone after all retries)."""


@dataclass
class StructuredError:
    """The error of a failed parent, as the harness reports it (build errors have file and line)."""

    message: str
    file: str | None = None
    line: int | None = None
    status: str | None = None  # harness Status value, e.g. COMPILE_ERROR

    def to_dict(self) -> dict[str, Any]:
        return {"message": self.message, "file": self.file, "line": self.line, "status": self.status}


@dataclass
class AgentContext:
    """Everything an agent may use to write candidates for one node of the search tree."""

    definition: Definition
    mode: Mode
    parent: Solution | None = None
    parent_node: str | None = None  # node id in the search tree
    parent_summary: dict[str, Any] | None = None  # the node's report summary (controller's compact form)
    feedback: list[FeedbackItem] = field(default_factory=list)
    error: StructuredError | None = None
    workloads: list[Workload] = field(default_factory=list)
    memory: Any = None  # bot.controller.memory.SearchMemory (typed loosely to keep agents importable alone)
    call_log: "CallLog | None" = None  # where every model call is persisted (campaign dir)
    seed: int = 0  # for agents that randomize: same seed, same proposals

    def regimes(self) -> dict[str, dict[str, Any]]:
        """Per variable axis: min, max and the distinct values the workloads use (a short prompt view)."""
        out: dict[str, dict[str, Any]] = {}
        for ax in self.definition.var_axes:
            vals = sorted({w.axes[ax] for w in self.workloads if ax in w.axes})
            if vals:
                shown = vals if len(vals) <= 12 else vals[:6] + ["..."] + vals[-5:]
                out[ax] = {"min": vals[0], "max": vals[-1], "count": len(vals), "values": shown}
        return out


@dataclass
class Proposal:
    """One candidate from an agent: a solution, or the reason there is none."""

    solution: Solution | None
    rationale: str = ""
    calls: list["CallRecord"] = field(default_factory=list)
    config_key: str | None = None  # the agent's own identity for the configuration, when it has one
    failure: str | None = None  # set when solution is None
    agent: str = ""
    model: str | None = None

    def __post_init__(self) -> None:
        if self.solution is None and not self.failure:
            raise ValueError("a Proposal without a solution must say why (failure)")

    @property
    def ok(self) -> bool:
        return self.solution is not None

    @property
    def prompt_hash(self) -> str | None:
        """Hash of the prompt of the first call that produced this proposal (None for offline agents)."""
        return self.calls[0].prompt_hash if self.calls else None

    @property
    def tokens(self) -> tuple[int, int]:
        return (sum(c.tokens_in for c in self.calls), sum(c.tokens_out for c in self.calls))

    @property
    def cost_usd(self) -> float:
        return sum(c.cost_usd or 0.0 for c in self.calls)


class Agent(abc.ABC):
    """Base class of all agents. Subclasses register themselves by name (see registry.py)."""

    name: str = "agent"
    # True for agents that call a model: only they take a model, base URL and sampling settings
    # (bot.agents.config.agent_config refuses them for the others).
    calls_model: bool = False

    @abc.abstractmethod
    def propose(self, ctx: AgentContext, n: int) -> list[Proposal]:
        """Up to ``n`` candidates for ``ctx``; fewer (even none) when the agent has nothing new to offer."""

    @property
    def model(self) -> str | None:
        return None

    def describe(self) -> dict[str, Any]:
        """What to record about this agent in campaign metadata (never secrets)."""
        return {"agent": self.name, "model": self.model}
