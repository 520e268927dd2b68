"""Is this PR a candidate the bot may promote? Checked right before any merge.

A ``kbot/`` branch name, a ``kbot:meta`` block and a commit's author or committer prove nothing: anyone
with write access can push a ``kbot/...`` branch, open a PR from it, add commits to a bot branch under
the bot's own name and noreply e-mail (GitHub attributes commits by e-mail), or paste a meta block.
Promotion merges code into the default branch without a person's review, so before it the bot requires:

* a signing key is configured (``KBOT_META_KEY``, ``bot.forge.trusted_meta``): without one the bot
  cannot prove which commits it made, so it reviews but never merges, and says why;
* the PR was opened by the bot's login (a person's PR carries no trusted metadata);
* the PR head is exactly the commit the bot pushed, as its signed meta block recorded it at push time
  (a person's push moves the head; a person cannot sign a block naming their own);
* every commit on the branch was authored and committed by the bot (``branch_touched_by_humans``: a
  second, weaker line that catches an honest person's push with a clear message), or is a merge of the
  default branch that the bot asked for and checked by content (``verify_update``) and then listed in
  the signed block (``bot_merges``): a stale candidate brought up to date keeps its identity;
* the PR changes only files under the meta block's solution folder ``kernels/<definition>/<name>/``;
* the evaluated report is for the definition and solution hash the meta block names.

A person's PR (``bot.campaign.submission``: a kernel written by hand, from a branch or a fork) has no
meta block; in its place:

* the bot's submission record, written when a maintainer asked for the benchmark, for exactly the
  measured head sha, naming the evaluated definition and solution hash;
* every file the PR changes under the record's solution folder;
* an approving review of the measured head by an account with at least the promotion policy's
  ``people_approval`` role (checked by API), other than the PR's author.

``candidate_problems`` returns one plain sentence per failed requirement (empty: promotable).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from bot.forge.base import ForgeError, PullRequest
from bot.forge.trusted_meta import META_KEY_ENV, bot_merges, meta_key, pushed_head, read_meta
from bot.names import is_candidate_pr

_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")

# Said in the review, the status and a /promote reply when the deployment has no signing key.
# How a person's PR that only lacks a maintainer's approval is said (the review's status reads it: such a
# PR waits, it is not rejected on its figures).
AWAITING_APPROVAL = "waiting for an approving review"
NO_KEY = (f"{META_KEY_ENV} is not configured, so the bot cannot prove that it made this head: it reviews "
          "but does not merge (docs/bot.md, the meta key)")


def solution_folder(meta: Mapping[str, Any] | None) -> str | None:
    """``kernels/<definition>/<name>`` from the meta block's ``solution_path`` (validated), else None."""
    if not isinstance(meta, Mapping):
        return None
    definition, path = meta.get("definition"), meta.get("solution_path")
    if not isinstance(definition, str) or not isinstance(path, str):
        return None
    parts = path.split("/")
    if (len(parts) != 4 or parts[0] != "kernels" or parts[1] != definition or parts[3] != "solution.json"
            or not all(_SEGMENT.match(p) for p in parts[1:3])):
        return None
    return "/".join(parts[:3])


def changed_files(forge: Any, pr: PullRequest) -> list[str] | None:
    """Paths the PR changes (relative to its merge base), or None when the forge cannot tell."""
    fn = getattr(forge, "changed_files", None)
    if callable(fn):
        return list(fn(pr.head_sha, pr.base_branch))
    return None


