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


# -- commands a reader cannot see: inside a quote (lazily continued), a collapsed <details>, a tag -----

@pytest.mark.parametrize("body", [
    # CommonMark's lazy continuation: a paragraph line after a quoted one is still in the quote
    "> I would not run\n/promote",
    "> quoted\nstill quoted\n/promote",
    ">> nested\n/stop",
    "   > indented quote marker\n/promote",
    "> - a list in the quote\n/promote",
    # a collapsed <details>: hidden until the reader opens it
    "<details>\n<summary>logs</summary>\n\n/promote\n\n</details>",
    "<details><summary>x</summary>\n/promote\n</details>",
    "<DETAILS open>\n/promote\n</DETAILS>",
    "<details>\n<details>\ninner\n</details>\n/promote\n</details>",
    "text <details>\n/promote\n</details>",
    # inside an HTML tag spread over lines: an attribute value, never shown as text
    '<img alt="\n/promote\n" src="x.png">',
    "<img\nalt='x\n/promote\n'\nsrc=y>",
    '<a title="\n/stop\n">link</a>',
    '<img src="x" alt="a > b\n/promote\n">',
])
def test_commands_a_reader_cannot_see_do_not_run(body):
    assert parse(body).empty, body


@pytest.mark.parametrize("body, names", [
    ("> quoted\n\n/status", ["status"]),                 # a blank line ends the quote
    ("> ```\n/status", ["status"]),                     # a fence in a quote is no paragraph: no laziness
    ("<details>\n/promote\n</details>\n/status", ["status"]),
    ("<details><summary>s</summary>body</details>\n/status", ["status"]),
    ('<img alt="x" src="y">\n/status', ["status"]),
    ("use `<details>` for logs\n/status", ["status"]),  # a tag in inline code is text
    ("a < b and c > d\n/status", ["status"]),           # comparisons are not tags
    ("x <b>bold</b>\n/status", ["status"]),
])
def test_what_a_reader_sees_still_runs(body, names):
    r = parse(body)
    assert [i.name for i in r.invocations] == names and not r.errors, body
