"""``kbot serve``: the GitHub App webhook receiver (stdlib http.server; no framework needed).

Request path (POST /webhook, also POST /):

1. body size bounded (GitHub caps payloads at 25 MB) and read exactly Content-Length bytes;
2. ``X-Hub-Signature-256`` = ``sha256=<hex HMAC-SHA256(secret, RAW body)>`` checked with
   ``hmac.compare_digest`` against the current secret and, during rotation, the old one → else 401;
3. ``X-GitHub-Event`` / ``X-GitHub-Delivery`` validated; JSON parsed; ``ping`` answered;
4. events the bot handles are recorded and enqueued in one sqlite transaction, deduplicated by
   delivery id and by body hash (``bot.intake.queue``) → 202; duplicates → 200 with ``duplicate``;
5. a JobRunner thread claims jobs with a lease and runs the shared handlers (``bot.intake.events``).

Nothing is done inline in the request: GitHub gives a delivery 10 s, and a crash after the 202 must
not lose the job (it is on disk and re-claimed after the lease expires).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Mapping

from bot.intake.events import wanted
from bot.intake.queue import JobQueue

log = logging.getLogger(__name__)

MAX_BODY = 25 << 20
_EVENT = re.compile(r"^[a-z_]{1,64}$")
_DELIVERY = re.compile(r"^[A-Za-z0-9-]{1,100}$")
_SIG = re.compile(r"^sha256=([0-9a-f]{64})$")


def sign(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify_signature(secrets: list[bytes], body: bytes, header: str | None) -> bool:
    """Constant-time check of ``X-Hub-Signature-256`` over the raw body against every accepted secret."""
    if not header or not secrets:
        return False
    m = _SIG.match(header.strip())
    if not m:
        return False
    given = m.group(1).encode()
    ok = False
    for secret in secrets:
        expected = hmac.new(secret, body, hashlib.sha256).hexdigest().encode()
        ok |= hmac.compare_digest(expected, given)  # no early exit: same work whichever secret matches
    return ok


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
    """The HTTP logic without sockets: ``handle(method, path, headers, body)`` → Response."""

    def __init__(self, queue: JobQueue, secrets: list[bytes]):
        if not secrets:
            raise ValueError("at least one webhook secret is required")
        self.queue = queue
        self.secrets = secrets
        self.started = time.time()

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes) -> Response:
        h = {k.lower(): v for k, v in headers.items()}
        route = path.split("?", 1)[0]
        if method == "GET" and route == "/healthz":
            return Response(200, {"ok": True, "uptime_s": round(time.time() - self.started, 1), "jobs": self.queue.counts()})
        if route not in ("/", "/webhook"):
            return Response(404, {"error": "not found"})
        if method != "POST":
            return Response(405, {"error": "method not allowed"})
        if len(body) > MAX_BODY:
            return Response(413, {"error": "payload too large"})
        if not verify_signature(self.secrets, body, h.get("x-hub-signature-256")):
            return Response(401, {"error": "bad signature"})
        event, delivery = h.get("x-github-event", ""), h.get("x-github-delivery", "")
        if not _EVENT.match(event) or not _DELIVERY.match(delivery):
            return Response(400, {"error": "missing or malformed X-GitHub-Event / X-GitHub-Delivery"})
        ctype = h.get("content-type", "").split(";")[0].strip().lower()
        if ctype != "application/json":
            return Response(415, {"error": "configure the webhook with content type application/json"})
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            return Response(400, {"error": "body is not JSON"})
        if not isinstance(payload, dict):
            return Response(400, {"error": "body is not a JSON object"})
        if event == "ping":
            return Response(200, {"pong": True})
        if not wanted(event, payload):
            return Response(202, {"ignored": f"{event}/{payload.get('action')}"})
        digest = hashlib.sha256(body).hexdigest()
        acc = self.queue.accept(delivery, digest, event, event, {"event": event, "delivery": delivery, "payload": payload})
        if not acc.queued:
            return Response(200, {"duplicate": acc.reason})
        return Response(202, {"queued": acc.job_id})


def make_server(app: WebhookApp, host: str = "127.0.0.1", port: int = 8080) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        server_version = "kbot"
        sys_version = ""

        def _respond(self, resp: Response) -> None:
            data = json.dumps(resp.body).encode()
            self.send_response(resp.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> bytes | None:
            try:
                n = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                return None
            if n < 0 or n > MAX_BODY:
                return None
            return self.rfile.read(n)

        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            self._respond(app.handle("GET", self.path, dict(self.headers.items()), b""))

        def do_POST(self) -> None:  # noqa: N802
            body = self._body()
            if body is None:
                self._respond(Response(413, {"error": "bad or too large Content-Length"}))
                return
            self._respond(app.handle("POST", self.path, dict(self.headers.items()), body))

        def log_message(self, fmt: str, *args: Any) -> None:
            log.info("%s %s", self.address_string(), fmt % args)

    return ThreadingHTTPServer((host, port), Handler)


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
          port: int = 8080, secrets: list[bytes] | None = None) -> None:
    """Run the receiver and one worker until interrupted."""
    state = Path(state_dir)
    state.mkdir(parents=True, exist_ok=True)
    queue = JobQueue(state / "queue.sqlite3")
    app = WebhookApp(queue, secrets if secrets is not None else secrets_from_env())
    worker = JobRunner(queue, handle)
    worker.start()
    server = make_server(app, host, port)
    log.info("kbot serve listening on %s:%s, state in %s", host, port, state)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        worker.stopping.set()
        server.server_close()
