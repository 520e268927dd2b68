"""The review says which OS isolation the candidate code had (skills/reports/review.md.j2), loudly
when it had none."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reportkit import good  # noqa: E402

from bot.review.sticky_review import render_review  # noqa: E402

SANDBOXED = {"mode": "required", "enforced": True, "workers": [],
             "summary": "sandboxed (landlock+seccomp, Landlock ABI 7): filesystem, tcp, sockets"}
UNSANDBOXED = {"mode": "auto", "enforced": False, "workers": [], "summary": "NOT sandboxed (none): no Landlock"}


def _isolation_row(body: str) -> str | None:
    return next((ln for ln in body.splitlines() if ln.startswith("| isolation |")), None)


def test_a_sandboxed_evaluation_says_how():
    rep = good()
    rep.isolation = dict(SANDBOXED)
    row = _isolation_row(render_review(rep))
    assert row is not None and "sandboxed" in row and "Landlock ABI 7" in row and "⚠" not in row  # () are escaped


def test_an_unsandboxed_evaluation_is_flagged():
    rep = good()
    rep.isolation = dict(UNSANDBOXED)
    row = _isolation_row(render_review(rep))
    assert row is not None and "⚠" in row and "NOT sandboxed" in row and "sandbox mode auto" in row


def test_a_report_from_before_isolation_was_recorded_has_no_row():
    assert _isolation_row(render_review(good())) is None
