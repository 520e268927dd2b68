"""Search memory for one definition: what was tried and how it went, error -> fix pairs, API facts.

Persisted as one JSON file (written atomically) and fed back into prompts (``prompt_view``) so an agent
does not repeat a failed idea or re-learn a fix. The offline agent uses ``has_tried`` to never propose a
configuration twice.

It outlives a campaign: locally every campaign of a definition shares the workspace's
``memory/<definition>.json`` (``bot.campaign.local_loop``), so campaign 2 starts with what campaign 1
tried, fixed and learned; on GitHub it is rebuilt from the PRs' records (``bot.campaign.github_campaign``).
Each attempt names the campaign (``session``) it was made in: its speedup is against that campaign's
starting point, so the prompt shows earlier campaigns' attempts apart from the current one's.

What was tried is only known for the inputs it was measured on: every ``tried`` entry records the
campaign's ``inputs`` fingerprint (the definition, its sidecar's settings and reference code, the
workloads; ``Evaluator.inputs_fingerprint``; not the harness's own generator or comparator code).
Under other inputs an entry does not count as tried, so a configuration rejected before the inputs
changed is proposed again. Entries from before fingerprints were recorded have none and still count
(what they were measured on is unknown).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

VERSION = 1

# Errors that state a fact about the toolchain or the hardware, worth telling every later prompt.
FACT_PATTERNS = (
    (re.compile(r"module '([\w.]+)' has no attribute '(\w+)'"), "{0}.{1} does not exist in the installed version"),
    (re.compile(r"out of resource: shared memory, Required: (\d+), Hardware limit: (\d+)"),
     "shared memory per block is limited to {1} bytes (a configuration needing {0} failed to launch)"),
    (re.compile(r"arange's range must be a power of 2"), "tl.arange needs a power-of-2 range (pad and mask)"),
    (re.compile(r"out of resource: (\w+)"), "launch ran out of {0}: use smaller tiles, fewer stages or warps"),
)


def facts_from_error(message: str) -> list[str]:
    out = []
    for pattern, template in FACT_PATTERNS:
        m = pattern.search(message or "")
        if m:
            out.append(template.format(*m.groups()))
            break  # the most specific pattern only
    return out


class SearchMemory:
    def __init__(self, definition: str, path: str | Path | None = None) -> None:
        self.definition = definition
        self.path = Path(path) if path else None
        self.tried: dict[str, dict[str, Any]] = {}  # config key -> {node, status, speedup}
        self.attempts: list[dict[str, Any]] = []  # node, parent, rationale, status, speedup (in order)
        self.fixes: list[dict[str, Any]] = []  # {error, fix, node}
        self.facts: list[str] = []  # API facts and lessons (deduplicated)
        self.fsync = True
        self.session: str | None = None  # the campaign now writing (its attempts are tagged with it)
        self.inputs: str | None = None  # the fingerprint of what the campaign now writing measures on

    # -- persistence -------------------------------------------------------------------------------
    @classmethod
    def load(cls, definition: str, path: str | Path) -> "SearchMemory":
        mem = cls(definition, path)
        p = Path(path)
        if not p.exists():
            return mem
        try:
            data = json.loads(p.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{p}: search memory is not valid JSON ({e.msg} at line {e.lineno})") from None
        if data.get("definition") != definition:
            raise ValueError(f"{p}: memory is for '{data.get('definition')}', not '{definition}'")
        mem.tried = dict(data.get("tried", {}))
        mem.attempts = list(data.get("attempts", []))
        mem.fixes = list(data.get("fixes", []))
        mem.facts = list(data.get("facts", []))
        return mem

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "definition": self.definition,
            "tried": self.tried,
            "attempts": self.attempts,
            "fixes": self.fixes,
            "facts": self.facts,
        }

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".memory-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(self.to_dict(), f, indent=1, sort_keys=True)
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        os.replace(tmp, self.path)

    # -- updates -----------------------------------------------------------------------------------
    def has_tried(self, key: str) -> bool:
        """Tried on the inputs this campaign measures on (or on unrecorded ones: an entry without a
        fingerprint counts, and every entry counts while this memory's own fingerprint is unset)."""
        e = self.tried.get(key)
        return e is not None and (self.inputs is None or e.get("inputs") in (None, self.inputs))

    def _stamp(self, entry: dict[str, Any]) -> dict[str, Any]:
        return {**entry, "inputs": self.inputs} if self.inputs is not None else entry

    def note_proposed(self, key: str | None, node: str) -> None:
        if key and not self.has_tried(key):
            self.tried[key] = self._stamp({"node": node, "status": "pending", "speedup": None})

    def note_result(
        self,
        node: str,
        parent: str | None,
        key: str | None,
        rationale: str,
        status: str,
        speedup: float | None,
        parent_error: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> None:
        if key:
            self.tried[key] = self._stamp({"node": node, "status": status, "speedup": speedup})
        if any(a["node"] == node for a in self.attempts):
            return
        self.attempts.append(
            {
                "node": node,
                "parent": parent,
                "rationale": rationale[:300],
                "status": status,
                "speedup": speedup,
                "error": (error or {}).get("message", "")[:300] if error else None,
                "session": self.session,
                **({"inputs": self.inputs} if self.inputs is not None else {}),
            }
        )
        for fact in facts_from_error(str((error or {}).get("message", ""))):
            self.add_fact(fact)
        # A passing child of a failing parent is a fix for the parent's error.
        if parent_error and status == "PASSED":
            fix = {"error": str(parent_error.get("message", ""))[:500], "fix": rationale[:500], "node": node}
            if not any(f["node"] == node for f in self.fixes):
                self.fixes.append(fix)

    def add_fact(self, fact: str) -> None:
        fact = fact.strip()
        if fact and fact not in self.facts:
            self.facts.append(fact)

    def merge(self, other: "SearchMemory") -> None:
        """Add what ``other`` (an earlier campaign's own memory file) knows and this one does not."""
        if other.definition != self.definition:
            raise ValueError(f"cannot merge the memory of '{other.definition}' into '{self.definition}'")
        for key, v in other.tried.items():
            self.tried.setdefault(key, v)
        seen = {(a.get("session"), a["node"]) for a in self.attempts}
        self.attempts.extend(a for a in other.attempts if (a.get("session"), a["node"]) not in seen)
        nodes = {f["node"] for f in self.fixes}
        self.fixes.extend(f for f in other.fixes if f["node"] not in nodes)
        for fact in other.facts:
            self.add_fact(fact)

    # -- prompt view -------------------------------------------------------------------------------
    def prompt_view(self, max_attempts: int = 20, max_fixes: int = 10, max_earlier: int = 8) -> dict[str, Any]:
        """What goes into a prompt: this campaign's best and most recent attempts, the best and the
        failures of earlier campaigns (apart: their speedups have another starting point), fixes, facts."""
        done = [a for a in self.attempts if a["status"] != "pending"]
        # Without a session (a memory read on its own, or GitHub's one tree) every attempt is current.
        now = [a for a in done if self.session is None or a.get("session") == self.session]
        before = [a for a in done if a not in now]
        best = sorted((a for a in now if a.get("speedup")), key=lambda a: -a["speedup"])[: max_attempts // 2]
        failures = [a for a in now if a["status"] not in ("PASSED", "pending")][-5:]
        recent = [a for a in now[-max_attempts:] if a not in best and a not in failures][-(max_attempts - len(best)) :]
        earlier_best = sorted((a for a in before if a.get("speedup") and a["status"] == "PASSED"),
                              key=lambda a: -a["speedup"])[: max_earlier // 2]
        earlier_failed = [a for a in before if a["status"] not in ("PASSED", "pending")][-(max_earlier - len(earlier_best)):]
        return {
            "best": best,
            "recent": recent,
            "failures": failures,
            "earlier": earlier_best + earlier_failed,
            "earlier_campaigns": len({a.get("session") for a in before}),
            "fixes": self.fixes[-max_fixes:],
            "facts": self.facts[-20:],
            "tried_configs": len(self.tried),
        }
