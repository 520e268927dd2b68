"""Persisted model calls: one JSONL record per call, enough to audit the cost and to replay the answer.

The prompt hash is the sha256 of the rendered messages (system text + the message list, canonical JSON),
never of model parameters, so a replay finds the answer to the same question even when the model name
in the config changed. Keys never reach this file: records carry only what the model saw and said.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator


def prompt_hash(system: str, messages: list[dict[str, str]]) -> str:
    payload = {"system": system, "messages": [{"role": m["role"], "content": m["content"]} for m in messages]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class CallRecord:
    provider: str
    model: str
    prompt_hash: str
    system: str
    messages: list[dict[str, str]]
    response: str | None  # None when the call failed for good
    response_hash: str | None
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None
    latency_s: float = 0.0
    started: str = ""
    finished: str = ""
    attempts: int = 1  # HTTP attempts, retries included
    stream: bool = False
    purpose: str = "propose"  # "propose" or "repair"
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CallRecord":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


class CallLog:
    """Append-only JSONL file of CallRecords; each append is flushed and fsynced (a crash loses nothing).
    Without a path the records are kept in memory (a campaign that writes nothing)."""

    def __init__(self, path: str | Path | None, fsync: bool = True) -> None:
        self.path = Path(path) if path is not None else None
        self.fsync = fsync
        self._lock = threading.Lock()
        self._kept: list[CallRecord] = []

    def append(self, rec: CallRecord) -> None:
        if self.path is None:
            with self._lock:
                self._kept.append(rec)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(rec.to_dict(), sort_keys=True, ensure_ascii=False)
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())

    def __iter__(self) -> Iterator[CallRecord]:
        if self.path is None:
            return iter(list(self._kept))
        if not self.path.exists():
            return iter(())
        lines = self.path.read_text(encoding="utf-8").splitlines()
        recs = []
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                recs.append(CallRecord.from_dict(json.loads(line)))
            except (json.JSONDecodeError, TypeError) as e:
                if i == len(lines):
                    break  # a torn last line after a crash is expected
                raise ValueError(f"{self.path}:{i}: not a call record: {e}") from None
        return iter(recs)

    def totals(self) -> dict[str, float]:
        t_in = t_out = 0
        cost = 0.0
        n = 0
        for r in self:
            n += 1
            t_in += r.tokens_in
            t_out += r.tokens_out
            cost += r.cost_usd or 0.0
        return {"calls": n, "tokens_in": t_in, "tokens_out": t_out, "cost_usd": cost}
