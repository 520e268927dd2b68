"""The comment that closes losing candidates escapes names that came from the report."""

from __future__ import annotations

from candkit import bot_candidate
from memforge import MemForge
from reportkit import good

from bot.review.publish import publish_results

DEF = "gdn_decode_qk4_v8_d128_k_last"


def test_close_comment_escapes_report_names():
    forge = MemForge()
    loser = bot_candidate(forge, DEF, "n1")
    publish_results(forge, loser.number, loser.head_sha,
                    report=good(baseline=None, baseline_hash=None, definition=DEF), promote=False)
    winner = bot_candidate(forge, DEF, "n2", solution_hash="e" * 64)
    evil = "x @octo/admins [click](https://e.vil) <!-- kbot:review --> `code`"
    rep = good(baseline=None, baseline_hash=None, definition=DEF, solution=evil, solution_hash="e" * 64)
    out = publish_results(forge, winner.number, winner.head_sha, report=rep)
    assert out.closed == [loser.number]
    (comment,) = [c.body for c in forge.comments[loser.number] if "Closed by kbot" in c.body]
    assert "@octo" not in comment and "](" not in comment and "https://" not in comment
    assert "<!--" not in comment.split("\n", 1)[1] and "`code`" not in comment
