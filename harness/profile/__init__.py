"""Evidence collectors: Nsight Compute, Triton compile statistics, SASS facts, NVML energy.

Each collector is optional. When one cannot run (no GPU, no ncu, no pynvml, ...) it reports itself as
*missing* with the reason, and the rule engine marks the rules that needed it as not evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Collected:
    """What one collector produced: flat evidence values, or the reason it has none."""

    source: str
    evidence: dict[str, Any] = field(default_factory=dict)
    missing: str | None = None  # reason, when the collector could not run
    raw: dict[str, Any] = field(default_factory=dict)  # full detail for the report's ``profile`` field

    @property
    def ok(self) -> bool:
        return self.missing is None

    @classmethod
    def unavailable(cls, source: str, reason: str) -> "Collected":
        return cls(source=source, missing=reason)
