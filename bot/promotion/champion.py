"""The champion pointer ``kernels/<definition>/champion.json`` and the generated ``LEADERBOARD.md``.

``champion.json`` is the pointer the harness and the controller read (current champion: solution
name, content hash, PR, measured head sha, merge sha, summary) plus the lineage of earlier champions,
newest first, from which the leaderboard is rendered. Nothing here measures; numbers come from the
promotion decision and the evaluation report.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from bot.forge.base import Forge
from bot.review.markdown import render_template

MAX_HISTORY = 200
ENTRY_KEYS = ("solution", "solution_hash", "solution_path", "pr", "sha", "merge_sha", "promoted_at", "summary")


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
    for i, r in enumerate(rows):
        r["rank"] = i + 1
        s = r.get("summary") if isinstance(r.get("summary"), Mapping) else {}
        r["s"] = s
    # The baseline column appears once a promotion was measured beside declared baselines, so the
    # leaderboards written before baselines existed render exactly as they were.
    with_baselines = any("geomean_speedup_vs_best_baseline" in r["s"] for r in rows)
    could_not_run = rows[0]["s"].get("baselines_could_not_run")
    return render_template("leaderboard.md.j2", definition=doc.get("definition"), rows=rows, with_baselines=with_baselines,
                           could_not_run=could_not_run if isinstance(could_not_run, Mapping) else None)


def champion_path(definition: str) -> str:
    return f"kernels/{definition}/champion.json"


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

