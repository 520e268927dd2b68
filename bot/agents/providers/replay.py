"""Answer from a call log instead of a model: a campaign re-run offline, deterministically.

The replay agent renders the same prompts as the original agent (same templates, same context), hashes
them, and returns the response recorded for that hash (in recorded order when a prompt was asked more
than once). Extraction and the repair turn run exactly as they did. A prompt the log never saw is an
AgentError naming the hash: the run has diverged from the recording.
"""

from __future__ import annotations

from collections import defaultdict, deque
from pathlib import Path
from typing import Any

from ..base import AgentError
from ..calllog import CallLog, CallRecord
from ..catalog import register
from ..llm import Completion, LLMAgent


@register("replay")
class ReplayAgent(LLMAgent):
    """Config: ``log`` (path of a calls.jsonl), optional ``model`` (default: the recorded one)."""

    provider = "replay"

    def __init__(self, config: dict[str, Any] | None = None, *, prompts: Any = None, **kw: Any) -> None:
        cfg = {**(config or {}), **kw}
        if not cfg.get("log"):
            raise AgentError("replay agent: config needs 'log' (a calls.jsonl from an earlier campaign)")
        path = Path(cfg["log"])
        if not path.exists():
            raise AgentError(f"replay agent: {path} does not exist")
        self._answers: dict[str, deque[CallRecord]] = defaultdict(deque)
        recorded_model = None
        for rec in CallLog(path):
            if rec.response is not None:
                self._answers[rec.prompt_hash].append(rec)
                recorded_model = recorded_model or rec.model
        cfg.setdefault("model", recorded_model or "replay")
        cfg["allow_unpriced"] = True
        cfg["max_attempts"] = 1
        super().__init__(cfg, prompts=prompts)
        self.recorded_provider: str | None = None

    def api_key(self) -> str:  # no network, no key
        return ""

    def cost(self, tokens_in: int, tokens_out: int) -> float | None:
        return self._last_cost

    _last_cost: float | None = 0.0

    # The kernel is named and signed as the recorded provider named it, so a replay yields the very
    # solutions (same content hashes, same nodes, same branches) the recorded campaign did.
    def _name(self, ctx: Any, ph: str) -> str:
        return f"{ctx.definition.name}_{self.recorded_provider or self.provider}_{ph[:8]}"

    def _author(self) -> str:
        return f"kbot/{self.recorded_provider or self.provider}:{self._model}"

    def _complete(self, system: str, messages: list[dict[str, str]]) -> Completion:
        from ..calllog import prompt_hash

        ph = prompt_hash(system, messages)
        q = self._answers.get(ph)
        if not q:
            raise AgentError(f"replay: no recorded answer for prompt {ph[:16]}… (the run diverged from the log)")
        rec = q.popleft() if len(q) > 1 else q[0]
        # Recorded tokens and cost are kept so budgets stop a replay where they stopped the original.
        self._last_cost = rec.cost_usd
        self.recorded_provider = rec.provider
        return Completion(rec.response or "", rec.tokens_in, rec.tokens_out, rec.extra.get("stop_reason"))
