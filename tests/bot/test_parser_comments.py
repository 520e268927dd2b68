"""`<!--` anywhere on a line opens an HTML comment: commands hidden after it never run."""

from __future__ import annotations

import pytest

from bot.commands.parser import parse_comment, visible_lines
from bot.commands.spec import specs


def parse(body):
    return parse_comment(body, specs())


@pytest.mark.parametrize("body", [
    "looks harmless <!--\n/promote\n-->",
    "text <!-- a --> more <!--\n/stop\n-->",
    "<!-- a --> <!--\n/promote\n-->",
    "<!--\nhidden\n--> visible <!--\n/promote\n-->",
    "x<!--\n\n/optimize foo\n-->",
])
def test_commands_after_a_mid_line_comment_opener_are_hidden(body):
    assert parse(body).empty, body


def test_comment_closed_on_the_same_line_keeps_later_lines_visible():
    r = parse("note <!-- internal -->\n/status")
    assert [i.name for i in r.invocations] == ["status"] and not r.errors


def test_only_the_text_before_the_opener_is_visible():
    assert visible_lines("/status <!-- /promote -->") == [(1, "/status")]
    assert [i.name for i in parse("/status <!-- /promote -->").invocations] == ["status"]
    assert visible_lines("a <!--\nb\nc --> d\ne") == [(1, "a"), (4, "e")]
