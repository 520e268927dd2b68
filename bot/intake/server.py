"""``kbot serve``: the GitHub App webhook receiver, an ASGI app (Starlette) served by uvicorn.

The receiver faces the internet, so every connection is bounded in time and memory and nothing is
believed before the signature is checked:

1. a connection must deliver its request head within ``head_timeout_s`` (a custom uvicorn protocol:
   uvicorn alone waits for headers forever), its body within ``body_timeout_s`` (408), and an idle
   keep-alive connection is closed after ``keep_alive_s``; the head is at most 16 KiB (h11's limit);
2. the route, the method and the headers are checked before any byte of the body is read: a missing or
   malformed ``X-Hub-Signature-256`` / ``X-GitHub-Event`` / ``X-GitHub-Delivery``, a content type other
   than JSON, or a ``Content-Length`` over the limit (GitHub caps payloads at 25 MB) is answered at once;
3. the body is read in chunks, counted (a chunked upload with no length is stopped at the limit) and
   fed to the HMAC-SHA256 of every accepted secret as it arrives; it is kept in memory only up to
   ``memory_per_body`` bytes and spooled to a temporary file past that, so a slow or large upload holds
   little memory; only a body whose signature matches (``hmac.compare_digest``, the current and,
   during rotation, the old secret) is parsed;
4. ``ping`` is answered; events the bot handles are recorded and enqueued in one sqlite transaction,
   deduplicated by delivery id and by body hash (``bot.intake.queue``) → 202; duplicates → 200;
5. a JobRunner thread claims jobs with a lease and runs the shared handlers (``bot.intake.events``).

``GET /healthz`` says only that the process is up (no queue figures: they are nobody's business).
Nothing is done inline in a request: GitHub gives a delivery 10 s, and a crash after the 202 must not
lose the job (it is on disk and re-claimed after the lease expires). ``WebhookApp.handle`` is the same
logic over a complete body, without sockets (tests and in-process deliveries).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
import re
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from bot.intake.events import wanted
from bot.intake.queue import JobQueue

log = logging.getLogger(__name__)

MAX_BODY = 25 << 20            # GitHub's cap on a webhook payload
MEMORY_PER_BODY = 256 << 10    # past this a body is spooled to a temporary file while it is read
HEAD_TIMEOUT_S = 10.0          # connection open (or last response) → complete request head
BODY_TIMEOUT_S = 10.0          # request head → complete body (GitHub itself gives up after 10 s)
KEEP_ALIVE_S = 5
_EVENT = re.compile(r"^[a-z_]{1,64}$")
_DELIVERY = re.compile(r"^[A-Za-z0-9-]{1,100}$")
_SIG = re.compile(r"^sha256=([0-9a-f]{64})$")


def sign(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


class SignatureCheck:
    """The HMAC-SHA256 of every accepted secret over a body fed in chunks, compared at the end."""

    def __init__(self, secrets: list[bytes]):
        self._macs = [hmac.new(s, digestmod=hashlib.sha256) for s in secrets]

    def update(self, chunk: bytes) -> None:
        for mac in self._macs:
            mac.update(chunk)

    def matches(self, header: str | None) -> bool:
        """Constant-time compare against every secret (no early exit: the same work whichever matches)."""
        m = _SIG.match(header.strip()) if header else None
        if not m or not self._macs:
            return False
        given = m.group(1).encode()
        ok = False
        for mac in self._macs:
            ok |= hmac.compare_digest(mac.hexdigest().encode(), given)
        return ok


def verify_signature(secrets: list[bytes], body: bytes, header: str | None) -> bool:
    """Constant-time check of ``X-Hub-Signature-256`` over the raw body against every accepted secret."""
    check = SignatureCheck(secrets)
    check.update(body)
    return check.matches(header)


def secrets_from_env(env: Mapping[str, str] | None = None) -> list[bytes]:
    env = os.environ if env is None else env
    out = [env[k].encode() for k in ("KBOT_WEBHOOK_SECRET", "KBOT_WEBHOOK_SECRET_OLD") if env.get(k)]
    if not out:
        raise SystemExit("KBOT_WEBHOOK_SECRET is not set: refusing to accept unsigned webhooks")
    return out


@dataclass(frozen=True)
class Response:
    status: int
    body: dict[str, Any]


class WebhookApp:
    """The receiver's logic without sockets: ``precheck`` (before any body byte is read), the signature
    (``SignatureCheck``), then ``accept`` (parse, dedupe, enqueue). ``handle`` runs all three on a
    complete body."""

    def __init__(self, queue: JobQueue, secrets: list[bytes], *, max_body: int = MAX_BODY):
        if not secrets:
            raise ValueError("at least one webhook secret is required")
        self.queue = queue
        self.secrets = secrets
        self.max_body = max_body

    def precheck(self, method: str, path: str, headers: Mapping[str, str]) -> Response | None:
        """The answer to send without reading the body, or None to read it."""
        h = {k.lower(): v for k, v in headers.items()}
        route = path.split("?", 1)[0]
        if route == "/healthz":
            return Response(200, {"ok": True}) if method in ("GET", "HEAD") else Response(405, {"error": "method not allowed"})
        if route not in ("/", "/webhook"):
            return Response(404, {"error": "not found"})
        if method != "POST":
            return Response(405, {"error": "method not allowed"})
        length = h.get("content-length")
        if length is not None:
            if not re.fullmatch(r"[0-9]{1,12}", length.strip()):
                return Response(400, {"error": "bad Content-Length"})
            if int(length) > self.max_body:
                return Response(413, {"error": "payload too large"})
        if not _SIG.match((h.get("x-hub-signature-256") or "").strip()):
            return Response(401, {"error": "bad signature"})
        if not _EVENT.match(h.get("x-github-event", "")) or not _DELIVERY.match(h.get("x-github-delivery", "")):
            return Response(400, {"error": "missing or malformed X-GitHub-Event / X-GitHub-Delivery"})
        ctype = h.get("content-type", "").split(";")[0].strip().lower()
        if ctype != "application/json":
            return Response(415, {"error": "configure the webhook with content type application/json"})
        return None

    def accept(self, headers: Mapping[str, str], body: bytes) -> Response:
        """A body whose signature matched: parse it, answer ``ping``, enqueue what the bot handles."""
        h = {k.lower(): v for k, v in headers.items()}
        event, delivery = h["x-github-event"], h["x-github-delivery"]
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            return Response(400, {"error": "body is not JSON"})
        if not isinstance(payload, dict):
            return Response(400, {"error": "body is not a JSON object"})
        if event == "ping":
            return Response(200, {"pong": True})
        if not wanted(event, payload):
            return Response(202, {"ignored": f"{event}/{str(payload.get('action'))[:40]}"})
        digest = hashlib.sha256(body).hexdigest()
        acc = self.queue.accept(delivery, digest, event, event, {"event": event, "delivery": delivery, "payload": payload})
        if not acc.queued:
            return Response(200, {"duplicate": acc.reason})
        return Response(202, {"queued": acc.job_id})

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Response:
        early = self.precheck(method, path, headers)
        if early is not None:
            return early
        if len(body) > self.max_body:
            return Response(413, {"error": "payload too large"})
        check = SignatureCheck(self.secrets)
        check.update(body)
        if not check.matches({k.lower(): v for k, v in headers.items()}.get("x-hub-signature-256")):
            return Response(401, {"error": "bad signature"})
        return self.accept(headers, body)


# ----------------------------------------------------------------------------------------- the ASGI app


def asgi_app(app: WebhookApp, *, body_timeout_s: float = BODY_TIMEOUT_S, memory_per_body: int = MEMORY_PER_BODY):
    """The Starlette application around ``app``: the body streamed, bounded, timed and signed as it comes."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    def reply(resp: Response, *, close: bool = False) -> JSONResponse:
        return JSONResponse(resp.body, resp.status, headers={"connection": "close"} if close else None)

    async def endpoint(request: Request):
        headers = dict(request.headers)
        early = app.precheck(request.method, request.url.path, headers)
        if early is not None:
            # An answer before the body: the connection is not reused (its unread body is discarded).
            return reply(early, close=request.method == "POST" and early.status >= 400)
        check = SignatureCheck(app.secrets)
        with tempfile.SpooledTemporaryFile(max_size=memory_per_body) as spool:
            size = 0
            try:
                async with asyncio.timeout(body_timeout_s):
                    async for chunk in request.stream():
                        size += len(chunk)
                        if size > app.max_body:
                            return reply(Response(413, {"error": "payload too large"}), close=True)
                        check.update(chunk)
                        spool.write(chunk)
            except TimeoutError:
                return reply(Response(408, {"error": f"the body did not arrive within {body_timeout_s:g} s"}), close=True)
            except ClientDisconnect:
                return reply(Response(400, {"error": "client disconnected"}), close=True)
            if not check.matches(headers.get("x-hub-signature-256")):
                return reply(Response(401, {"error": "bad signature"}))
            spool.seek(0)
            body = spool.read()
        # sqlite and JSON parsing off the event loop: other connections keep being served
        return reply(await run_in_threadpool(app.accept, headers, body))

    methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]
    return Starlette(routes=[Route("/healthz", endpoint, methods=methods), Route("/webhook", endpoint, methods=methods),
                             Route("/", endpoint, methods=methods)])


