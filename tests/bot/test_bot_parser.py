"""The comment parser: valid, invalid and hostile bodies."""

from __future__ import annotations

import pytest

from bot.commands.parser import MAX_BODY_CHARS, MAX_COMMANDS, parse_comment
from bot.commands.spec import specs

S = specs()


def parse(body):
    return parse_comment(body, S)


def test_simple_commands_and_args():
    r = parse("/optimize gdn_decode_qk4_v8_d128_k_last --candidates 3 --agent anthropic --rounds=2")
    assert not r.errors
    (inv,) = r.invocations
    assert inv.name == "optimize"
    assert dict(inv.args) == {"definition": "gdn_decode_qk4_v8_d128_k_last", "candidates": 3,
                              "agent": "anthropic", "rounds": 2}


def test_one_command_per_line_and_prose_ignored():
    body = "Thanks for this!\n/evaluate\nsome text /promote in the middle\n/status\n"
    r = parse(body)
    assert [i.name for i in r.invocations] == ["evaluate", "status"]
    assert [i.line for i in r.invocations] == [2, 4]


def test_no_command_is_empty():
    assert parse("LGTM, nice speedup").empty
    assert parse("/usr/bin/env python is a path, not a command").empty
    assert parse("").empty


@pytest.mark.parametrize("body", [
    "```\n/promote\n```",
    "~~~~\n/promote\n~~~~",
    "```bash\n/stop\n```\n",
    "> /promote",
    ">/promote",
    "    /promote",
    " /promote",
    "- /promote",
    "`/promote`",
    "<!--\n/promote\n-->",
    "<!-- /promote -->",
])
def test_commands_in_code_quotes_and_comments_are_ignored(body):
    r = parse(body)
    assert r.empty, body


def test_fence_must_close_with_same_char():
    # A ~~~ line does not close a ``` fence: /promote is still inside it.
    assert parse("```\n~~~\n/promote\n```\n").empty
    r = parse("```\ncode\n```\n/status")
    assert [i.name for i in r.invocations] == ["status"]


def test_unknown_command_is_reported():
    r = parse("/optimise gdn")
    assert not r.invocations
    assert "unknown command" in r.errors[0].message


@pytest.mark.parametrize("line,needle", [
    ("/optimize --candidates 0", "between 1 and 64"),
    ("/optimize --candidates 65", "between 1 and 64"),
    ("/optimize --candidates 3x", "whole number"),
    ("/optimize --candidates -1", "whole number"),
    ("/optimize --agent gpt", "must be one of"),
    ("/optimize --rounds", "needs a value"),
    ("/optimize --candidates 2 --candidates 3", "given twice"),
    ("/optimize --modle x", "unknown option"),
    ("/optimize modle=x", "unknown option"),
    ("/optimize -c 3", "options are written"),
    ("/optimize a b", "unexpected argument"),
    ("/optimize ../../etc/passwd", "characters outside"),
    ("/optimize ..hidden", "not valid"),
    ("/evaluate now", "unexpected argument"),
    ("/optimize $(rm -rf /)", "characters outside"),
    ("/optimize `id`", "characters outside"),
    ("/optimize gdn;curl x", "characters outside"),
    ("/optimize gdn\u202e", "printable ASCII"),
    ("/optimize " + "a" * 300, "longer than"),
])
def test_strict_values(line, needle):
    r = parse(line)
    assert not r.invocations
    assert needle in r.errors[0].message, r.errors


def test_error_echo_is_sanitized():
    r = parse("/optimize --agent <img src=x onerror=alert(1)>@everyone")
    msg = r.errors[0].message
    assert "<" not in msg and "@" not in msg


def test_too_many_commands_runs_none():
    body = "\n".join(["/status"] * (MAX_COMMANDS + 1))
    r = parse(body)
    assert not r.invocations
    assert any("at most" in e.message for e in r.errors)


def test_oversized_body_rejected():
    r = parse("/status\n" + "x" * MAX_BODY_CHARS)
    assert not r.invocations and r.errors


def test_crlf_and_case():
    r = parse("/Status\r\n/HELP\r\n")
    assert [i.name for i in r.invocations] == ["status", "help"]


def test_non_string_body():
    assert parse_comment(None, S).errors  # type: ignore[arg-type]