def candidate_problems(forge: Any, pr: PullRequest, *, definition: str | None, solution_hash: str | None,
                       meta: Mapping[str, Any] | None = None, head_sha: str | None = None,
                       people_approval: str = "maintain") -> list[str]:
    """Why ``pr`` must not be promoted for a report of (``definition``, ``solution_hash``) measured at
    ``head_sha``; [] if it may."""
    bot = forge.info.bot_login
    if meta_key(forge) is None:
        return [NO_KEY]
    if pr.author.lower() != bot.lower():
        return person_problems(forge, pr, definition=definition, solution_hash=solution_hash, head_sha=head_sha,
                               people_approval=people_approval)
    if not is_candidate_pr(pr):
        return ["the PR is not a kbot branch of this repository"]
    if meta is None:
        meta = read_meta(pr, forge)
    if not isinstance(meta, Mapping):
        return ["the PR has no valid signed kbot metadata block"]
    problems: list[str] = []
    pushed = pushed_head(meta)
    if pushed is None:
        problems.append("the PR's metadata records no head pushed by the bot")
    elif pushed != pr.head_sha:
        problems.append(f"the PR head {pr.head_sha[:12]} is not the commit the bot pushed ({pushed[:12]}): "
                        "someone else pushed to the branch")
    if definition is None or meta.get("definition") != definition:
        problems.append("the report's definition differs from the PR's metadata")
    if solution_hash is None or meta.get("solution_hash") != solution_hash:
        problems.append("the report's solution hash differs from the PR's metadata")
    try:
        # By sha, not branch name: exactly the head that is judged, and still there after a merge
        # deleted the branch (resume_pointer).
        humans = forge.branch_touched_by_humans(pr.head_sha, pr.base_branch)
    except ForgeError as e:
        return problems + [f"could not list the branch's commits ({type(e).__name__})"]
    # A merge of the default branch the bot asked for and checked (``verify_update``) is the code host's
    # commit (GitHub's "Update branch" commits as web-flow) but vouched for by the signed block.
    vouched = set(bot_merges(meta))
    humans = [c for c in humans if c.sha not in vouched]
    if humans:
        problems.append(f"{len(humans)} commit(s) on the branch were not made by the bot")
    folder = solution_folder(meta)
    if folder is None:
        return problems + ["the PR's metadata has no valid solution_path (kernels/<definition>/<name>/solution.json)"]
    return problems + folder_problems(forge, pr, folder)


def folder_problems(forge: Any, pr: PullRequest, folder: str | None) -> list[str]:
    """[] when every file the PR changes is under ``folder/``, else why not (or why it cannot tell)."""
    try:
        files = changed_files(forge, pr)
    except ForgeError as e:
        return [f"could not list the PR's files ({type(e).__name__})"]
    if files is None:
        return ["this forge cannot list the PR's changed files"]
    outside = sorted(p for p in files if folder is None or not p.startswith(folder + "/"))
    return [f"the PR changes {len(outside)} file(s) outside {folder}/ (first: {outside[0]})"] if outside else []


def person_problems(forge: Any, pr: PullRequest, *, definition: str | None, solution_hash: str | None,
                    head_sha: str | None, people_approval: str) -> list[str]:
    """The requirements of a person's PR (see the module docstring)."""
    from bot.campaign.submission import read_record
    from bot.forge.base import Permission

    sub = read_record(forge, pr)
    if sub is None:
        return [f"the PR was opened by {pr.author!r}, not by the bot, and has no submission record (a maintainer's /evaluate writes one)"]
    problems: list[str] = []
    if head_sha is None or sub.head_sha != head_sha:
        problems.append(f"the submission record authorized {sub.head_sha[:12]}, not the measured head {str(head_sha)[:12]}")
    if definition is None or sub.definition != definition:
        problems.append("the report's definition differs from the submission record")
    if solution_hash is None or sub.solution_hash != solution_hash:
        problems.append("the report's solution hash differs from the submission record")
    problems += folder_problems(forge, pr, solution_folder(sub.meta()))
    if people_approval != "none" and head_sha:
        approvers = []
        try:
            for r in forge.list_reviews(pr.number):
                if (r.state == "APPROVED" and r.commit_sha == head_sha and r.author
                        and r.author.lower() not in (pr.author.lower(), forge.info.bot_login.lower())):
                    approvers.append(r.author)
            ok = any(forge.permission(a).at_least(Permission(people_approval)) for a in dict.fromkeys(approvers))
        except ForgeError as e:
            return problems + [f"could not check the approving reviews ({type(e).__name__})"]
        if not ok:
            problems.append(f"{AWAITING_APPROVAL} of the measured head {head_sha[:12]} by someone with the "
                            f"{people_approval} role (then comment /promote)")
    return problems
