"""Local HTTP servers that speak the Anthropic Messages API and the OpenAI Chat Completions API.

Driven only through the official SDKs (``anthropic.Anthropic(base_url=...)``,
``openai.OpenAI(base_url=.../v1)``). Each server runs ``http.server`` in a thread on 127.0.0.1 with a
random port, records every request (path, headers without the key, JSON body) and answers from a
script: a queue of behaviours (a reply text, an HTTP error with optional ``retry-after``). When the
queue is empty it answers with ``default_text``. Streaming follows each provider's wire format:

- Anthropic: server-sent events ``message_start``, ``content_block_start``, ``content_block_delta``
  (``text_delta``), ``content_block_stop``, ``message_delta`` (usage.output_tokens), ``message_stop``;
- OpenAI: ``data: {chat.completion.chunk}`` lines, a final chunk with ``usage`` when
  ``stream_options.include_usage`` is set, then ``data: [DONE]``.

Requests are validated the way the real APIs do for the fields we use (required fields, roles, types)
and answered with the providers' error shapes; a fake that accepts what the real API refuses would hide
bugs. Token counts are deterministic: words in the request's texts / words in the reply.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator


@dataclass
class Reply:
    text: str
    tokens_in: int | None = None  # default: words in the prompt
    tokens_out: int | None = None  # default: words in the reply
    chunk: int = 7  # characters per streamed delta


@dataclass
class Fail:
    status: int
    message: str = "scripted failure"
    retry_after: str | None = None  # header value, e.g. "0" or "1.5"
    retry_after_ms: str | None = None


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float = field(default_factory=time.monotonic)


def _words(s: str) -> int:
    return len(s.split())


class _FakeServer:
    kind = "base"

    def __init__(self, default_text: str = "ok") -> None:
        self.script: deque[Reply | Fail] = deque()
        self.requests: list[Seen] = []
        self.default_text = default_text
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802
                outer._handle(self)

            def do_GET(self) -> None:  # noqa: N802
                outer._send_json(self, 404, outer._error_body(404, f"no route GET {self.path}"))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    # -- lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> "_FakeServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def push(self, *items: Reply | Fail | str) -> None:
        for it in items:
            self.script.append(Reply(it) if isinstance(it, str) else it)

    # -- plumbing ----------------------------------------------------------------------------------
    def _next(self) -> Reply | Fail:
        with self._lock:
            return self.script.popleft() if self.script else Reply(self.default_text)

    def _send_json(self, h: BaseHTTPRequestHandler, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("content-type", "application/json")
        h.send_header("content-length", str(len(raw)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(raw)

    def _start_stream(self, h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        h.send_header("cache-control", "no-cache")
        h.send_header("connection", "close")
        h.end_headers()
        h.close_connection = True

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send_json(h, 400, self._error_body(400, "request body is not valid JSON"))
            return
        headers = {k.lower(): v for k, v in h.headers.items() if k.lower() not in ("x-api-key", "authorization")}
        with self._lock:
            self.requests.append(Seen(h.path, headers, body))
        problem = self._validate(h, body)
        if problem:
            status, msg = problem
            self._send_json(h, status, self._error_body(status, msg))
            return
        item = self._next()
        if isinstance(item, Fail):
            hdr = {}
            if item.retry_after is not None:
                hdr["retry-after"] = item.retry_after
            if item.retry_after_ms is not None:
                hdr["retry-after-ms"] = item.retry_after_ms
            self._send_json(h, item.status, self._error_body(item.status, item.message), hdr)
            return
        t_in = item.tokens_in if item.tokens_in is not None else self._prompt_words(body)
        t_out = item.tokens_out if item.tokens_out is not None else _words(item.text)
        if body.get("stream"):
            self._start_stream(h)
            for chunk in self._stream(body, item, t_in, t_out):
                h.wfile.write(chunk.encode())
                h.wfile.flush()
        else:
            self._send_json(h, 200, self._message(body, item.text, t_in, t_out))

    # -- per provider ------------------------------------------------------------------------------
    def _validate(self, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> tuple[int, str] | None:
        raise NotImplementedError

    def _error_body(self, status: int, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def _prompt_words(self, body: dict[str, Any]) -> int:
        raise NotImplementedError

    def _message(self, body: dict[str, Any], text: str, t_in: int, t_out: int) -> dict[str, Any]:
        raise NotImplementedError

    def _stream(self, body: dict[str, Any], item: Reply, t_in: int, t_out: int) -> Iterator[str]:
        raise NotImplementedError


def _pieces(text: str, n: int) -> list[str]:
    return [text[i : i + n] for i in range(0, len(text), n)] or [""]


class FakeAnthropic(_FakeServer):
    kind = "anthropic"
    ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                   429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}

    def _validate(self, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> tuple[int, str] | None:
        if h.path.split("?")[0] != "/v1/messages":
            return 404, f"no route POST {h.path}"
        # Older SDKs send x-api-key, newer ones "Authorization: Bearer <key>"; the API takes both.
        bearer = (h.headers.get("authorization") or "").removeprefix("Bearer ").strip()
        if not h.headers.get("x-api-key") and not bearer:
            return 401, "x-api-key or authorization header is required"
        if not h.headers.get("anthropic-version"):
            return 400, "anthropic-version header is required"
        for f in ("model", "max_tokens", "messages"):
            if f not in body:
                return 400, f"{f}: Field required"
        if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
            return 400, "max_tokens: must be a positive integer"
        msgs = body["messages"]
        if not isinstance(msgs, list) or not msgs:
            return 400, "messages: at least one message is required"
        for i, m in enumerate(msgs):
            if m.get("role") not in ("user", "assistant"):
                return 400, f"messages.{i}.role: must be user or assistant (system goes in the top-level 'system')"
            if i == 0 and m["role"] != "user":
                return 400, "messages: first message must use the user role"
            if i and msgs[i - 1]["role"] == m["role"]:
                return 400, "messages: roles must alternate between user and assistant"
        if "system" in body and not isinstance(body["system"], (str, list)):
            return 400, "system: must be a string or a list of text blocks"
        return None

    def _error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": self.ERROR_TYPES.get(status, "api_error"), "message": message}}

    def _prompt_words(self, body: dict[str, Any]) -> int:
        sys_text = body.get("system") if isinstance(body.get("system"), str) else ""
        texts = [sys_text] + [m["content"] if isinstance(m["content"], str) else json.dumps(m["content"]) for m in body["messages"]]
        return sum(_words(t) for t in texts)

    def _message(self, body: dict[str, Any], text: str, t_in: int, t_out: int) -> dict[str, Any]:
        return {
            "id": f"msg_fake{len(self.requests):04d}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": t_in, "output_tokens": t_out},
        }

    def _stream(self, body: dict[str, Any], item: Reply, t_in: int, t_out: int) -> Iterator[str]:
        def ev(name: str, data: dict[str, Any]) -> str:
            return f"event: {name}\ndata: {json.dumps(data)}\n\n"

        start = self._message(body, "", t_in, 1)
        start["content"] = []
        start["stop_reason"] = None
        yield ev("message_start", {"type": "message_start", "message": start})
        yield ev("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        yield ev("ping", {"type": "ping"})
        for piece in _pieces(item.text, item.chunk):
            yield ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}})
        yield ev("content_block_stop", {"type": "content_block_stop", "index": 0})
        yield ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                   "usage": {"output_tokens": t_out}})
        yield ev("message_stop", {"type": "message_stop"})


class FakeOpenAI(_FakeServer):
    kind = "openai"
    ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
                   429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}

    def _validate(self, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> tuple[int, str] | None:
        if h.path.split("?")[0] != "/v1/chat/completions":
            return 404, f"Invalid URL (POST {h.path})"
        auth = h.headers.get("authorization") or ""
        if not auth.startswith("Bearer ") or len(auth) <= len("Bearer "):
            return 401, "You didn't provide an API key."
        for f in ("model", "messages"):
            if f not in body:
                return 400, f"Missing required parameter: '{f}'."
        if "max_tokens" in body and "max_completion_tokens" in body:
            return 400, "max_tokens and max_completion_tokens cannot both be set"
        msgs = body["messages"]
        if not isinstance(msgs, list) or not msgs:
            return 400, "'messages' must be a non-empty array"
        for i, m in enumerate(msgs):
            if m.get("role") not in ("system", "developer", "user", "assistant", "tool"):
                return 400, f"Invalid value for 'messages[{i}].role'"
            if not isinstance(m.get("content"), (str, list)):
                return 400, f"Invalid type for 'messages[{i}].content'"
        if "stream_options" in body and not body.get("stream"):
            return 400, "The 'stream_options' parameter is only allowed when 'stream' is enabled."
        return None

    def _error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": self.ERROR_TYPES.get(status, "server_error"), "param": None, "code": None}}

    def _prompt_words(self, body: dict[str, Any]) -> int:
        return sum(_words(m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])) for m in body["messages"])

    def _message(self, body: dict[str, Any], text: str, t_in: int, t_out: int) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-fake{len(self.requests):04d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": t_in, "completion_tokens": t_out, "total_tokens": t_in + t_out},
        }

    def _stream(self, body: dict[str, Any], item: Reply, t_in: int, t_out: int) -> Iterator[str]:
        base = {"id": f"chatcmpl-fake{len(self.requests):04d}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": body["model"]}
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> str:
            d = {**base, "choices": choices}
            if include_usage:
                d["usage"] = usage
            return f"data: {json.dumps(d)}\n\n"

        yield chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        for piece in _pieces(item.text, item.chunk):
            yield chunk([{"index": 0, "delta": {"content": piece}, "finish_reason": None}])
        yield chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}])
        if include_usage:
            yield chunk([], {"prompt_tokens": t_in, "completion_tokens": t_out, "total_tokens": t_in + t_out})
        yield "data: [DONE]\n\n"
