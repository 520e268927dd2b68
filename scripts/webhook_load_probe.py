"""Load probe of the webhook server (``kbot serve``'s receiver) on loopback: do stalled and oversized
uploads starve real deliveries, and does memory stay bounded?

It starts the receiver in a child process (``bot.intake.server.WebhookServer`` with its job queue and
a worker that completes every job), then for ``--seconds`` keeps up, all at once:

* slowloris connections: each sends a request head one header line at a time, a line a second, and
  reconnects when the server cuts it off;
* stalled bodies: signed-looking heads announcing a large body that trickles in a few bytes a second;
* oversized uploads: a ``Content-Length`` over the limit, and chunked uploads with no length pushed as
  fast as the socket takes them;
* large forged deliveries: bodies just under the limit, sent at full speed with a wrong signature;
* idle connections that send nothing;

while it sends real deliveries: GitHub's own payload examples (``../shared/github/webhook-examples.json``:
issue_comment, pull_request, workflow_run), signed, each with its own delivery id, and measures for each
the time to its HTTP answer and to its job being done. The child's resident memory is sampled all along
(``/proc/<pid>/status``). Only 127.0.0.1 is ever contacted; every loop is bounded in count and time.

    .venv/bin/python scripts/webhook_load_probe.py [--seconds 20] [--slowloris 300] [--json]

prints the figures (``docs/bot.md`` records them); ``tests/bot/test_webhook_load.py`` runs a shorter
probe and asserts the bounds. ``--server-path DIR`` runs the receiver of another checkout (an older one
still on ``http.server``: its ``make_server``) under the same load, for a comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import itertools
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("KBOT_SHARED", REPO.parent / "shared"))
SECRET = b"load-probe-secret"
HOST = "127.0.0.1"
REAL_EVENTS = (("issue_comment", "created"), ("pull_request", "opened"), ("workflow_run", "completed"))


# ------------------------------------------------------------------------------------------ the child


def serve_child(state: Path, port_file: Path, max_body: int, server_path: Path) -> None:
    """The receiver as ``kbot serve`` runs it, with a worker that completes every job at once."""
    sys.path.insert(0, str(server_path))
    from bot.intake import server as receiver
    from bot.intake.queue import JobQueue

    queue = JobQueue(state / "queue.sqlite3")
    worker = receiver.JobRunner(queue, lambda event, payload: None, poll_seconds=0.02)
    worker.start()
    if hasattr(receiver, "WebhookServer"):
        server = receiver.WebhookServer(receiver.WebhookApp(queue, [SECRET], max_body=max_body), HOST, 0)
        port_file.write_text(str(server.port))
        server.run()
    else:  # an older receiver: http.server
        httpd = receiver.make_server(receiver.WebhookApp(queue, [SECRET]), HOST, 0)
        port_file.write_text(str(httpd.server_address[1]))
        httpd.serve_forever()


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields.get("VmRSS", 0), fields.get("VmHWM", 0)


# ------------------------------------------------------------------------------------------ deliveries


def real_payloads(shared: Path = SHARED) -> list[tuple[str, dict]]:
    examples = {e["name"]: e for e in json.loads((shared / "github" / "webhook-examples.json").read_text())}
    out = []
    for event, action in REAL_EVENTS:
        out += [(event, x) for x in examples[event]["examples"] if x.get("action") == action][:1]
    if len(out) != len(REAL_EVENTS):
        raise SystemExit(f"{shared}/github/webhook-examples.json lacks one of {REAL_EVENTS}")
    return out


def delivery(event: str, payload: dict, n: int) -> bytes:
    """A signed HTTP request for one real delivery; ``n`` makes its id and body unique (no dedup)."""
    p = json.loads(json.dumps(payload))
    p["kbot_probe"] = n  # an extra key: a new body hash, the same event
    if event == "workflow_run":
        p["workflow_run"]["conclusion"] = "success"
    body = json.dumps(p).encode()
    sig = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    head = (f"POST /webhook HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
            f"X-GitHub-Event: {event}\r\nX-GitHub-Delivery: probe-{n}\r\nX-Hub-Signature-256: {sig}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    return head.encode() + body


async def read_response(reader: asyncio.StreamReader, timeout: float) -> tuple[int | None, dict]:
    async with asyncio.timeout(timeout):
        status_line = await reader.readline()
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length) if length else b""
    status = int(status_line.split()[1]) if status_line.startswith(b"HTTP/1.") else None
    try:
        return status, json.loads(body) if body else {}
    except ValueError:
        return status, {}


def job_done(db: Path, job_id: int) -> bool:
    with sqlite3.connect(db, timeout=5) as con:
        row = con.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return bool(row) and row[0] == "done"


# ------------------------------------------------------------------------------------------ attackers


class Tally:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def add(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n


async def slowloris(port: int, until: float, tally: Tally) -> None:
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
        except OSError:
            tally.add("slowloris connect refused")
            await asyncio.sleep(0.5)
            continue
        tally.add("slowloris connections")
        try:
            writer.write(b"POST /webhook HTTP/1.1\r\nHost: x\r\n")
            await writer.drain()
            i = 0
            while time.monotonic() < until:
                await asyncio.sleep(1.0)
                writer.write(f"X-Slow-{i}: {'a' * 20}\r\n".encode())
                await writer.drain()
                i += 1
                if reader.at_eof():
                    break
        except (ConnectionError, OSError):
            pass
        finally:
            tally.add("slowloris cut off")
            writer.close()


async def stalled_body(port: int, until: float, tally: Tally) -> None:
    head = (b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: issue_comment\r\n"
            b"X-GitHub-Delivery: stall\r\nX-Hub-Signature-256: sha256=" + b"0" * 64 + b"\r\nContent-Length: 20000000\r\n\r\n")
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
            writer.write(head)
            while time.monotonic() < until and not reader.at_eof():
                writer.write(b"x" * 64)
                await writer.drain()
                await asyncio.sleep(1.0)
                if len(reader._buffer):  # noqa: SLF001 - the server answered (408): start again
                    break
            tally.add("stalled bodies")
        except (ConnectionError, OSError):
            tally.add("stalled bodies")
        finally:
            try:
                writer.close()
            except UnboundLocalError:
                pass


async def oversized(port: int, until: float, tally: Tally, blast_bytes: int) -> None:
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
            if random.random() < 0.5:
                writer.write(b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             b"X-GitHub-Event: push\r\nX-GitHub-Delivery: big\r\nX-Hub-Signature-256: sha256=" + b"0" * 64 +
                             b"\r\nContent-Length: 104857600\r\n\r\n")
                await writer.drain()
                status, _ = await read_response(reader, 5)
                tally.add(f"oversized (Content-Length) -> {status}")
            else:
                writer.write(b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: push\r\n"
                             b"X-GitHub-Delivery: big\r\nX-Hub-Signature-256: sha256=" + b"0" * 64 +
                             b"\r\nTransfer-Encoding: chunked\r\n\r\n")
                chunk = b"y" * 65536
                sent = 0
                while sent < blast_bytes and not reader.at_eof() and not len(reader._buffer):  # noqa: SLF001
                    writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    await writer.drain()
                    sent += len(chunk)
                status = None
                try:
                    status, _ = await read_response(reader, 5)
                except (TimeoutError, asyncio.IncompleteReadError, ValueError):
                    pass
                tally.add(f"oversized (chunked, {sent >> 20} MiB pushed) -> {status}")
            writer.close()
        except (ConnectionError, OSError):
            tally.add("oversized: connection reset by the server")
        await asyncio.sleep(0.05)


async def forged_large(port: int, until: float, tally: Tally, size: int) -> None:
    body = b"{" + b" " * (size - 2) + b"}"
    head = (b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-GitHub-Event: issue_comment\r\n"
            b"X-GitHub-Delivery: forged\r\nX-Hub-Signature-256: sha256=" + b"1" * 64 + b"\r\nContent-Length: %d\r\n\r\n" % size)
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
            writer.write(head)
            for i in range(0, size, 1 << 20):
                writer.write(body[i:i + (1 << 20)])
                await writer.drain()
            status, _ = await read_response(reader, 10)
            tally.add(f"forged {size >> 20} MiB bodies -> {status}")
            writer.close()
        except (ConnectionError, OSError, TimeoutError, asyncio.IncompleteReadError, ValueError):
            tally.add("forged large bodies: connection failed")
            await asyncio.sleep(0.1)


async def idle(port: int, until: float, tally: Tally) -> None:
    while time.monotonic() < until:
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
            tally.add("idle connections")
            while time.monotonic() < until and not reader.at_eof():
                try:
                    async with asyncio.timeout(0.5):
                        await reader.read(1)
                except TimeoutError:
                    continue
            writer.close()
        except (ConnectionError, OSError):
            await asyncio.sleep(0.2)


# ------------------------------------------------------------------------------------------ the probe


_SERIAL = itertools.count()  # every real delivery of a probe gets its own id and body


async def real_deliveries(port: int, db: Path, n: int, spacing: float, start_after: float, payloads) -> list[dict]:
    await asyncio.sleep(start_after)
    out = []
    for _ in range(n):
        i = next(_SERIAL)
        event, payload = payloads[i % len(payloads)]
        t0 = time.monotonic()
        rec: dict = {"event": event}
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
            writer.write(delivery(event, payload, i))
            await writer.drain()
            status, body = await read_response(reader, 10)
            writer.close()
            rec["status"], rec["answer_s"] = status, time.monotonic() - t0
            job = body.get("queued")
            if isinstance(job, int):
                while not job_done(db, job) and time.monotonic() - t0 < 10:
                    await asyncio.sleep(0.01)
                rec["done_s"] = time.monotonic() - t0 if job_done(db, job) else None
        except (ConnectionError, OSError, TimeoutError, asyncio.IncompleteReadError) as e:
            rec["error"] = f"{type(e).__name__}: {e}"
        out.append(rec)
        await asyncio.sleep(spacing)
    return out


async def sample_rss(pid: int, until: float, samples: list[int]) -> None:
    while time.monotonic() < until:
        samples.append(rss_kib(pid)[0])
        await asyncio.sleep(0.2)


async def attack(port: int, pid: int, db: Path, *, seconds: float, slowloris_n: int, stalled_n: int, oversized_n: int,
                 idle_n: int, real_n: int, blast_bytes: int, forged_n: int, forged_bytes: int, payloads) -> dict:
    until = time.monotonic() + seconds
    tally = Tally()
    samples: list[int] = []
    tasks = [asyncio.create_task(slowloris(port, until, tally)) for _ in range(slowloris_n)]
    tasks += [asyncio.create_task(stalled_body(port, until, tally)) for _ in range(stalled_n)]
    tasks += [asyncio.create_task(oversized(port, until, tally, blast_bytes)) for _ in range(oversized_n)]
    tasks += [asyncio.create_task(idle(port, until, tally)) for _ in range(idle_n)]
    tasks += [asyncio.create_task(forged_large(port, until, tally, forged_bytes)) for _ in range(forged_n)]
    tasks.append(asyncio.create_task(sample_rss(pid, until + 1.0, samples)))
    spacing = max(0.05, (seconds - 2.0) / max(real_n, 1))
    real = await real_deliveries(port, db, real_n, spacing, 1.0, payloads)
    await asyncio.gather(*tasks, return_exceptions=True)
    return {"real": real, "tally": tally.counts, "rss_samples_kib": samples}


def probe(*, seconds: float = 20, slowloris_n: int = 300, stalled_n: int = 50, oversized_n: int = 8, idle_n: int = 100,
          real_n: int = 60, forged_n: int = 4, max_body: int = 25 << 20, blast_bytes: int = 64 << 20,
          shared: Path = SHARED, server_path: Path = REPO) -> dict:
    """Run the probe; returns the figures (see ``summary``)."""
    payloads = real_payloads(shared)
    with tempfile.TemporaryDirectory(prefix="kbot-probe-") as tmp:
        state = Path(tmp)
        port_file = state / "port"
        env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        env["PYTHONPATH"] = str(server_path) + os.pathsep + env["PYTHONPATH"]
        child = subprocess.Popen([sys.executable, __file__, "serve", "--state", str(state), "--port-file", str(port_file),
                                  "--max-body", str(max_body), "--server-path", str(server_path)],
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 30
            while not port_file.exists() or not port_file.read_text():
                if child.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the server did not start: {child.stderr.read().decode()[-2000:]}")
                time.sleep(0.05)
            time.sleep(0.3)
            port = int(port_file.read_text())
            db = state / "queue.sqlite3"
            # warm up (imports, sqlite, the thread pool), then the baseline
            warm = asyncio.run(real_deliveries(port, db, 6, 0.05, 0.0, payloads))
            baseline = rss_kib(child.pid)[0]
            out = asyncio.run(attack(port, child.pid, db, seconds=seconds, slowloris_n=slowloris_n, stalled_n=stalled_n,
                                     oversized_n=oversized_n, idle_n=idle_n, real_n=real_n, blast_bytes=blast_bytes,
                                     forged_n=forged_n, forged_bytes=max_body - (1 << 20), payloads=payloads))
            time.sleep(1.0)
            rss_after, hwm = rss_kib(child.pid)
            quiet = asyncio.run(real_deliveries(port, db, 6, 0.05, 0.0, payloads))
        finally:
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
    out.update(warm=warm, quiet=quiet, rss_baseline_kib=baseline, rss_after_kib=rss_after, rss_hwm_kib=hwm,
               settings={"seconds": seconds, "slowloris": slowloris_n, "stalled_bodies": stalled_n, "oversized": oversized_n,
                         "idle": idle_n, "real": real_n, "forged_large": forged_n, "max_body": max_body,
                         "blast_bytes": blast_bytes, "server": str(server_path)})
    return out


def summary(fig: dict) -> dict:
    real = fig["real"]
    answered = [r["answer_s"] for r in real if r.get("status") == 202]
    done = [r["done_s"] for r in real if r.get("done_s") is not None]
    quiet = [r["answer_s"] for r in fig["quiet"] + fig["warm"] if r.get("status") == 202]
    peak = max(fig["rss_samples_kib"] or [fig["rss_after_kib"]])

    def q(xs, p):
        return round(sorted(xs)[min(len(xs) - 1, int(p * len(xs)))], 4) if xs else None

    return {
        "real deliveries": len(real),
        "answered 202": len(answered),
        "jobs done": len(done),
        "answer s (median / p95 / max)": [q(answered, 0.5), q(answered, 0.95), round(max(answered), 4) if answered else None],
        "job done s (median / p95 / max)": [q(done, 0.5), q(done, 0.95), round(max(done), 4) if done else None],
        "answer s without load (median)": round(statistics.median(quiet), 4) if quiet else None,
        "rss MiB (baseline / peak / after)": [round(fig["rss_baseline_kib"] / 1024, 1), round(peak / 1024, 1),
                                             round(fig["rss_after_kib"] / 1024, 1)],
        "rss growth MiB (peak - baseline)": round((peak - fig["rss_baseline_kib"]) / 1024, 1),
        "attack": dict(sorted(fig["tally"].items())),
        "settings": fig["settings"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd")
    s = sub.add_parser("serve", help="(internal) the receiver under test")
    s.add_argument("--state", type=Path, required=True)
    s.add_argument("--port-file", type=Path, required=True)
    s.add_argument("--max-body", type=int, default=25 << 20)
    s.add_argument("--server-path", type=Path, default=REPO)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--slowloris", type=int, default=300)
    ap.add_argument("--stalled", type=int, default=50)
    ap.add_argument("--oversized", type=int, default=8)
    ap.add_argument("--idle", type=int, default=100)
    ap.add_argument("--real", type=int, default=60)
    ap.add_argument("--forged", type=int, default=4, help="connections sending large bodies with a wrong signature")
    ap.add_argument("--server-path", type=Path, default=REPO, help="the checkout whose receiver is probed")
    ap.add_argument("--json", action="store_true", help="print the raw figures too")
    a = ap.parse_args(argv)
    if a.cmd == "serve":
        serve_child(a.state, a.port_file, a.max_body, a.server_path)
        return 0
    fig = probe(seconds=a.seconds, slowloris_n=a.slowloris, stalled_n=a.stalled, oversized_n=a.oversized,
                idle_n=a.idle, real_n=a.real, forged_n=a.forged, server_path=a.server_path)
    s = summary(fig)
    for k, v in s.items():
        print(f"{k:36} {json.dumps(v)}")
    if a.json:
        print(json.dumps(fig, indent=1))
    ok = s["answered 202"] == s["jobs done"] == s["real deliveries"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
