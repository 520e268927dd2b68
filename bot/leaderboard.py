"""The champion pointer document and the generated ``kernels/<definition>/LEADERBOARD.md``.

``champion.json`` is the pointer the harness and the controller read (current champion: solution
name, content hash, PR, measured head sha, merge sha, summary) plus the lineage of earlier champions,
newest first, from which the leaderboard is rendered. Nothing here measures; numbers come from the
promotion decision and the evaluation report.
"""

from __future__ import annotations

from typing import Any, Mapping

from bot.review import _ENV

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
    return _ENV.get_template("leaderboard.md.j2").render(definition=doc.get("definition"), rows=rows)
