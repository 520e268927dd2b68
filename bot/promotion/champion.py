"""The champion pointer ``kernels/<definition>/champion.json`` and the generated ``LEADERBOARD.md``.

``champion.json`` is the pointer the harness and the controller read (current champion: solution
name, content hash, PR, measured head sha, merge sha, summary) plus the lineage of earlier champions,
newest first, from which the leaderboard is rendered. Nothing here measures; numbers come from the
promotion decision and the evaluation report.

The lineage is also the one record of how far the champions came: each promotion's
``summary.speedup_vs_previous`` is its paired ratio against the champion it replaced, and
``champion_lineage`` chains those ratios from the oldest champion on record (the start), so every
champion's "speedup over the start" is a product of paired measurements, never a ratio of two
unpaired runs. The leaderboard's "vs start" column, the search tree's rewards on GitHub and the
campaign summaries all read it from here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

from bot.forge.base import Forge
from bot.review.markdown import render_template

MAX_HISTORY = 200
ENTRY_KEYS = ("solution", "solution_hash", "solution_path", "pr", "sha", "merge_sha", "promoted_at", "summary")
_HASH = re.compile(r"^[0-9a-f]{64}$")


def champion_lineage(doc: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Champion entries oldest first, each with ``factor``: its speedup over the oldest one, the product
    of each later promotion's paired ``speedup_vs_previous`` (None from the first link that is unknown:
    a hand-edited pointer, a promotion recorded without a pairing)."""
    if not doc or not isinstance(doc.get("solution_hash"), str):
        return []
    entries = [dict(doc)] + [dict(h) for h in doc.get("history") or [] if isinstance(h, Mapping)]
    entries = [e for e in reversed(entries) if isinstance(e.get("solution_hash"), str) and _HASH.match(e["solution_hash"])]
    factor: float | None = 1.0
    for i, e in enumerate(entries):
        if i:
            s = e.get("summary") if isinstance(e.get("summary"), Mapping) else {}
            sp = s.get("speedup_vs_previous")
            ok = isinstance(sp, (int, float)) and not isinstance(sp, bool) and sp > 0
            factor = factor * sp if factor is not None and ok else None
        e["factor"] = factor
    return entries


def chain_factors(doc: Mapping[str, Any] | None) -> dict[str, float]:
    """``{solution_hash: speedup over the oldest champion}`` for every champion of the lineage whose
    chain is known (a campaign that began from a later champion divides by that one's factor)."""
    return {e["solution_hash"]: e["factor"] for e in champion_lineage(doc) if e["factor"] is not None}


def updated_champion(old: Mapping[str, Any] | None, definition: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """The new pointer document: ``entry`` is the champion, the previous one moves into ``history``."""
    history: list[dict[str, Any]] = []
    if old and isinstance(old.get("solution_hash"), str):
        if old.get("solution_hash") == entry.get("solution_hash") and old.get("pr") == entry.get("pr"):
            # Re-running a promotion that already landed must not duplicate the lineage.
            history = list(old.get("history") or [])
        else:
            history = [{k: old.get(k) for k in ENTRY_KEYS}] + list(old.get("history") or [])
    doc = {"kbot_champion": 1, "definition": definition, **{k: entry.get(k) for k in ENTRY_KEYS}}
    doc["history"] = [h for h in history if isinstance(h, Mapping)][:MAX_HISTORY]
    return doc


def render_leaderboard(doc: Mapping[str, Any]) -> str:
    """LEADERBOARD.md for one definition, from the champion document."""
    rows = [{k: doc.get(k) for k in ENTRY_KEYS}] + list(doc.get("history") or [])
    factors = {e["solution_hash"]: e["factor"] for e in champion_lineage(doc)}
    for i, r in enumerate(rows):
        r["rank"] = i + 1
        s = r.get("summary") if isinstance(r.get("summary"), Mapping) else {}
        r["s"] = s
        r["vs_start"] = factors.get(r.get("solution_hash")) if isinstance(r.get("solution_hash"), str) else None
    # The baseline column appears once a promotion was measured beside declared baselines, so the
    # leaderboards written before baselines existed render exactly as they were.
    with_baselines = any("geomean_speedup_vs_best_baseline" in r["s"] for r in rows)
    # Likewise the card column, once a promotion recorded the card it was measured on.
    with_device = any(isinstance(r["s"].get("measured_on"), str) for r in rows)
    could_not_run = rows[0]["s"].get("baselines_could_not_run")
    return render_template("leaderboard.md.j2", definition=doc.get("definition"), rows=rows, with_baselines=with_baselines,
                           with_device=with_device, could_not_run=could_not_run if isinstance(could_not_run, Mapping) else None)


def champion_path(definition: str) -> str:
    return f"kernels/{definition}/champion.json"


def champion_solution_file(repo: Path, definition: str) -> Path | None:
    """The champion's solution.json in a checkout (the pointer's ``solution_path``), or None without a champion."""
    pointer = repo / champion_path(definition)
    if not pointer.is_file():
        return None
    path = json.loads(pointer.read_text()).get("solution_path")
    return repo / path if isinstance(path, str) and (repo / path).is_file() else None


def leaderboard_path(definition: str) -> str:
    return f"kernels/{definition}/LEADERBOARD.md"


def read_champion(forge: Forge, definition: str, ref: str | None = None) -> dict[str, Any] | None:
    raw = forge.read_file(champion_path(definition), ref=ref or forge.default_branch())
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None



def champion_mentions(champ: Mapping[str, Any] | None, pr_number: int) -> bool:
    """Whether the pointer document records ``pr_number`` as the champion or in its lineage."""
    if not champ:
        return False
    entries = [champ] + [h for h in champ.get("history") or [] if isinstance(h, Mapping)]
    return any(e.get("pr") == pr_number for e in entries)

