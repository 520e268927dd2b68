"""Markdown for the code host from untrusted text, and the jinja2 environment every report template uses.

Everything in a Report came from an untrusted runner job that executed candidate code, and names,
logs and messages may have been written by a model: every string is escaped before it reaches
Markdown. The jinja2 environment enforces that: its ``finalize`` hook escapes every value printed
with ``{{ }}`` unless a filter here produced it as ``Markup`` (numbers, our own formatting). A template
author cannot forget to escape.

Escaping (``escape_inline``): control characters dropped, length capped, ``& < >`` as entities (no
HTML, no fake ``<!-- kbot:... -->`` markers), Markdown punctuation backslash-escaped (no links,
images, emphasis, code spans, table breaks), ``@`` and ``#`` followed by a zero-width space (no
mentions, no cross-references), ``://`` broken (no autolinks). ``commit_text`` does the same for the
plain text of a commit message, on one line and with git trailers defused.
"""

from __future__ import annotations

import math
import re
from typing import Any

import jinja2
from markupsafe import Markup

from harness.paths import shipped, skill_dirs

TEMPLATES = shipped() / "skills" / "reports"  # ours; a repository's skills/reports/<file> replaces one
ZWSP = "\u200b"

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]()!~|])")


def strip_control(text: str) -> str:
    """``text`` without control and bidirectional-override characters."""
    return _CONTROL.sub("", text)


def _cap(text: str, cap: int) -> str:
    return text if len(text) <= cap else text[: max(0, cap - 1)] + "…"


def escape_inline(value: Any, cap: int = 200, *, code: bool = False) -> str:
    """Untrusted text → safe Markdown (a table cell, a line) or, with ``code``, safe ``<pre>`` content."""
    text = strip_control(str(value))
    text = _cap(text, cap)
    # Zero-width spaces first, so the entities written below are not split.
    text = text.replace("@", "@" + ZWSP).replace("#", "#" + ZWSP).replace("://", ":" + ZWSP + "//")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if code:
        return text.replace("`", "&#96;")
    text = text.replace("\r", " ").replace("\n", " ")
    return _MD_SPECIAL.sub(r"\\\1", text)


# A git trailer token (``Signed-off-by:``, ``Co-authored-by:``, ``Change-Id:``) or a one-word one that
# GitHub acts on (``Fixes:``, ``Closes:``, ``Resolves:``, ``Cc:``), followed by its colon.
_TRAILER = re.compile(r"(?i)\b([a-z][a-z0-9]*(?:-[a-z0-9]+)+|cc|fix(?:e[sd])?|close[sd]?|resolve[sd]?)\s*:")


def commit_text(value: Any, cap: int = 500) -> str:
    """Untrusted text (a model's rationale, a name) → safe text for a commit message: one line
    (whitespace collapsed, so it can never be a trailer paragraph of its own), control characters
    dropped, length capped, trailer-shaped tokens defused (``Co-authored-by:`` would credit a person,
    ``Signed-off-by:`` certify for one), and ``@``, ``#`` and ``://`` broken as in ``escape_inline``
    (no mentions, no ``Fixes #12`` closing an issue when the commit lands, no links)."""
    text = " ".join(strip_control(str(value)).split())
    text = _cap(text, cap)
    text = text.replace("@", "@" + ZWSP).replace("#", "#" + ZWSP).replace("://", ":" + ZWSP + "//")
    return _TRAILER.sub(lambda m: f"{m.group(1)} -", text)


def _finalize(value: Any) -> Any:
    if isinstance(value, Markup):
        return value
    if value is None:
        return ""
    return Markup(escape_inline(value))


# --- filters: each returns Markup so the finalize hook lets it through ------------------------------


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def f_num(x: Any, digits: int = 3) -> Markup:
    if not is_number(x):
        return Markup("—")
    if x != 0 and abs(x) < 10 ** -(digits):
        return Markup(f"{x:.{digits}g}")
    return Markup(f"{x:.{digits}f}")


def f_ci(pair: Any, digits: int = 3) -> Markup:
    if not isinstance(pair, (tuple, list)) or len(pair) != 2 or not all(is_number(v) for v in pair):
        return Markup("")
    return Markup(f"[{f_num(pair[0], digits)}, {f_num(pair[1], digits)}]")


def f_x(x: Any, digits: int = 3) -> Markup:
    """A speedup: ``1.250x``, or a dash when there is no number."""
    return Markup(f"{f_num(x, digits)}x") if is_number(x) else Markup("—")


def f_pct(x: Any) -> Markup:
    """A fraction as a percentage; two significant digits under 1% (a CPU run's roofline is 0.0024%,
    which ``0%`` would hide)."""
    if not is_number(x):
        return Markup("—")
    p = 100 * x
    return Markup(f"{p:.0f}%" if p >= 10 or p == 0 else f"{p:.1f}%" if p >= 1 else f"{p:.2g}%")


def f_pre(value: Any, cap: int = 4000) -> Markup:
    """Untrusted multi-line text for a <pre> block; keeps the tail (the error is usually last)."""
    text = str(value or "")
    if len(text) > cap:
        text = "…" + text[-(cap - 1):]
    return Markup(escape_inline(text, cap + 1, code=True))


def f_cell(value: Any, cap: int = 80) -> Markup:
    return Markup(escape_inline(value, cap))


def f_sha(value: Any) -> Markup:
    s = str(value or "")
    return Markup(s[:12]) if re.fullmatch(r"[0-9a-f]{7,64}", s) else Markup(escape_inline(s, 16))



class _ReportsLoader(jinja2.FileSystemLoader):
    """skills/reports/ of the repository, then ours, looked up when a template is loaded (so --repo,
    parsed after this module was imported, applies)."""

    def get_source(self, environment, template):
        self.searchpath = [str(d) for d in skill_dirs("reports")] or [str(TEMPLATES)]
        return super().get_source(environment, template)


# Public: every Markdown template (the review, the leaderboard) renders through this environment.
TEMPLATE_ENV = jinja2.Environment(
    loader=_ReportsLoader(str(TEMPLATES)),
    autoescape=False,  # Markdown, not HTML: escaping is done by finalize/filters above
    finalize=_finalize,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
TEMPLATE_ENV.filters.update(x=f_x, num=f_num, ci=f_ci, pct=f_pct, pre=f_pre, cell=f_cell, sha=f_sha)


def render_template(name: str, **context: Any) -> str:
    """``skills/reports/<name>`` rendered with every value escaped (see the module docstring)."""
    return TEMPLATE_ENV.get_template(name).render(**context)
