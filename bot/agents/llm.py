"""What every model-backed agent shares: prompts, retries, accounting, extraction, the repair turn.

A provider module subclasses ``LLMAgent`` and implements ``_complete`` (one HTTP attempt: text and
token counts, or ``Retryable`` for 429/5xx/timeouts). This class does the rest:

- ``n`` candidates = ``n`` calls, each prompt numbered and told what the earlier ones did, so the
  prompts (and their hashes) differ;
- retries with exponential backoff (base * 2**attempt, capped, with deterministic jitter), waiting
  what ``retry-after`` / ``retry-after-ms`` says when the server says it;
- every call (repair turns included) recorded with hashes, tokens, cost, latency and the full text;
- malformed output gets exactly one repair turn that tells the model what was wrong; if that fails
  too, the proposal is a failure with the reason (the controller records a failed node).

A provider that stays unreachable after all retries raises AgentError: that is an outage, not a bad
candidate, and must not be recorded in the tree as one.
"""

from __future__ import annotations

import abc
import email.utils
import hashlib
import os
import random
import time
from dataclasses import dataclass
from typing import Any, Callable

from .base import Agent, AgentContext, AgentError, Proposal
from .calllog import CallRecord, now_iso, prompt_hash, text_hash
from .config import load_prices, price_for, refuse_inline_keys
from .extract import ExtractionError, build_solution
from .prompts import PromptBuilder


@dataclass
class Completion:
    text: str
    tokens_in: int
    tokens_out: int
    stop_reason: str | None = None


