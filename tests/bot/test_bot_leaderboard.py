"""The champion pointer document and the generated leaderboard."""

from __future__ import annotations

from bot.promotion.champion import render_leaderboard, updated_champion


def entry(name, pr, sp=None, h="1"):
    return {"solution": name, "solution_hash": h * 64, "solution_path": f"kernels/d/{name}.json", "pr": pr,
            "sha": "a" * 40, "merge_sha": "b" * 40, "promoted_at": "2026-11-29T10:00:00Z",
            "summary": {"speedup_vs_previous": sp, "ci95_vs_previous": [sp * 0.98, sp * 1.02] if sp else None,
                        "workloads": 3, "mean_speedup_vs_reference": 2.5}}


def test_lineage_and_idempotence():
    d1 = updated_champion(None, "d", entry("v1", 1))
    assert d1["solution"] == "v1" and d1["history"] == []
    d2 = updated_champion(d1, "d", entry("v2", 2, 1.2, "2"))
    assert d2["solution"] == "v2" and [h["solution"] for h in d2["history"]] == ["v1"]
    # re-applying the same promotion does not duplicate the lineage
    assert updated_champion(d2, "d", entry("v2", 2, 1.2, "2"))["history"] == d2["history"]


def test_render():
    doc = updated_champion(updated_champion(None, "d", entry("v1", 1)), "d", entry("v2|<b>@x", 2, 1.2, "2"))
    md = render_leaderboard(doc)
    lines = [line for line in md.splitlines() if line.startswith("| 1") or line.startswith("| 2")]
    assert len(lines) == 2
    assert "(champion)" in lines[0] and "1.200x [1.176, 1.224]" in lines[0] and "#2" in lines[0]
    assert "first" in lines[1] and "2.500x" in lines[1]
    assert "<b>" not in md and "@x" not in md and "v2\\|" in md
