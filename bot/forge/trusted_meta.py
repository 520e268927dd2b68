"""The PR meta block (``kbot:meta``), signed, and the head it records: how the bot proves which commits it made.

The meta block lives in a PR body that anyone with write access can edit, and commits carry whatever
author and committer a person types (GitHub attributes them by e-mail), so neither a block nor a
commit's identity proves anything on its own. With a signing key, the bot writes each block with an
HMAC-SHA256 over its JSON and the PR's head branch (``bot.forge.markers``) and records in it the exact
head sha it pushed (``head_sha``); it reads back only blocks that verify. A commit is then the bot's
when it IS the recorded head: a person's push moves the head away from it, and a person cannot write a
block naming their own head without the key. Promotion merges only such heads
(``bot.promotion.candidate_gate``).

The key: ``KBOT_META_KEY`` (a repository/App secret given to every entry point: ``kbot serve``,
command.yml, report.yml), or, for a forge that is its own host (the local workspace forge), a key it
keeps in its store (``meta_signing_key()``). Without a key, blocks are unsigned and still read (the bot
reviews, continues campaigns and clamps every value to the policy at use), but nothing is merged: the
bot cannot prove it made the head, and says so.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from bot.forge.markers import decode_meta, with_meta

META_KEY_ENV = "KBOT_META_KEY"
MIN_KEY_CHARS = 32
HEAD_FIELD = "head_sha"  # the commit the bot pushed, recorded in the signed block
# Merge commits of the default branch into the head that the bot asked for and checked
# (``verify_update``): made by the code host (GitHub's "Update branch" commits as web-flow), yet the bot's.
MERGES_FIELD = "bot_merges"


class MetaKeyError(ValueError):
    """``KBOT_META_KEY`` is set but too short to be a secret."""


def meta_key(forge: Any = None) -> bytes | None:
    """The signing key: ``KBOT_META_KEY`` from the environment, else the forge's own (a local
    workspace), else None (signing off)."""
    raw = os.environ.get(META_KEY_ENV, "")
    if raw:
        if len(raw) < MIN_KEY_CHARS:
            raise MetaKeyError(f"{META_KEY_ENV} must be at least {MIN_KEY_CHARS} characters (a random secret)")
        return raw.encode()
    own = getattr(forge, "meta_signing_key", None)
    return own() if callable(own) else None


def write_meta(body: str, meta: Mapping[str, Any], branch: str, *, head_sha: str, forge: Any = None) -> str:
    """``body`` with the meta block for ``meta`` and the head the bot just pushed to ``branch``, signed
    for ``branch`` when a key is configured."""
    return with_meta(body, {**meta, HEAD_FIELD: head_sha}, key=meta_key(forge), context=branch)


def read_meta(pr: Any, forge: Any) -> dict[str, Any] | None:
    """The trusted meta block of ``pr``: None unless the bot opened it and (with a key) it verifies."""
    bot_login = forge.info.bot_login
    if not isinstance(pr.author, str) or pr.author.lower() != bot_login.lower():
        return None
    return decode_meta(pr.body, key=meta_key(forge), context=pr.head_branch)


def pushed_head(meta: Mapping[str, Any] | None) -> str | None:
    """The head sha the bot recorded when it pushed (None for a block without one)."""
    head = meta.get(HEAD_FIELD) if isinstance(meta, Mapping) else None
    return head if isinstance(head, str) else None


def record_head(forge: Any, number: int, meta: Mapping[str, Any], head_sha: str, *, merge: bool = False) -> None:
    """Rewrite PR ``number``'s meta block (``meta``, already trusted) to record ``head_sha``, a commit
    the bot itself just made on top of the head the block recorded, or (``merge``) a merge of the default
    branch into it that ``verify_update`` accepted, which is then listed in ``bot_merges``."""
    pr = forge.get_pr(number)
    if merge:
        meta = {**meta, MERGES_FIELD: [*bot_merges(meta), head_sha]}
    forge.update_pr(number, body=write_meta(pr.body, meta, pr.head_branch, head_sha=head_sha, forge=forge))


def bot_merges(meta: Mapping[str, Any] | None) -> list[str]:
    """The merge commits the signed block vouches for (``MERGES_FIELD``)."""
    merges = meta.get(MERGES_FIELD) if isinstance(meta, Mapping) else None
    return [m for m in merges if isinstance(m, str)] if isinstance(merges, list) else []


def verify_update(forge: Any, old_head: str, new_head: str, folder: str) -> list[str]:
    """Why ``new_head`` is not exactly the default branch merged into ``old_head`` (empty: it is).

    The head after an update is read back from the host, and anyone who can push could have put a
    commit there in between, even one with the right parents and a changed tree. So the commit is
    judged by what it is, not by who made it: its parents are ``old_head`` and a commit X of the default
    branch, its files differ from X only inside the candidate's ``folder``, and nothing inside
    ``folder`` differs from ``old_head``. Then its tree is X's outside the folder (reviewed code of the
    default branch) and the bot's own kernel inside it, and nobody's commits came along."""
    base = forge.default_branch()
    try:
        mine = forge.branch_commits(new_head, base=base)
    except Exception as e:  # noqa: BLE001 - any failure to read the history is a refusal
        return [f"could not read the new head's history ({type(e).__name__})"]
    if not mine or mine[0].sha != new_head:
        return [f"the head {new_head[:12]} is not a commit of the branch beside the default branch"]
    parents = tuple(mine[0].parents)
    if len(parents) != 2 or parents[0] != old_head:
        return [f"the head {new_head[:12]} is not a merge into the bot's head {old_head[:12]} (parents: "
                + ", ".join(p[:12] for p in parents) + ")"]
    try:
        if forge.branch_commits(parents[1], base=base):
            return [f"the merged commit {parents[1][:12]} is not on the default branch"]
        outside = [p for p in forge.changed_files(new_head, base) if not p.startswith(folder + "/")]
        inside = [p for p in forge.changed_files(new_head, old_head) if p.startswith(folder + "/")]
    except Exception as e:  # noqa: BLE001
        return [f"could not compare the new head's files ({type(e).__name__})"]
    problems = []
    if outside:
        problems.append(f"the merge differs from the default branch outside {folder}/ (first: {sorted(outside)[0]})")
    if inside:
        problems.append(f"the merge changes the bot's kernel in {folder}/ (first: {sorted(inside)[0]})")
    return problems


def record_fields(forge: Any, number: int, meta: Mapping[str, Any], fields: Mapping[str, Any]) -> bool:
    """Rewrite PR ``number``'s meta block (``meta``, already trusted) with ``fields`` added, keeping the
    head it records; False (nothing written) when the block already says exactly that. For what the
    bot learns about its own candidate later (the outcome of its bench, where its model calls are)."""
    new = {**meta, **fields}
    if new == dict(meta):
        return False
    head = pushed_head(meta)
    if head is None:
        return False
    pr = forge.get_pr(number)
    forge.update_pr(number, body=write_meta(pr.body, new, pr.head_branch, head_sha=head, forge=forge))
    return True
