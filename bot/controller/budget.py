"""Budgets and stop rules of a campaign.

A limit of ``None`` means unlimited. Stop rules (both product paths take their settings from the
promotion policy, ``skills/promotion.yaml``'s ``stop:``; see ``bot.promotion.decision.StopRules``):

- speed of light: the best node is within ``roofline_target`` of the roofline floor on every workload
  (``Roofline.fraction``, whose floor includes the device's launch floor);
- plateau: the last ``patience`` finished candidates (in creation order, failures included) brought no
  gain beyond ``min_gain`` over the best reward before them. Counted over the tree's nodes, not over
  steps, so a campaign rebuilt from records (GitHub: from the PRs, with no step history) judges the
  same plateau as the process that ran it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence


@dataclass
class Budget:
    max_candidates: int | None = 50  # nodes created (failed proposals included)
    max_tokens: int | None = None  # tokens in + out over all model calls
    max_cost_usd: float | None = None
    max_eval_seconds: float | None = None  # evaluation wall time (GPU time) summed over reports
    max_steps: int | None = None
    roofline_target: float | None = 0.95
    patience: int | None = 8  # finished candidates without gain beyond noise before stopping
    min_gain: float = 0.02  # relative gain that counts as progress (noise)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "Budget":
        d = dict(d or {})
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown budget settings {sorted(unknown)}; known: {sorted(cls.__dataclass_fields__)}")
        b = cls(**d)
        for k, v in asdict(b).items():
            if isinstance(v, (int, float)) and v is not None and v < 0:
                raise ValueError(f"budget.{k} must be >= 0")
        return b


@dataclass
class Usage:
    candidates: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    eval_seconds: float = 0.0
    steps: int = 0
    model_calls: int = 0
    best_history: list[float] = field(default_factory=list)  # best reward after each evaluating step

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Usage":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def exceeded(b: Budget, u: Usage) -> str | None:
    """The first budget that is used up, as a sentence, or None."""
    if b.max_candidates is not None and u.candidates >= b.max_candidates:
        return f"candidate budget used ({u.candidates}/{b.max_candidates})"
    if b.max_tokens is not None and u.tokens_in + u.tokens_out >= b.max_tokens:
        return f"token budget used ({u.tokens_in + u.tokens_out}/{b.max_tokens})"
    if b.max_cost_usd is not None and u.cost_usd >= b.max_cost_usd:
        return f"money budget used (${u.cost_usd:.4f}/${b.max_cost_usd:.2f})"
    if b.max_eval_seconds is not None and u.eval_seconds >= b.max_eval_seconds:
        return f"evaluation time budget used ({u.eval_seconds:.1f}/{b.max_eval_seconds:.1f} s)"
    if b.max_steps is not None and u.steps >= b.max_steps:
        return f"step budget used ({u.steps}/{b.max_steps})"
    return None


def converged(b: Budget, rewards: Sequence[float], best_roofline_fraction: float | None) -> str | None:
    """The stop rule that fires, as a sentence, or None. ``rewards``: each finished node's reward in
    creation order (``Tree.reward``; the start included)."""
    if b.roofline_target is not None and best_roofline_fraction is not None and best_roofline_fraction >= b.roofline_target:
        return f"speed of light: the best node is at {best_roofline_fraction:.1%} of the roofline floor on its worst workload (target {b.roofline_target:.0%})"
    return plateau(rewards, b.patience, b.min_gain)


def plateau(rewards: Sequence[float], patience: int | None, min_gain: float) -> str | None:
    """Whether the last ``patience`` rewards improved on the best before them by more than ``min_gain``."""
    if not patience or len(rewards) <= patience:
        return None
    before, now = max(rewards[:-patience]), max(rewards)
    if math.isfinite(before) and now - before <= math.log1p(min_gain):
        return (f"plateau: the last {patience} candidates brought no gain beyond {min_gain:.0%} "
                f"over the best before them ({math.exp(now - before):.3f}x)")
    return None
