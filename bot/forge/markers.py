"""Hidden machine-readable blocks in PR bodies and comments.

The bot stores PR metadata (definition, parent node, agent, model, prompt hash, campaign) in the PR
body as one line ``<!-- kbot:meta {json} -->``, and marks its sticky comments/reviews with
``<!-- kbot:<name> -->``. People edit PR bodies and comments, so reading them back must survive hostile
text:

* a block counts only when it is a whole line of its own at column 0 and outside fenced code
  (```` ``` ```` / ``~~~``), so quoting a block in a code fence, inline code, an indented code block or a
  blockquote does not inject metadata;
* the LAST valid block wins (the bot appends; an older copy above is stale);
* blocks and bodies have size limits, and the JSON must be an object;
* with a ``key``, blocks carry an HMAC-SHA256 over the JSON and a caller-chosen ``context`` (e.g. the
  head branch), so only blocks the bot wrote for *this* PR are accepted; a block pasted from another PR
  or typed by a person is ignored.

The JSON is written with ``<``, ``>`` and ``&`` escaped, so its contents can never close the comment.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from typing import Any, Mapping

META_NAME = "meta"
MAX_META_CHARS = 16_384      # one encoded block, JSON included
MAX_BODY_CHARS = 262_144     # bodies longer than this are only scanned up to here (GitHub caps at 65,536)

_NAME_RE = re.compile(r"^[a-z][a-z0-9_.:-]{0,63}$")
_META_LINE_RE = re.compile(r"^<!-- kbot:meta (\{.*\})(?: sha256=([0-9a-f]{64}))? -->$")
_FENCE_RE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")


class MarkerError(ValueError):
    """Metadata that cannot be encoded (not JSON-serializable, too large, bad marker name)."""


# --------------------------------------------------------------------------------------------------
# Sticky markers
# --------------------------------------------------------------------------------------------------


def sticky_marker(name: str) -> str:
    """The hidden tag that identifies one sticky comment/review kind, e.g. ``<!-- kbot:review -->``."""
    if not _NAME_RE.match(name) or name == META_NAME:
        raise MarkerError(f"bad marker name {name!r}: lowercase letters, digits, '_.:-'; not 'meta'")
    return f"<!-- kbot:{name} -->"


REVIEW_MARKER = sticky_marker("review")


def has_marker(body: str | None, marker: str) -> bool:
    """True if ``marker`` is a line of its own outside fenced code in ``body``."""
    if not body:
        return False
    return any(line == marker for line in _live_lines(body))


def with_marker(body: str, marker: str) -> str:
    """``body`` with ``marker`` as its first line (added once)."""
    if has_marker(body, marker):
        return body
    return f"{marker}\n{body}"


# --------------------------------------------------------------------------------------------------
# Metadata blocks
# --------------------------------------------------------------------------------------------------


def _canonical(data: Mapping[str, Any]) -> str:
    try:
        text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise MarkerError(f"metadata is not plain JSON: {exc}") from exc
    # Escaped forms are equal JSON, and no "<!--" / "-->" can appear inside the comment.
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _sign(key: bytes, context: str, canonical: str) -> str:
    msg = b"kbot:meta:v1\0" + context.encode() + b"\0" + canonical.encode()
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


def encode_meta(data: Mapping[str, Any], *, key: bytes | None = None, context: str = "") -> str:
    """One line ``<!-- kbot:meta {json} [sha256=<hmac>] -->``."""
    if not isinstance(data, Mapping):
        raise MarkerError(f"metadata must be a mapping, not {type(data).__name__}")
    canonical = _canonical(data)
    sig = f" sha256={_sign(key, context, canonical)}" if key else ""
    line = f"<!-- kbot:meta {canonical}{sig} -->"
    if len(line) > MAX_META_CHARS:
        raise MarkerError(f"metadata block is {len(line)} chars, limit {MAX_META_CHARS}")
    return line


def decode_meta(body: str | None, *, key: bytes | None = None, context: str = "") -> dict[str, Any] | None:
    """The last valid metadata block of ``body`` (see module docstring), or None."""
    if not body:
        return None
    found: dict[str, Any] | None = None
    for line in _live_lines(body):
        if not line.startswith("<!-- kbot:meta ") or len(line) > MAX_META_CHARS:
            continue
        m = _META_LINE_RE.match(line)
        if not m:
            continue
        canonical, sig = m.group(1), m.group(2)
        if key is not None:
            if not sig or not hmac.compare_digest(sig, _sign(key, context, canonical)):
                continue
        try:
            value = json.loads(canonical)
        except ValueError:
            continue
        if isinstance(value, dict):
            found = value
    return found


def strip_meta(body: str) -> str:
    """``body`` without its live metadata blocks (fenced copies are left alone: they are text)."""
    out: list[str] = []
    for line, is_live in _lines_with_state(body):
        if is_live and _META_LINE_RE.match(line.rstrip()):
            continue
        out.append(line)
    return "\n".join(out).rstrip("\n")


_HIDDEN_LINE_RE = re.compile(r"^<!-- kbot:[a-z][a-z0-9_.:-]{0,63}(?: .*)? -->$")


def strip_hidden(body: str) -> str:
    """``body`` without any live hidden kbot line (sticky markers, the meta and evidence blocks): what a
    person reading the body outside the code host should see."""
    out = [line for line, is_live in _lines_with_state(body) if not (is_live and _HIDDEN_LINE_RE.match(line.rstrip()))]
    return "\n".join(out).strip("\n")


def with_meta(body: str, data: Mapping[str, Any], *, key: bytes | None = None, context: str = "") -> str:
    """``body`` with any live metadata block replaced by one for ``data``, appended at the end."""
    block = encode_meta(data, key=key, context=context)
    return f"{strip_meta(body)}\n\n{block}\n"


# --------------------------------------------------------------------------------------------------
# Markdown scanning
# --------------------------------------------------------------------------------------------------


def _lines_with_state(body: str):
    """Yield (line, outside_fenced_code) for each line; fences follow CommonMark's opening/closing rules."""
    fence: tuple[str, int] | None = None  # (char, length) of the open fence
    for raw in body[:MAX_BODY_CHARS].split("\n"):
        line = raw[:-1] if raw.endswith("\r") else raw
        m = _FENCE_RE.match(line)
        if fence is None:
            if m and not (m.group(2)[0] == "`" and "`" in m.group(3)):
                fence = (m.group(2)[0], len(m.group(2)))
                yield raw, False
                continue
            yield raw, True
        else:
            if m and m.group(2)[0] == fence[0] and len(m.group(2)) >= fence[1] and not m.group(3).strip():
                fence = None
            yield raw, False


def _live_lines(body: str):
    for line, live in _lines_with_state(body):
        if live:
            yield line.rstrip()
