"""Claude through the official ``anthropic`` SDK (Messages API), streaming or not.

The SDK's own retries are switched off (``max_retries=0``) so that the one retry loop in llm.py
decides, counts and records every attempt.
"""

from __future__ import annotations

from typing import Any

from ..base import AgentError
from ..catalog import register
from ..llm import Completion, LLMAgent, Retryable, parse_retry_after, place_params


@register("anthropic")
class AnthropicAgent(LLMAgent):
    provider = "anthropic"
    default_key_env = "ANTHROPIC_API_KEY"
    default_model = "claude-opus-4-5"

    def __init__(self, config: dict[str, Any] | None = None, **kw: Any) -> None:
        super().__init__(config, **kw)
        self._client = None

    @property
    def client(self):
        if self._client is None:
            import anthropic

            self._client = anthropic.Anthropic(
                api_key=self.api_key(), base_url=self.base_url, timeout=self.timeout_s, max_retries=0
            )
        return self._client

    def _request(self, system: str, messages: list[dict[str, str]]) -> dict[str, Any]:
        req: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "system": system, "messages": messages}
        extra = dict(self.params)
        if self.temperature is not None:
            extra["temperature"] = self.temperature
        return place_params(self.client.messages.create, req, extra)

    def _complete(self, system: str, messages: list[dict[str, str]]) -> Completion:
        import anthropic

        try:
            req = self._request(system, messages)
            if not self.stream:
                msg = self.client.messages.create(**req)
                text = "".join(getattr(b, "text", "") for b in msg.content if getattr(b, "type", "") == "text")
                return Completion(text, msg.usage.input_tokens, msg.usage.output_tokens, msg.stop_reason)
            parts: list[str] = []
            t_in = t_out = 0
            stop = None
            with self.client.messages.create(stream=True, **req) as events:
                for ev in events:
                    if ev.type == "message_start":
                        t_in = ev.message.usage.input_tokens or 0
                        t_out = ev.message.usage.output_tokens or 0
                    elif ev.type == "content_block_delta" and getattr(ev.delta, "type", "") == "text_delta":
                        parts.append(ev.delta.text)
                    elif ev.type == "message_delta":
                        t_out = ev.usage.output_tokens or t_out
                        stop = ev.delta.stop_reason
            return Completion("".join(parts), t_in, t_out, stop)
        except anthropic.APIStatusError as e:
            code = e.status_code
            if code == 429 or code >= 500 or code in (408, 409):
                raise Retryable(f"HTTP {code}: {_short(e)}", parse_retry_after(e.response.headers), code) from None
            raise AgentError(f"anthropic HTTP {code}: {_short(e)}") from None
        except (anthropic.APITimeoutError, anthropic.APIConnectionError) as e:
            raise Retryable(f"{type(e).__name__}: {e}") from None


def _short(e: Exception) -> str:
    return str(e)[:500]