def _timed_protocol(head_timeout_s: float):
    """uvicorn's h11 protocol with a deadline for each request head: a connection that opens and sends
    its headers slowly (or not at all), before its first request or between two, is closed."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _armed_for: Any = None

        def _arm(self) -> None:
            self._disarm()
            self._armed_for = self.cycle
            self._head_timer = self.loop.call_later(head_timeout_s, self._head_timeout)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timeout(self) -> None:
            self._head_timer = None
            if self.cycle is self._armed_for and not self.transport.is_closing():
                self.transport.close()  # no (new) request head in time

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._head_timer is not None and self.cycle is not self._armed_for:
                self._disarm()  # a request head arrived; the body has its own deadline

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return TimedH11Protocol


class WebhookServer:
    """uvicorn serving ``asgi_app(app)`` on ``host:port`` (port 0: any free one), in the foreground
    (``run``) or in a thread (``start`` / ``stop``)."""

    def __init__(self, app: WebhookApp, host: str = "127.0.0.1", port: int = 8080, *,
                 head_timeout_s: float = HEAD_TIMEOUT_S, body_timeout_s: float = BODY_TIMEOUT_S,
                 keep_alive_s: int = KEEP_ALIVE_S, memory_per_body: int = MEMORY_PER_BODY,
                 max_connections: int | None = None, log_level: str = "warning"):
        import uvicorn

        raise_open_files_limit()
        self.socket = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET,
                                           backlog=2048, reuse_port=False)
        self.port = self.socket.getsockname()[1]
        config = uvicorn.Config(asgi_app(app, body_timeout_s=body_timeout_s, memory_per_body=memory_per_body),
                                http=_timed_protocol(head_timeout_s), timeout_keep_alive=keep_alive_s,
                                limit_concurrency=max_connections, server_header=False, date_header=True,
                                lifespan="off", log_level=log_level, access_log=False, ws="none")
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        """Serve until SIGINT/SIGTERM (uvicorn listens for them when run in the main thread)."""
        self.server.run(sockets=[self.socket])

    def start(self) -> "WebhookServer":
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]},
                                        name="kbot-webhook", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.socket.close()


def raise_open_files_limit(want: int = 65536) -> int:
    """Lift the soft limit on open files toward the hard one: every connection is a descriptor, and a
    flood of idle ones must not make the server refuse real deliveries for want of descriptors."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = want if hard == resource.RLIM_INFINITY else min(want, hard)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            return target
        return soft
    except (ImportError, ValueError, OSError):
        return -1


