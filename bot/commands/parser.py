"""Comment body → command invocations.

A comment body is hostile input: anybody who can comment can write anything into it. The parser is
therefore strict and small:

- only lines that start with `/` in the first column are candidates (so quoted lines `> /x`, indented
  code and list items are never commands), one command per line;
- fenced code blocks (``` or ~~~) and HTML comments are skipped: what a reader does not see as a
  command is not executed;
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


class ArgError(ValueError):
    """A value that does not satisfy its argument spec."""


@dataclass(frozen=True)
class Flag:
    """One `--name value` option. `kind` is int, choice, or flag (a bare switch)."""

    name: str
    kind: str
    help: str
    lo: int = 0
    hi: int = 0
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


def visible_lines(body: str) -> list[tuple[int, str]]:
    """(line number, text) of lines outside fenced code blocks and HTML comments."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    in_comment = False
    for i, line in enumerate(body.split("\n"), start=1):
        line = line.rstrip("\r")
        if fence is not None:
            m = _FENCE.match(line)
            # A fence closes with the same character, at least as long, and nothing after it.
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip()[len(m.group(1)):].strip():
                fence = None
            continue
        if in_comment:
            # The rest of a line that closes a comment is not at the start of a line: never a command,
            # but it may open another comment.
            in_comment = _ends_in_comment(line, True)
            continue
        m = _FENCE.match(line)
        if m:
            fence = m.group(1)
            continue
        if "<!--" in line:
            # ``<!--`` anywhere opens a comment (GitHub hides what follows, on this and later lines
            # until ``-->``): only the text before it is visible.
            in_comment = _ends_in_comment(line, False)
            before = line[: line.index("<!--")]
            if before.strip():
                out.append((i, before.rstrip()))
            continue
        out.append((i, line))
    return out


def _ends_in_comment(line: str, inside: bool) -> bool:
    """Whether an HTML comment is still open at the end of ``line`` (``inside``: open at its start)."""
    pos = 0
    while True:
        idx = line.find("-->" if inside else "<!--", pos)
        if idx < 0:
            return inside
        pos = idx + (3 if inside else 4)
        inside = not inside


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
        if tok.startswith("--"):
            key, eq, value = tok[2:].partition("=")
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

