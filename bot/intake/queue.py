"""Durable webhook intake: delivery deduplication and a job queue in sqlite (one file in the state dir).

* ``accept`` records a delivery and enqueues its job in ONE transaction: a delivery id or a body hash
  seen before is a duplicate (GitHub redelivers with the same id; a replayed body with a new id is
  a replay), and either both the delivery and its job exist, or neither.
* ``claim`` hands a job to a worker under a lease (a random token + expiry). A worker that dies
  leaves the lease to expire and the job is handed out again (at-least-once; handlers are idempotent
  through sticky markers and deterministic names).
* ``complete`` / ``fail`` only count when the caller still holds the lease, so a job that was
  re-claimed after a stall cannot be finished twice. A finished job is never claimed again.
* jobs that keep failing are retried with backoff up to ``max_attempts``, then parked as ``dead``.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
    delivery_id TEXT PRIMARY KEY,
    body_sha256 TEXT NOT NULL UNIQUE,
    event TEXT NOT NULL,
    received REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'dead')),
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    available_at REAL NOT NULL,
    lease_token TEXT,
    lease_until REAL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    error TEXT
);
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs(state, available_at);
"""


@dataclass(frozen=True)
class Job:
    id: int
    key: str
    kind: str
    payload: Any
    attempts: int
    token: str


@dataclass(frozen=True)
class Accepted:
    queued: bool
    job_id: int | None = None
    reason: str = ""  # why not queued (duplicate delivery / duplicate body)


class JobQueue:
    def __init__(self, db_path: str | Path, *, max_attempts: int = 5, clock=time.time):
        self.db_path = str(db_path)
        Path(self.db_path).parent.mkdir(parents=True, exist_ok=True)
        self.max_attempts = max_attempts
        self.clock = clock
        self._lock = threading.Lock()
        with self._connect() as db:
            db.executescript(SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.db_path, timeout=30, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")  # a 202 to GitHub means the job is on disk
        return db

    def _tx(self):
        return _Tx(self)

    # -- intake ------------------------------------------------------------------------------------
    def accept(self, delivery_id: str, body_sha256: str, event: str, kind: str, payload: Any) -> Accepted:
        now = self.clock()
        with self._tx() as db:
            row = db.execute("SELECT delivery_id FROM deliveries WHERE delivery_id = ? OR body_sha256 = ?",
                             (delivery_id, body_sha256)).fetchone()
            if row is not None:
                reason = "duplicate delivery id" if row[0] == delivery_id else "duplicate body"
                return Accepted(False, None, reason)
            db.execute("INSERT INTO deliveries VALUES (?, ?, ?, ?)", (delivery_id, body_sha256, event, now))
            cur = db.execute(
                "INSERT INTO jobs (key, kind, payload, state, max_attempts, available_at, created, updated) "
                "VALUES (?, ?, ?, 'queued', ?, ?, ?, ?)",
                (delivery_id, kind, json.dumps(payload), self.max_attempts, now, now, now))
            return Accepted(True, cur.lastrowid)

    def enqueue(self, key: str, kind: str, payload: Any) -> Accepted:
        """A job not tied to a delivery (e.g. a follow-up); ``key`` deduplicates."""
        now = self.clock()
        with self._tx() as db:
            if db.execute("SELECT 1 FROM jobs WHERE key = ?", (key,)).fetchone():
                return Accepted(False, None, "duplicate key")
            cur = db.execute(
                "INSERT INTO jobs (key, kind, payload, state, max_attempts, available_at, created, updated) "
                "VALUES (?, ?, ?, 'queued', ?, ?, ?, ?)",
                (key, kind, json.dumps(payload), self.max_attempts, now, now, now))
            return Accepted(True, cur.lastrowid)

    # -- work --------------------------------------------------------------------------------------
    def claim(self, lease_seconds: float = 300.0) -> Job | None:
        now = self.clock()
        with self._tx() as db:
            # Expired leases whose attempts are used up are parked, not handed out again.
            db.execute("UPDATE jobs SET state = 'dead', error = COALESCE(error, 'lease expired'), updated = ?, "
                       "lease_token = NULL WHERE state = 'running' AND lease_until < ? AND attempts >= max_attempts",
                       (now, now))
            row = db.execute(
                "SELECT id, key, kind, payload, attempts FROM jobs WHERE (state = 'queued' AND available_at <= ?) "
                "OR (state = 'running' AND lease_until < ?) ORDER BY id LIMIT 1", (now, now)).fetchone()
            if row is None:
                return None
            token = secrets.token_hex(16)
            db.execute("UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_token = ?, "
                       "lease_until = ?, updated = ? WHERE id = ?", (token, now + lease_seconds, now, row[0]))
            return Job(row[0], row[1], row[2], json.loads(row[3]), row[4] + 1, token)

    def complete(self, job: Job) -> bool:
        with self._tx() as db:
            cur = db.execute("UPDATE jobs SET state = 'done', lease_token = NULL, updated = ?, error = NULL "
                             "WHERE id = ? AND state = 'running' AND lease_token = ?", (self.clock(), job.id, job.token))
            return cur.rowcount == 1

    def fail(self, job: Job, error: str, *, retry_in: float | None = None) -> str:
        """Record a failure; returns the job's new state ('queued' for a retry, 'dead', or 'lost')."""
        now = self.clock()
        delay = retry_in if retry_in is not None else min(600.0, 5.0 * 2 ** (job.attempts - 1))
        with self._tx() as db:
            row = db.execute("SELECT attempts, max_attempts FROM jobs WHERE id = ? AND state = 'running' "
                             "AND lease_token = ?", (job.id, job.token)).fetchone()
            if row is None:
                return "lost"
            state = "dead" if row[0] >= row[1] else "queued"
            db.execute("UPDATE jobs SET state = ?, lease_token = NULL, available_at = ?, updated = ?, error = ? "
                       "WHERE id = ?", (state, now + delay, now, error[:2000], job.id))
            return state

    def extend(self, job: Job, lease_seconds: float) -> bool:
        with self._tx() as db:
            cur = db.execute("UPDATE jobs SET lease_until = ? WHERE id = ? AND state = 'running' AND lease_token = ?",
                             (self.clock() + lease_seconds, job.id, job.token))
            return cur.rowcount == 1

    # -- inspection --------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        with self._tx() as db:
            return {state: n for state, n in db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state")}

    def job(self, job_id: int) -> dict[str, Any] | None:
        with self._tx() as db:
            row = db.execute("SELECT id, key, kind, state, attempts, error FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return dict(zip(("id", "key", "kind", "state", "attempts", "error"), row)) if row else None


class _Tx:
    """One IMMEDIATE transaction on a fresh connection (sqlite connections are not thread-safe)."""

    def __init__(self, q: JobQueue):
        self.q = q

    def __enter__(self) -> sqlite3.Connection:
        self.q._lock.acquire()
        self.db = self.q._connect()
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self.db.close()
            self.q._lock.release()