class Retryable(Exception):
    """A transient failure of one attempt (429, 5xx, timeout, connection reset)."""

    def __init__(self, message: str, retry_after: float | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        pass
    try:
        dt = email.utils.parsedate_to_datetime(ra)
        return max(0.0, dt.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def place_params(create: Callable[..., Any], req: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Put model parameters into a request: those the SDK's ``create`` names become arguments, the rest
    (API fields newer than the installed SDK) travel in ``extra_body``."""
    import inspect

    known = set(inspect.signature(create).parameters)
    req.update({k: v for k, v in extra.items() if k in known})
    body = {k: v for k, v in extra.items() if k not in known}
    if body:
        req["extra_body"] = body
    return req


class LLMAgent(Agent):
    """Config (dict): model (default: the provider's default_model), max_tokens (8192), temperature, params (extra request
    fields), top_p (sent as a request field), timeout_s (600), max_attempts (6), backoff_base_s (2), backoff_max_s (60), stream (false),
    base_url, api_key_env, prices (overrides), allow_unpriced (false)."""

    provider = "llm"
    calls_model = True
    default_key_env = ""
    default_model: str | None = None  # used when the config names none (a priced model)

    def __init__(
        self,
        config: dict[str, Any] | None = None,
        *,
        prompts: PromptBuilder | None = None,
        sleep: Callable[[float], None] = time.sleep,
        **kw: Any,
    ) -> None:
        cfg = {**(config or {}), **kw}
        refuse_inline_keys(cfg)
        cfg.setdefault("model", self.default_model)
        if not cfg.get("model"):
            raise AgentError(f"{self.provider} agent: config needs 'model'")
        self._model = str(cfg["model"])
        self.max_tokens = int(cfg.get("max_tokens", 8192))
        self.temperature = cfg.get("temperature")
        self.params = dict(cfg.get("params") or {})
        if cfg.get("top_p") is not None:
            self.params["top_p"] = float(cfg["top_p"])
        self.timeout_s = float(cfg.get("timeout_s", 600))
        self.max_attempts = int(cfg.get("max_attempts", 6))
        self.backoff_base_s = float(cfg.get("backoff_base_s", 2.0))
        self.backoff_max_s = float(cfg.get("backoff_max_s", 60.0))
        self.stream = bool(cfg.get("stream", False))
        self.base_url = cfg.get("base_url")
        self.api_key_env = cfg.get("api_key_env", self.default_key_env)
        self.prompts = prompts or PromptBuilder(**{k: cfg[k] for k in ("prompts_dir", "operators_dir") if k in cfg})
        self.sleep = sleep
        self.price = self._price(cfg)
        if self.max_attempts < 1:
            raise AgentError("max_attempts must be >= 1")

    # -- configuration -----------------------------------------------------------------------------
    @property
    def model(self) -> str:
        return self._model

    def _price(self, cfg: dict[str, Any]) -> dict[str, float] | None:
        prices = load_prices(self.provider, cfg.get("prices"))
        p = price_for(prices, self._model)
        if p is None and not cfg.get("allow_unpriced", False):
            raise AgentError(
                f"no price for {self.provider} model '{self._model}': add it under 'prices' in the agent config "
                "(input/output USD per million tokens) or set allow_unpriced: true (cost budgets then ignore it)"
            )
        return p

    def api_key(self) -> str:
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        if not key:
            raise AgentError(f"{self.provider} agent: set the API key in the environment variable {self.api_key_env}")
        return key

    def cost(self, tokens_in: int, tokens_out: int) -> float | None:
        if self.price is None:
            return None
        return (tokens_in * self.price["input"] + tokens_out * self.price["output"]) / 1e6

    def describe(self) -> dict[str, Any]:
        return {"agent": self.name, "provider": self.provider, "model": self._model, "stream": self.stream,
                "base_url": self.base_url, "temperature": self.temperature, "max_tokens": self.max_tokens,
                "top_p": self.params.get("top_p")}

    # -- one provider attempt ----------------------------------------------------------------------
    @abc.abstractmethod
    def _complete(self, system: str, messages: list[dict[str, str]]) -> Completion:
        """One attempt; raise Retryable for transient errors, AgentError for permanent ones."""

    # -- the call with retries and the record -------------------------------------------------------
    def call(self, system: str, messages: list[dict[str, str]], ctx: AgentContext | None, purpose: str) -> CallRecord:
        ph = prompt_hash(system, messages)
        started, t0 = now_iso(), time.monotonic()
        attempts = 0
        last: Exception | None = None
        comp: Completion | None = None
        jitter = random.Random(int(hashlib.sha256(ph.encode()).hexdigest()[:8], 16))
        while attempts < self.max_attempts:
            attempts += 1
            try:
                comp = self._complete(system, messages)
                break
            except Retryable as e:
                last = e
                if attempts >= self.max_attempts:
                    break
                if e.retry_after is not None:
                    wait = min(e.retry_after, self.backoff_max_s)
                else:
                    wait = min(self.backoff_base_s * 2 ** (attempts - 1), self.backoff_max_s) * (0.5 + jitter.random() / 2)
                self.sleep(wait)
            except AgentError as e:
                last = e
                break
        rec = CallRecord(
            provider=self.provider,
            model=self._model,
            prompt_hash=ph,
            system=system,
            messages=messages,
            response=comp.text if comp else None,
            response_hash=text_hash(comp.text) if comp else None,
            tokens_in=comp.tokens_in if comp else 0,
            tokens_out=comp.tokens_out if comp else 0,
            cost_usd=self.cost(comp.tokens_in, comp.tokens_out) if comp else 0.0,
            latency_s=round(time.monotonic() - t0, 4),
            started=started,
            finished=now_iso(),
            attempts=attempts,
            stream=self.stream,
            purpose=purpose,
            error=None if comp else f"{type(last).__name__}: {last}",
            extra={"stop_reason": comp.stop_reason} if comp and comp.stop_reason else {},
        )
        if ctx is not None and ctx.call_log is not None:
            ctx.call_log.append(rec)
        if comp is None:
            raise AgentError(f"{self.provider} call failed after {attempts} attempt(s): {last}")
        return rec

    # -- Agent -------------------------------------------------------------------------------------
    def propose(self, ctx: AgentContext, n: int) -> list[Proposal]:
        out: list[Proposal] = []
        for i in range(n):
            system, messages = self.prompts.render(ctx, index=i, n=n, previous=[p.rationale[:200] for p in out if p.rationale])
            rec = self.call(system, messages, ctx, "propose")
            calls = [rec]
            name = self._name(ctx, rec.prompt_hash)
            try:
                sol, why = build_solution(rec.response or "", ctx, name, self._author())
            except ExtractionError as first:
                repair = messages + [
                    {"role": "assistant", "content": rec.response or ""},
                    {"role": "user", "content": self.prompts.repair(str(first), ctx)},
                ]
                rec2 = self.call(system, repair, ctx, "repair")
                calls.append(rec2)
                try:
                    sol, why = build_solution(rec2.response or "", ctx, name, self._author())
                except ExtractionError as second:
                    out.append(Proposal(solution=None, rationale="", calls=calls, agent=self.name, model=self._model,
                                        failure=f"malformed output after one repair turn: {second} (first reply: {first})"))
                    continue
            out.append(Proposal(solution=sol, rationale=why, calls=calls, agent=self.name, model=self._model))
        return out

    def _name(self, ctx: AgentContext, ph: str) -> str:
        return f"{ctx.definition.name}_{self.provider}_{ph[:8]}"

    def _author(self) -> str:
        return f"kbot/{self.provider}:{self._model}"
