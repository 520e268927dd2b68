"""The promotion policy (``skills/promotion.yaml``), read from the default branch at the time of each
decision; built-in defaults when the file is absent, a PolicyError when it says something invalid."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.forge.base import Forge
from bot.policy_file import PolicyError, parse_policy

PROMOTION_PATH = "skills/promotion.yaml"


class PromotionPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1] = 1
    require_all_passed: Literal[True] = True
    require_guard_clean: bool = True
    min_speedup: float = Field(1.03, ge=1.0, le=100.0)
    min_ci_lower: float = Field(1.0, ge=0.5, le=100.0)
    max_regression: float = Field(0.02, ge=0.0, le=0.5)
    first_champion_min_speedup_vs_reference: float = Field(1.0, ge=0.0, le=1000.0)
    require_up_to_date: bool = True
    merge_method: Literal["squash", "merge", "rebase"] = "squash"
    close_losers: bool = True

    @classmethod
    def from_yaml(cls, text: str, where: str = PROMOTION_PATH) -> "PromotionPolicy":
        return parse_policy(cls, text, where)


def load_promotion_policy(forge: Forge) -> PromotionPolicy:
    raw = forge.read_file(PROMOTION_PATH, ref=forge.default_branch())
    if raw is None:
        return PromotionPolicy()
    try:
        return PromotionPolicy.from_yaml(raw.decode() if isinstance(raw, bytes) else raw)
    except UnicodeDecodeError:
        raise PolicyError(f"{PROMOTION_PATH}: not UTF-8") from None

