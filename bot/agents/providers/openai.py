"""GPT (or any OpenAI-compatible gateway via ``base_url``) through the official ``openai`` SDK,
chat completions, streaming or not.

Config extras: ``max_tokens_param`` ("max_completion_tokens" by default, which current OpenAI models
require; many compatible gateways want "max_tokens"). The SDK's own retries are switched off
(``max_retries=0``) so that the retry loop in llm.py decides, counts and records every attempt.
"""

from __future__ import annotations

import time
from typing import Any

from ..base import AgentError
from ..catalog import register
from ..llm import Completion, LLMAgent, Retryable, parse_retry_after, place_params


@register("openai")
class OpenAIAgent(LLMAgent):
    provider = "openai"
    default_key_env = "OPENAI_API_KEY"
    default_model = "gpt-5"

    def __init__(self, config: dict[str, Any] | None = None, *, prompts: Any = None, sleep: Any = time.sleep, **kw: Any) -> None:
        cfg = {**(config or {}), **kw}
        self.max_tokens_param = cfg.pop("max_tokens_param", "max_completion_tokens")
        if self.max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise AgentError("max_tokens_param must be max_tokens or max_completion_tokens")
        super().__init__(cfg, prompts=prompts, sleep=sleep)
        self._client = None

    @property
    def client(self):
        if self._client is None:
            import openai

            self._client = openai.OpenAI(api_key=self.api_key(), base_url=self.base_url, timeout=self.timeout_s, max_retries=0)
        return self._client

    def _request(self, system: str, messages: list[dict[str, str]]) -> dict[str, Any]:
        req: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, *messages],
            self.max_tokens_param: self.max_tokens,
        }
        extra = dict(self.params)
        if self.temperature is not None:
            extra["temperature"] = self.temperature
        return place_params(self.client.chat.completions.create, req, extra)

    def _complete(self, system: str, messages: list[dict[str, str]]) -> Completion:
        import openai

        try:
            req = self._request(system, messages)
            if not self.stream:
                r = self.client.chat.completions.create(**req)
                if not r.choices:
                    raise AgentError("openai: response without choices")
                ch = r.choices[0]
                u = r.usage
                return Completion(ch.message.content or "", u.prompt_tokens if u else 0, u.completion_tokens if u else 0, ch.finish_reason)
            parts: list[str] = []
            t_in = t_out = 0
            stop = None
            stream = self.client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **req)
            with stream:
                for chunk in stream:
                    for ch in chunk.choices or []:
                        if ch.delta is not None and ch.delta.content:
                            parts.append(ch.delta.content)
                        if ch.finish_reason:
                            stop = ch.finish_reason
                    if chunk.usage is not None:
                        t_in, t_out = chunk.usage.prompt_tokens, chunk.usage.completion_tokens
            return Completion("".join(parts), t_in, t_out, stop)
        except openai.APIStatusError as e:
            code = e.status_code
            if code == 429 or code >= 500 or code in (408, 409):
                raise Retryable(f"HTTP {code}: {str(e)[:500]}", parse_retry_after(e.response.headers), code) from None
            raise AgentError(f"openai HTTP {code}: {str(e)[:500]}") from None
        except (openai.APITimeoutError, openai.APIConnectionError) as e:
            raise Retryable(f"{type(e).__name__}: {e}") from None
