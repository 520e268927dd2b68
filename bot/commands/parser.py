"""Comment body → command invocations.

A comment body is hostile input: anybody who can comment can write anything into it. The parser is
therefore strict and small:

- only lines that start with `/` in the first column are candidates (so quoted lines `> /x`, indented
  code and list items are never commands), one command per line;
- what a reader does not see is not a command (``visible_lines``): fenced code blocks, HTML comments,
  the inside of a tag spread over lines (a multi-line ``<img alt>``), ``<details>`` content, and block
  quotes with the lines a quoted paragraph lazily continues onto;
- a command word must be a registered command (`/usr/bin/x` and prose like `/s` are not commands; an
  unknown `/word` is reported so a typo gets help rather than silence);
- arguments are whitespace-separated tokens from a small alphabet, bounded in count and length, each
  value checked against the command's spec (integers in range, choices from a list, names by regex).

Errors come back as data (line number + message) so the caller can answer with help.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

MAX_BODY_CHARS = 65_536  # GitHub's own limit on a comment body
MAX_LINE_CHARS = 200
MAX_TOKENS = 12
MAX_COMMANDS = 3  # per comment; more is almost surely a paste or an attack
MAX_ERRORS = 5

_COMMAND_LINE = re.compile(r"^/([A-Za-z][A-Za-z0-9_-]{0,31})(?=\s|$)(.*)$")
_TOKEN = re.compile(r"^[A-Za-z0-9_.:=+-]{1,128}$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_KEY_VALUE = re.compile(r"^[a-z][a-z0-9_-]{0,31}=")


class ArgError(ValueError):
    """A value that does not satisfy its argument spec."""


@dataclass(frozen=True)
class Flag:
    """One `--name value` option (also written `name=value`). `kind` is int, number (a decimal within
    lo..hi), choice, text (a token that full-matches `pattern`), or flag (a bare switch)."""

    name: str
    kind: str
    help: str
    lo: float = 0
    hi: float = 0
    pattern: str = ""
    # the values a "choice" accepts, or a function that lists them when asked (a table that plugins extend)
    choices: tuple[str, ...] | Callable[[], Sequence[str]] = ()
    # what /help lists for a "choice", given the policy (default: every accepted value)
    listed: Callable[[Any], Sequence[str]] | None = None

    def allowed(self) -> tuple[str, ...]:
        return tuple(self.choices() if callable(self.choices) else self.choices)

    def shown(self, policy: Any = None) -> tuple[str, ...]:
        return tuple(self.listed(policy)) if self.listed is not None and policy is not None else self.allowed()

    def convert(self, raw: str | None) -> Any:
        if self.kind == "flag":
            if raw is not None:
                raise ArgError(f"--{self.name} takes no value")
            return True
        if raw is None:
            raise ArgError(f"--{self.name} needs a value")
        if self.kind == "int":
            if not re.fullmatch(r"[0-9]{1,6}", raw):
                raise ArgError(f"--{self.name} must be a whole number, got {_quote(raw)}")
            n = int(raw)
            if not self.lo <= n <= self.hi:
                raise ArgError(f"--{self.name} must be between {self.lo} and {self.hi}, got {n}")
            return n
        if self.kind == "number":
            if not re.fullmatch(r"[0-9]{1,6}(?:\.[0-9]{1,6})?", raw):
                raise ArgError(f"--{self.name} must be a decimal number like 0.7, got {_quote(raw)}")
            x = float(raw)
            if not self.lo <= x <= self.hi:
                raise ArgError(f"--{self.name} must be between {self.lo:g} and {self.hi:g}, got {x:g}")
            return x
        if self.kind == "text":
            if not re.fullmatch(self.pattern, raw):
                raise ArgError(f"--{self.name} {_quote(raw)} is not valid ({self.help})")
            return raw
        if self.kind == "choice":
            allowed = self.allowed()
            if raw not in allowed:
                raise ArgError(f"--{self.name} must be one of {', '.join(allowed)}; got {_quote(raw)}")
            return raw
        raise AssertionError(f"unknown flag kind {self.kind}")


@dataclass(frozen=True)
class Positional:
    name: str
    help: str
    pattern: str  # full-match regex
    required: bool = False


@dataclass(frozen=True)
class Invocation:
    name: str
    line: int  # 1-based line of the comment body
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ParseError:
    line: int  # 0 when it concerns the whole body
    message: str


@dataclass(frozen=True)
class ParseResult:
    invocations: tuple[Invocation, ...]
    errors: tuple[ParseError, ...]

    @property
    def empty(self) -> bool:
        return not self.invocations and not self.errors


def _quote(raw: str, cap: int = 40) -> str:
    """Echo a user token back safely: only the token alphabet survives, length-capped."""
    cleaned = re.sub(r"[^A-Za-z0-9_.:=+-]", "?", raw[:cap])
    return f"'{cleaned}'" + ("…" if len(raw) > cap else "")


@dataclass
class _HtmlState:
    """Where the HTML scanner is at the end of a line: in text, an HTML comment, or a tag (with the quote
    character of an attribute value still open), and how many ``<details>`` elements are open."""

    state: str = "text"          # text | comment | tag
    quote: str | None = None     # inside a tag: the open attribute quote
    tag: str = ""                # inside a tag: its name, lowercase
    closing: bool = False        # inside a tag: it is a closing tag (``</...``)
    details: int = 0             # open <details> elements: their content is collapsed


def visible_lines(body: str) -> list[tuple[int, str]]:
    """(line number, text) of the lines a reader sees as ordinary text of the comment, from their start.

    Hidden, so never commands: fenced code blocks; HTML comments; the inside of an HTML tag (an
    attribute value spread over lines, e.g. a multi-line ``<img alt="...">``); everything inside a
    ``<details>`` element (collapsed; open or not, fail closed); block quotes, including the lines a
    quoted paragraph continues onto without a ``>`` (CommonMark's lazy continuation). Of a line that
    starts visible only the text before a comment, a ``<details>`` or a tag left open is kept.
    """
    out: list[tuple[int, str]] = []
    fence: str | None = None
    html = _HtmlState()
    quoted_paragraph = False  # the previous line was paragraph text inside a block quote
    for i, line in enumerate(body.split("\n"), start=1):
        line = line.rstrip("\r")
        if fence is not None:
            m = _FENCE.match(line)
            # A fence closes with the same character, at least as long, and nothing after it.
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip()[len(m.group(1)):].strip():
                fence = None
            continue
        if not line.strip():
            quoted_paragraph = False
            if html.state == "tag":  # a tag cannot span a blank line: what came before was text
                html.state, html.quote = "text", None
            continue
        started_hidden = html.state != "text" or html.details > 0
        if html.state == "text":
            m = _FENCE.match(line)
            if m:
                fence, quoted_paragraph = m.group(1), False
                continue
        is_quote = bool(_QUOTE.match(line))
        lazy = not is_quote and quoted_paragraph and not _INTERRUPTS.match(line)
        cut = _scan_html(line, html)
        if is_quote:
            content = _QUOTE_MARKERS.sub("", line)
            quoted_paragraph = bool(content.strip()) and not _NOT_PARAGRAPH.match(content)
            continue
        if lazy:
            continue  # still inside the quoted paragraph
        quoted_paragraph = False
        if started_hidden:
            continue
        visible = line[:cut].rstrip()
        if visible.strip():
            out.append((i, visible))
    return out


_QUOTE = re.compile(r"^ {0,3}>")
_QUOTE_MARKERS = re.compile(r"^(?: {0,3}> ?)+")
# Lines that end a paragraph instead of continuing it: headings, thematic breaks, list items, fences,
# HTML blocks (CommonMark: "can interrupt a paragraph").
_INTERRUPTS = re.compile(r"^ {0,3}(?:#{1,6}(?:[ \t]|$)|(?:[-*_][ \t]*){3,}$|[-+*][ \t]|\d{1,9}[.)][ \t]|`{3,}|~{3,}|<)")
# Quoted content that is not a paragraph (so nothing continues it lazily): code, headings, breaks.
_NOT_PARAGRAPH = re.compile(r"^(?: {4}|\t| {0,3}(?:`{3,}|~{3,}|#{1,6}(?:[ \t]|$)|(?:[-*_][ \t]*){3,}$))")
_TAG_OPEN = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)")
_BACKTICKS = re.compile(r"`+")


def _scan_html(line: str, st: _HtmlState) -> int:
    """Advance ``st`` over ``line``; returns where the text visible from the line's start ends: the
    first comment opener, ``<details>`` or tag still open at the end of the line (else the length)."""
    cut = len(line)
    tag_at = -1
    i, n = 0, len(line)
    while i < n:
        if st.state == "comment":
            j = line.find("-->", i)
            if j < 0:
                break
            st.state, i = "text", j + 3
            continue
        if st.state == "tag":
            c = line[i]
            if st.quote:
                if c == st.quote:
                    st.quote = None
            elif c in "\"'":
                st.quote = c
            elif c == ">":
                st.state = "text"
                if st.tag == "details":
                    if st.closing:
                        st.details = max(0, st.details - 1)
                    else:
                        st.details += 1
                        if tag_at >= 0:
                            cut = min(cut, tag_at)
            i += 1
            continue
        c = line[i]
        if c == "`":  # an inline code span is text, whatever it holds
            run = _BACKTICKS.match(line, i).group(0)
            end = line.find(run, i + len(run))
            i = end + len(run) if end >= 0 else i + len(run)
            continue
        if line.startswith("<!--", i):
            cut, st.state, i = min(cut, i), "comment", i + 4
            continue
        m = _TAG_OPEN.match(line, i)
        if m:
            st.state, st.quote, st.tag, st.closing = "tag", None, m.group(2).lower(), bool(m.group(1))
            tag_at, i = i, m.end()
            continue
        i += 1
    if st.state == "tag" and tag_at >= 0:
        cut = min(cut, tag_at)
    return cut


def parse_comment(body: str, specs: Mapping[str, Any]) -> ParseResult:
    """Parse a comment body against the registered command specs (name → CommandSpec)."""
    if not isinstance(body, str):
        return ParseResult((), (ParseError(0, "comment body is not text"),))
    if len(body) > MAX_BODY_CHARS:
        return ParseResult((), (ParseError(0, f"comment is longer than {MAX_BODY_CHARS} characters"),))
    invocations: list[Invocation] = []
    errors: list[ParseError] = []
    for lineno, line in visible_lines(body):
        if not line.startswith("/"):
            continue
        m = _COMMAND_LINE.match(line)
        if not m:
            continue  # "/usr/bin/x", "/ something": prose, not a command
        name = m.group(1).lower()
        if name not in specs:
            errors.append(ParseError(lineno, f"unknown command {_quote('/' + name)}"))
            continue
        if len(line) > MAX_LINE_CHARS:
            errors.append(ParseError(lineno, f"/{name}: line longer than {MAX_LINE_CHARS} characters"))
            continue
        try:
            args = parse_args(specs[name], m.group(2))
        except ArgError as e:
            errors.append(ParseError(lineno, f"/{name}: {e}"))
            continue
        invocations.append(Invocation(name, lineno, args))
    if len(invocations) > MAX_COMMANDS:
        errors.append(ParseError(0, f"at most {MAX_COMMANDS} commands per comment; none was run"))
        invocations = []
    return ParseResult(tuple(invocations), tuple(errors[:MAX_ERRORS]))


def parse_args(spec: Any, rest: str) -> dict[str, Any]:
    """Tokens after the command word → {name: value}, validated against the spec."""
    if any(ord(c) < 32 and c not in "\t" for c in rest) or any(ord(c) > 126 for c in rest):
        raise ArgError("arguments may contain only printable ASCII")
    tokens = rest.split()
    if len(tokens) > MAX_TOKENS:
        raise ArgError(f"too many arguments (at most {MAX_TOKENS})")
    args: dict[str, Any] = {}
    flags: Mapping[str, Flag] = spec.flags
    positionals: tuple[Positional, ...] = spec.positionals
    pos_index = 0
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not _TOKEN.match(tok):
            raise ArgError(f"argument {_quote(tok)} has characters outside [A-Za-z0-9_.:=+-] or is too long")
        kv = _KEY_VALUE.match(tok)
        if tok.startswith("--") or kv:
            # `--name value`, `--name=value`, or `name=value` (no positional holds an "=")
            key, eq, value = (tok[2:] if tok.startswith("--") else tok).partition("=")
            key = key.replace("_", "-")  # max_tokens=N and --max-tokens N are one option
            flag = flags.get(key)
            if flag is None:
                known = ", ".join(f"--{f}" for f in flags) or "none"
                raise ArgError(f"unknown option {_quote('--' + key)} (options: {known})")
            if key in args:
                raise ArgError(f"--{key} given twice")
            if not eq and flag.kind != "flag":
                if i + 1 >= len(tokens) or tokens[i + 1].startswith("--"):
                    raise ArgError(f"--{key} needs a value")
                i += 1
                value = tokens[i]
                if not _TOKEN.match(value):
                    raise ArgError(f"--{key}: value {_quote(value)} has characters outside [A-Za-z0-9_.:=+-]")
            args[key] = flag.convert(value if (eq or flag.kind != "flag") else None)
        elif tok.startswith("-"):
            raise ArgError(f"options are written --name value; got {_quote(tok)}")
        else:
            if pos_index >= len(positionals):
                raise ArgError(f"unexpected argument {_quote(tok)}")
            p = positionals[pos_index]
            if not re.fullmatch(p.pattern, tok):
                raise ArgError(f"{p.name} {_quote(tok)} is not valid ({p.help})")
            args[p.name] = tok
            pos_index += 1
        i += 1
    for p in positionals[pos_index:]:
        if p.required:
            raise ArgError(f"missing {p.name}")
    return args

