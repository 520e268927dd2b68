"""Signing the PR meta block (``kbot:meta``) when the deployment provides a key.

The meta block lives in a PR body that anyone with write access can edit. With ``KBOT_META_KEY`` set
(a repository/App secret given to every entry point: ``kbot serve``, command.yml, report.yml), the bot
writes each block with an HMAC-SHA256 over its JSON and the PR's head branch (``bot.forge.markers``),
and reads back only blocks that verify: an edited, typed or copied-from-another-PR block is ignored,
so the PR loses its trusted metadata instead of gaining a forged one. Without the key, blocks are
unsigned and the defences are the author check (only PRs the bot opened) and clamping every value to
the current policy at use.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from bot.forge.markers import decode_meta, with_meta

META_KEY_ENV = "KBOT_META_KEY"
MIN_KEY_CHARS = 32


class MetaKeyError(ValueError):
    """``KBOT_META_KEY`` is set but too short to be a secret."""


def meta_key() -> bytes | None:
    """The signing key from the environment, or None when signing is off."""
    raw = os.environ.get(META_KEY_ENV, "")
    if not raw:
        return None
    if len(raw) < MIN_KEY_CHARS:
        raise MetaKeyError(f"{META_KEY_ENV} must be at least {MIN_KEY_CHARS} characters (a random secret)")
    return raw.encode()


def write_meta(body: str, meta: Mapping[str, Any], branch: str) -> str:
    """``body`` with the meta block for ``meta``, signed for ``branch`` when a key is configured."""
    return with_meta(body, meta, key=meta_key(), context=branch)


def read_meta(pr: Any, bot_login: str) -> dict[str, Any] | None:
    """The trusted meta block of ``pr``: None unless the bot opened it and (with a key) it verifies."""
    if not isinstance(pr.author, str) or pr.author.lower() != bot_login.lower():
        return None
    return decode_meta(pr.body, key=meta_key(), context=pr.head_branch)