class JobRunner(threading.Thread):
    """The thread that drains the job queue: claims jobs and runs ``handle(event, payload)``; retries with
    backoff, leases renewed meanwhile."""

    def __init__(self, queue: JobQueue, handle: Callable[[str, Mapping[str, Any]], Any], *,
                 lease_seconds: float = 300.0, poll_seconds: float = 0.5):
        super().__init__(name="kbot-worker", daemon=True)
        self.queue = queue
        self.handle = handle
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self.stopping = threading.Event()

    def run_once(self) -> bool:
        """Run one job if there is one; True if a job was run."""
        job = self.queue.claim(self.lease_seconds)
        if job is None:
            return False
        renew = threading.Event()

        def keep_lease() -> None:
            while not renew.wait(self.lease_seconds / 3):
                self.queue.extend(job, self.lease_seconds)

        t = threading.Thread(target=keep_lease, daemon=True)
        t.start()
        try:
            self.handle(job.payload["event"], job.payload["payload"])
        except Exception as e:  # noqa: BLE001 - any failure is retried, then parked
            log.exception("job %s (%s) failed", job.id, job.kind)
            renew.set()
            self.queue.fail(job, f"{type(e).__name__}: {e}")
            return True
        renew.set()
        self.queue.complete(job)
        return True

    def run(self) -> None:
        while not self.stopping.is_set():
            if not self.run_once():
                self.stopping.wait(self.poll_seconds)


def serve(state_dir: str | Path, handle: Callable[[str, Mapping[str, Any]], Any], *, host: str = "127.0.0.1",
          port: int = 8080, secrets: list[bytes] | None = None, max_connections: int | None = None,
          poll_seconds: float = 0.5) -> None:
    """Run the receiver and one worker until interrupted."""
    state = Path(state_dir)
    state.mkdir(parents=True, exist_ok=True)
    queue = JobQueue(state / "queue.sqlite3")
    app = WebhookApp(queue, secrets if secrets is not None else secrets_from_env())
    worker = JobRunner(queue, handle, poll_seconds=poll_seconds)
    worker.start()
    server = WebhookServer(app, host, port, max_connections=max_connections, log_level="info")
    log.info("kbot serve listening on %s:%s, state in %s", host, server.port, state)
    try:
        server.run()
    finally:
        worker.stopping.set()
        server.socket.close()
