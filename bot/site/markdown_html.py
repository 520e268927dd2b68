"""Markdown (a review, a comment) as HTML for the static report, with markdown-it-py.

What GitHub would show is what the page shows: tables, emphasis, lists, ``<details>`` folds and the
review's Mermaid chart, which is drawn here as inline SVG (``bot.site.charts``) so the page needs no
JavaScript and works offline.

Bodies are data (a review quotes model-written names and logs; a comment can be anyone's), so raw
HTML in them is not trusted: only a short list of tags without attributes passes (the folds and
preformatted blocks our review template writes); any other tag is shown as text and HTML comments
(the bot's hidden ``<!-- kbot:... -->`` blocks) are dropped. Links go through markdown-it's own URL
check (no ``javascript:``), and open with ``rel="nofollow noopener"``; images are not loaded (their alt
text is shown), so opening a page fetches nothing.
"""

from __future__ import annotations

import html
import re
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup

from bot.site.charts import parse_xychart, xychart_svg

# Tags a review or comment may carry, attribute-free (``<details open>`` is the one attribute kept).
ALLOWED_TAGS = frozenset({"details", "summary", "pre", "code", "br", "b", "strong", "i", "em", "sub", "sup", "kbd", "p"})
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9]*)((?:\s+open)?)\s*(/?)>")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_ANY_TAG = re.compile(r"(<!--.*?-->|<[^<>]*>)", re.S)


def sanitize_html(raw: str) -> str:
    """Raw HTML from a body: allowed tags kept, comments dropped, everything else escaped as text.
    Entities in the text (``&lt;``, ``&amp;``) stay entities, so escaped text is never escaped twice."""
    out = []
    for part in _ANY_TAG.split(raw):
        if not part:
            continue
        if part.startswith("<!--"):
            continue
        m = _TAG.fullmatch(part)
        if m and m.group(2).lower() in ALLOWED_TAGS:
            out.append(f"<{m.group(1)}{m.group(2).lower()}{' open' if m.group(3) and m.group(2).lower() == 'details' else ''}>")
        elif part.startswith("<"):
            out.append(html.escape(part, quote=False))
        else:
            # text between tags: a stray '<' or '>' is escaped; '&' is left, so entities keep their meaning
            out.append(part.replace("<", "&lt;").replace(">", "&gt;"))
    return "".join(out)


def _html_rule(tokens: Any, idx: int, options: Any, env: Any) -> str:
    return sanitize_html(tokens[idx].content)


def _make() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True, "linkify": False, "typographer": False}).enable(["table", "strikethrough"])
    default_fence = md.renderer.rules["fence"]
    default_link_open = md.renderer.rules.get("link_open")

    def fence(tokens: Any, idx: int, options: Any, env: Any) -> str:
        tok = tokens[idx]
        if tok.info.strip().lower() == "mermaid":
            chart = parse_xychart(tok.content)
            if chart is not None:
                return f'<figure class="chart">{xychart_svg(chart)}</figure>\n'
            return ('<p class="note">A Mermaid chart this page does not draw (only the review\'s bar chart is); its source:</p>\n'
                    + default_fence(tokens, idx, options, env))
        return default_fence(tokens, idx, options, env)

    def link_open(tokens: Any, idx: int, options: Any, env: Any) -> str:
        tokens[idx].attrSet("rel", "nofollow noopener")
        return default_link_open(tokens, idx, options, env) if default_link_open else md.renderer.renderToken(tokens, idx, options, env)

    def image(tokens: Any, idx: int, options: Any, env: Any) -> str:
        # an image would be fetched when the page opens (a tracker, a dead link offline): its alt text instead
        alt = md.renderer.renderInlineAsText(tokens[idx].children or [], options, env)
        return f'<span class="note">[image: {html.escape(alt)}]</span>'

    md.renderer.rules["fence"] = fence
    md.renderer.rules["image"] = image
    md.renderer.rules["html_block"] = _html_rule
    md.renderer.rules["html_inline"] = _html_rule
    md.renderer.rules["link_open"] = link_open
    return md


_MD = _make()


# The review's emoji marks as text glyphs with a colour: the page then reads the same on a machine
# without an emoji font (a headless browser, a minimal desktop) as on GitHub.
_MARKS = {"\u2705": '<span class="mark ok">\u2713</span>', "\u274c": '<span class="mark bad">\u2717</span>',
          "\u26a0\ufe0f": '<span class="mark warn">\u26a0</span>'}


def render_markdown(text: str | None) -> Markup:
    """``text`` as safe HTML (see the module docstring)."""
    out = _MD.render(text or "")
    for mark, span in _MARKS.items():
        out = out.replace(mark, span)
    return Markup(out)

