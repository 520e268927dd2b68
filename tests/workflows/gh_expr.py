"""A small evaluator for the GitHub Actions expressions our workflows use in `if:` and `concurrency`,
so tests can check what a gate or a group evaluates to for a given event (not just that some text is
present). Supported: literals ('str', numbers, true/false/null), dotted context lookups (missing →
null), ==, !=, !, &&, ||, parentheses, startsWith(a, b), fromJSON(s). `&&`/`||` return an operand, like GitHub."""

from __future__ import annotations

import re
from typing import Any, Mapping

_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||[!(),])"
                    r"|(?P<name>[A-Za-z_][A-Za-z0-9_.-]*))")


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"cannot parse expression at {text[pos:pos + 30]!r}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


def _truthy(v: Any) -> bool:
    return v not in (None, False, 0, "")


def _loose_eq(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()  # GitHub compares strings case-insensitively
    return a == b


class _Parser:
    def __init__(self, tokens, ctx):
        self.t, self.i, self.ctx = tokens, 0, ctx

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else (None, None)

    def take(self, value=None):
        tok = self.peek()
        if value is not None and tok[1] != value:
            raise ValueError(f"expected {value!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def parse(self):
        v = self.or_()
        if self.i != len(self.t):
            raise ValueError(f"trailing tokens: {self.t[self.i:]}")
        return v

    def or_(self):
        v = self.and_()
        while self.peek()[1] == "||":
            self.take()
            rhs = self.and_()
            v = v if _truthy(v) else rhs
        return v

    def and_(self):
        v = self.cmp()
        while self.peek()[1] == "&&":
            self.take()
            rhs = self.cmp()
            v = rhs if _truthy(v) else v
        return v

    def cmp(self):
        v = self.unary()
        while self.peek()[1] in ("==", "!="):
            op = self.take()[1]
            rhs = self.unary()
            v = _loose_eq(v, rhs) if op == "==" else not _loose_eq(v, rhs)
        return v

    def unary(self):
        if self.peek()[1] == "!":
            self.take()
            return not _truthy(self.unary())
        return self.atom()

    def atom(self):
        kind, val = self.take()
        if val == "(":
            v = self.or_()
            self.take(")")
            return v
        if kind == "str":
            return val[1:-1].replace("''", "'")
        if kind == "num":
            return float(val)
        if kind == "name":
            if val in ("true", "false"):
                return val == "true"
            if val == "null":
                return None
            if self.peek()[1] == "(":
                self.take("(")
                args = [self.or_()]
                while self.peek()[1] == ",":
                    self.take()
                    args.append(self.or_())
                self.take(")")
                if val == "startsWith":
                    return str(args[0] or "").lower().startswith(str(args[1] or "").lower())
                if val == "fromJSON":
                    import json

                    return json.loads(str(args[0]))
                raise ValueError(f"unsupported function {val}")
            cur: Any = self.ctx
            for part in val.split("."):
                cur = cur.get(part) if isinstance(cur, Mapping) else None
            return cur
        raise ValueError(f"unexpected token {val!r}")


def evaluate(expr: str, ctx: Mapping[str, Any]) -> Any:
    """Value of a bare expression (an `if:` without ${{ }})."""
    return _Parser(_tokens(expr), ctx).parse()


def interpolate(text: str, ctx: Mapping[str, Any]) -> str:
    """A string with ${{ … }} parts replaced by their values (as GitHub formats them)."""
    def one(m):
        v = evaluate(m.group(1), ctx)
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        return "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
    return re.sub(r"\$\{\{(.*?)\}\}", one, text, flags=re.S)
