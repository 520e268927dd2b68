"""The webhook server at the socket level: every connection is bounded in time (the request head, the
body, an idle keep-alive), bodies are bounded in size while they are read, and nothing is read before
the headers say it may be a signed delivery. Raw sockets on loopback, short timeouts."""

from __future__ import annotations

import json
import socket
import time

import pytest
from eventkit import comment_event

from bot.intake.queue import JobQueue
from bot.intake.server import WebhookApp, WebhookServer, sign

SECRET = b"limits-secret"


@pytest.fixture
def server(tmp_path):
    app = WebhookApp(JobQueue(tmp_path / "q.sqlite3"), [SECRET], max_body=64 << 10)
    srv = WebhookServer(app, "127.0.0.1", 0, head_timeout_s=0.5, body_timeout_s=0.5, keep_alive_s=1,
                        memory_per_body=4 << 10).start()
    yield srv, app
    srv.stop()


def connect(srv) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    s.settimeout(5)
    return s


def head(length: int | None, *, sig: str | None = "sha256=" + "0" * 64, chunked: bool = False, delivery="d1") -> bytes:
    lines = ["POST /webhook HTTP/1.1", "Host: x", "Content-Type: application/json",
             "X-GitHub-Event: issue_comment", f"X-GitHub-Delivery: {delivery}"]
    if sig is not None:
        lines.append(f"X-Hub-Signature-256: {sig}")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def response(s: socket.socket) -> tuple[int | None, bytes]:
    """(status, everything read until the server closed or 2 s passed)."""
    data = b""
    s.settimeout(2)
    try:
        while chunk := s.recv(65536):
            data += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else None
    return status, data


def closed_by_server(s: socket.socket, within: float) -> bool:
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except (socket.timeout, BlockingIOError):
        return False
    except ConnectionResetError:
        return True


def test_a_connection_that_sends_nothing_is_closed(server):
    srv, _ = server
    s = connect(srv)
    assert closed_by_server(s, 3.0)


def test_a_slowly_sent_head_is_cut_off(server):
    srv, _ = server
    s = connect(srv)
    t0 = time.monotonic()
    closed = False
    for part in (b"POST /webhook HTTP/1.1\r\n", b"Host: x\r\n", b"X-A: 1\r\n", b"X-B: 2\r\n", b"X-C: 3\r\n"):
        try:
            s.sendall(part)
        except (BrokenPipeError, ConnectionResetError):
            closed = True
            break
        if closed_by_server(s, 0.3):
            closed = True
            break
    assert closed and time.monotonic() - t0 < 2.0  # the head deadline (0.5 s) holds, whatever trickles in


def test_a_slowly_sent_body_gets_408(server):
    srv, app = server
    s = connect(srv)
    s.sendall(head(1000) + b"{")
    status, data = response(s)
    assert status == 408 and app.queue.counts() == {}


def test_content_length_over_the_limit_is_refused_before_any_body_byte(server):
    srv, _ = server
    s = connect(srv)
    t0 = time.monotonic()
    s.sendall(head(10 << 20))  # 10 MB announced, nothing sent
    status, _ = response(s)
    assert status == 413 and time.monotonic() - t0 < 1.0


def test_a_chunked_upload_is_stopped_at_the_limit(server):
    srv, _ = server
    s = connect(srv)
    s.sendall(head(None, chunked=True))
    chunk = b"x" * 8192
    sent, answer = 0, b""
    try:
        while sent < (16 << 20) and b"413" not in answer:
            s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
            s.setblocking(False)
            try:
                answer += s.recv(65536)
            except BlockingIOError:
                pass
            finally:
                s.setblocking(True)
    except (BrokenPipeError, ConnectionResetError):
        reset = True  # the server answered and closed while we were still sending
    else:
        reset = False
    if not answer.startswith(b"HTTP/1.1 413"):
        try:
            answer += s.recv(65536)
        except (ConnectionResetError, OSError):
            pass
    # the limit is 64 KiB: the server answers 413 (or has closed) long before 16 MB were sent
    assert sent < (16 << 20) and (answer.startswith(b"HTTP/1.1 413") or reset), (sent, answer[:80])


@pytest.mark.parametrize("sig", [None, "", "sha1=" + "0" * 40, "sha256=XYZ"])
def test_an_unsigned_delivery_is_refused_before_its_body_is_read(server, sig):
    srv, _ = server
    s = connect(srv)
    t0 = time.monotonic()
    s.sendall(head(50_000, sig=sig))  # the body never comes: the answer must not wait for it
    status, _ = response(s)
    assert status == 401 and time.monotonic() - t0 < 1.0


def test_a_forged_signature_over_a_large_body_is_401(server, shared):
    srv, app = server
    body = json.dumps(comment_event(shared, body="/status" + " " * 40_000)).encode()  # spooled to disk
    s = connect(srv)
    s.sendall(head(len(body), sig=sign(b"guess", body)) + body)
    assert response(s)[0] == 401 and app.queue.counts() == {}
    s = connect(srv)
    s.sendall(head(len(body), sig=sign(SECRET, body), delivery="d2") + body)
    assert response(s)[0] == 202 and app.queue.counts() == {"queued": 1}


def test_an_idle_keep_alive_connection_is_closed(server):
    srv, _ = server
    s = connect(srv)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    s.settimeout(2)
    first = b""
    while b'{"ok":true}' not in first:
        first += s.recv(65536)
    assert first.startswith(b"HTTP/1.1 200")
    assert closed_by_server(s, 3.0)
