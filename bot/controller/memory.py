"""Search memory for one definition: what was tried and how it went, error -> fix pairs, API facts.

Persisted as one JSON file (written atomically) and fed back into prompts (``prompt_view``) so an agent
does not repeat a failed idea or re-learn a fix. The offline agent uses ``has_tried`` to never propose a
configuration twice.
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
        return key in self.tried

    def note_proposed(self, key: str | None, node: str) -> None:
        if key and key not in self.tried:
            self.tried[key] = {"node": node, "status": "pending", "speedup": None}

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
            self.tried[key] = {"node": node, "status": status, "speedup": speedup}
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
            }
        )
        for fact in facts_from_error(str((error or {}).get("message", ""))):
            self.add_fact(fact)
        # A passing child of a failing parent is a fix for the parent's error.
        if parent_error and status == "PASSED":
            self.fixes.append({"error": str(parent_error.get("message", ""))[:500], "fix": rationale[:500], "node": node})

    def add_fact(self, fact: str) -> None:
        fact = fact.strip()
        if fact and fact not in self.facts:
            self.facts.append(fact)

    # -- prompt view -------------------------------------------------------------------------------
    def prompt_view(self, max_attempts: int = 20, max_fixes: int = 10) -> dict[str, Any]:
        """What goes into a prompt: the best and the most recent attempts, fixes, facts."""
        done = [a for a in self.attempts if a["status"] != "pending"]
        best = sorted((a for a in done if a.get("speedup")), key=lambda a: -a["speedup"])[: max_attempts // 2]
        failures = [a for a in done if a["status"] not in ("PASSED", "pending")][-5:]
        recent = [a for a in done[-max_attempts:] if a not in best and a not in failures][-(max_attempts - len(best)) :]
        return {
            "best": best,
            "recent": recent,
            "failures": failures,
            "fixes": self.fixes[-max_fixes:],
            "facts": self.facts[-20:],
            "tried_configs": len(self.tried),
        }
