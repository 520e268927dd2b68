"""The webhook receiver and the durable queue: signatures, rotation, deduplication, restart, leases."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from eventkit import comment_event, example

from bot.intake.queue import JobQueue
from bot.intake.server import JobRunner, WebhookApp, WebhookServer, secrets_from_env, sign, verify_signature

NEW, OLD = b"new-secret", b"old-secret"


class Clock:
    def __init__(self):
        self.t = 1_000_000.0

    def __call__(self):
        return self.t


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def queue(tmp_path, clock):
    return JobQueue(tmp_path / "queue.sqlite3", clock=clock, max_attempts=3)


@pytest.fixture
def app(queue):
    return WebhookApp(queue, [NEW, OLD])


def post(app, body: bytes, *, secret=NEW, delivery="d-1", event="issue_comment", sig=None, ctype="application/json"):
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "Content-Type": ctype,
               "X-Hub-Signature-256": sig if sig is not None else sign(secret, body)}
    return app.handle("POST", "/webhook", headers, body)


def raw(payload) -> bytes:
    return json.dumps(payload).encode()


def test_valid_signature_queues_a_job(shared, app, queue):
    r = post(app, raw(comment_event(shared, body="/status")))
    assert r.status == 202 and r.body["queued"]
    assert queue.counts() == {"queued": 1}


def test_forged_signatures_are_401(shared, app, queue):
    body = raw(comment_event(shared, body="/promote"))
    assert post(app, body, secret=b"guess").status == 401
    assert post(app, body, sig="").status == 401
    assert post(app, body, sig="sha1=" + "0" * 40).status == 401
    assert post(app, body, sig=sign(NEW, body).upper()).status == 401
    # signature of the same JSON serialized differently: the raw bytes are what is signed
    other = json.dumps(json.loads(body), indent=1).encode()
    assert post(app, other, sig=sign(NEW, body)).status == 401
    assert queue.counts() == {}


def test_old_secret_accepted_during_rotation(shared, app):
    assert post(app, raw(comment_event(shared, body="/status")), secret=OLD).status == 202
    assert verify_signature([NEW], b"x", sign(OLD, b"x")) is False


def test_replayed_delivery_makes_no_second_job(shared, app, queue):
    body = raw(comment_event(shared, body="/optimize d"))
    assert post(app, body).status == 202
    r = post(app, body)
    assert r.status == 200 and r.body["duplicate"] == "duplicate delivery id"
    r = post(app, body, delivery="d-2")  # same body, fresh delivery id: a replay
    assert r.status == 200 and r.body["duplicate"] == "duplicate body"
    assert queue.counts() == {"queued": 1}


def test_bad_requests(shared, app):
    body = raw(comment_event(shared, body="/status"))
    assert post(app, body, delivery="../x").status == 400
    assert post(app, body, event="Issue Comment").status == 400
    assert post(app, body, ctype="application/x-www-form-urlencoded").status == 415
    assert post(app, b"[1,2]").status == 400
    assert post(app, b"{not json").status == 400
    assert app.handle("GET", "/webhook", {}, b"").status == 405
    assert app.handle("GET", "/nope", {}, b"").status == 404


def test_ping_and_unhandled_events(shared, app, queue):
    assert post(app, raw(example(shared, "ping")), event="ping").status == 200
    star = raw(example(shared, "star"))
    assert post(app, star, event="star", delivery="s1").status == 202
    edited = raw(comment_event(shared, body="/promote", action="edited"))
    r = post(app, edited, delivery="e1")
    assert r.status == 202 and "ignored" in r.body
    assert queue.counts() == {}


def test_handled_event_kinds(shared, app, queue):
    assert post(app, raw(example(shared, "pull_request", "opened")), event="pull_request", delivery="p1").body["queued"]
    assert post(app, raw(example(shared, "pull_request", "synchronize")), event="pull_request", delivery="p2").body["queued"]
    assert post(app, raw(example(shared, "workflow_run", "completed")), event="workflow_run", delivery="w1").body["queued"]
    assert "ignored" in post(app, raw(example(shared, "workflow_run", "requested")), event="workflow_run", delivery="w2").body
    assert queue.counts() == {"queued": 3}


def test_healthz_reveals_nothing_but_liveness(shared, app):
    post(app, raw(comment_event(shared, body="/status")))
    r = app.handle("GET", "/healthz", {}, b"")
    assert r.status == 200 and r.body == {"ok": True}  # no queue figures, no uptime


def test_queue_survives_restart(shared, app, tmp_path, clock):
    post(app, raw(comment_event(shared, body="/status")))
    again = JobQueue(tmp_path / "queue.sqlite3", clock=clock)
    job = again.claim()
    assert job is not None and job.payload["event"] == "issue_comment"
    # and the dedup record survived too
    assert post(WebhookApp(again, [NEW]), raw(comment_event(shared, body="/status"))).status == 200


def test_crashed_worker_job_is_redelivered_once_finished_never(queue, clock):
    queue.enqueue("k1", "test", {"event": "x", "payload": {}})
    first = queue.claim(lease_seconds=60)
    assert queue.claim(lease_seconds=60) is None  # leased
    clock.t += 61  # the worker died without finishing
    second = queue.claim(lease_seconds=60)
    assert second.id == first.id and second.attempts == 2
    assert queue.complete(first) is False  # the stale worker cannot finish it
    assert queue.complete(second) is True
    clock.t += 10_000
    assert queue.claim() is None  # done is never run again
    assert queue.enqueue("k1", "test", {}).queued is False


def test_failures_retry_with_backoff_then_park(queue, clock):
    queue.enqueue("k", "test", {})
    for attempt in range(1, 4):
        job = queue.claim()
        assert job.attempts == attempt
        state = queue.fail(job, "boom")
        assert queue.claim() is None  # backoff: not immediately
        clock.t += 1000
    assert state == "dead" and queue.counts() == {"dead": 1}


def test_expired_lease_after_last_attempt_is_parked(queue, clock):
    queue.enqueue("k", "test", {})
    for _ in range(3):
        assert queue.claim(lease_seconds=5) is not None
        clock.t += 6
    assert queue.claim() is None and queue.counts() == {"dead": 1}


def test_worker_runs_and_retries(queue, clock):
    seen = []

    def handle(event, payload):
        seen.append(event)
        if len(seen) == 1:
            raise RuntimeError("transient")

    queue.enqueue("k", "test", {"event": "issue_comment", "payload": {}})
    w = JobRunner(queue, handle, lease_seconds=30)
    assert w.run_once() is True
    clock.t += 100
    assert w.run_once() is True
    assert seen == ["issue_comment", "issue_comment"] and queue.counts() == {"done": 1}
    assert w.run_once() is False


def test_real_http_server(shared, app):
    server = WebhookServer(app, "127.0.0.1", 0).start()
    try:
        url = f"http://127.0.0.1:{server.port}"
        body = raw(comment_event(shared, body="/status"))
        req = urllib.request.Request(url + "/webhook", data=body, method="POST", headers={
            "X-GitHub-Event": "issue_comment", "X-GitHub-Delivery": "h-1", "Content-Type": "application/json",
            "X-Hub-Signature-256": sign(NEW, body)})
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status == 202 and json.loads(resp.read())["queued"]
        req.remove_header("X-hub-signature-256")
        req.add_header("X-Hub-Signature-256", sign(b"forged", body))
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=5)
        assert e.value.code == 401
        with urllib.request.urlopen(url + "/healthz", timeout=5) as resp:
            assert json.loads(resp.read()) == {"ok": True}
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url + "/webhook", timeout=5)  # GET
        assert e.value.code == 405
    finally:
        server.stop()
    assert app.queue.counts() == {"queued": 1}


def test_secrets_from_env():
    assert secrets_from_env({"KBOT_WEBHOOK_SECRET": "a", "KBOT_WEBHOOK_SECRET_OLD": "b"}) == [b"a", b"b"]
    with pytest.raises(SystemExit):
        secrets_from_env({})


def test_kbot_serve_starts_answers_and_stops(tmp_path, shared):
    """`kbot serve` (python -m bot.cli.github_bot serve): up, a signed ping answered, a graceful stop on SIGTERM."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time
    from pathlib import Path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "KBOT_WEBHOOK_SECRET": NEW.decode(), "PYTHONPATH": str(repo)}
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli.github_bot", "serve", "--state-dir", str(tmp_path / "state"),
                             "--port", str(port)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
                    assert json.loads(resp.read()) == {"ok": True}
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read().decode()[-2000:]
                time.sleep(0.2)
        body = b"{}"
        req = urllib.request.Request(f"http://127.0.0.1:{port}/webhook", data=body, method="POST", headers={
            "X-GitHub-Event": "ping", "X-GitHub-Delivery": "p-1", "Content-Type": "application/json",
            "X-Hub-Signature-256": sign(NEW, body)})
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert json.loads(resp.read()) == {"pong": True}
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=15)
    # uvicorn shuts down gracefully, then re-raises the signal so the exit status says why it stopped
    assert rc in (0, -signal.SIGTERM) and b"Finished server process" in proc.stdout.read()
