"""One optimization attempt = one branch + one commit + one pull request, through any ``Forge``.

Shared by the local loop (``bot.campaign.local_loop``, evaluates at once) and the GitHub campaign
(``bot.campaign.github_campaign``, the bench workflow evaluates later). Conventions:

* branch ``kbot/<definition>/<node>``, where the node id is the first 12 hex digits of the
  solution's content hash: the same kernel always lands on the same branch, so a retried or repeated
  request finds its earlier PR instead of opening a second one;
* one commit on top of the default branch with ``kernels/<definition>/<name>/solution.json`` and the
  solution's sources next to it (the folder gets a hash suffix when the name is taken on the default
  branch by another kernel);
* a PR whose body ends with the ``kbot:meta`` block (``bot.forge.markers``); ``solution_path`` is
  added to the caller's metadata, so the tree can later read the kernel back from the PR.

A branch that exists without a PR is reused only when every commit on it is the bot's; a branch a
person pushed to is never written to or opened (``BranchTouchedByHumansError``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from bot.forge.base import BranchTouchedByHumansError, ForgeError, PullRequest
from bot.forge.trusted_meta import write_meta
from bot.names import CANDIDATE_LABEL, attempt_branch
from harness.schema import Solution


class AttemptError(ForgeError):
    """The attempt cannot be written (unsafe source path, a branch holding some other kernel)."""


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:100] or "solution"


def solution_files(solution: Solution, folder: str) -> dict[str, str]:
    """``kernels/<definition>/<name>/``: solution.json plus every source file next to it (as pack.py keeps them)."""
    files = {f"{folder}/solution.json": solution.to_json(indent=2) + "\n"}
    for src in solution.sources:
        if src.path.startswith("/") or ".." in src.path.split("/"):
            raise AttemptError(f"{solution.name}: source path {src.path!r} escapes its folder")
        files[f"{folder}/{src.path}"] = src.content
    return files


def _holds(forge: Any, path: str, ref: str | None, solution: Solution) -> bool | None:
    """True/False: the solution JSON at ``path`` is/is not ``solution``; None: no file there."""
    raw = forge.read_file(path, ref=ref)
    if raw is None:
        return None
    try:
        return Solution.model_validate_json(raw).content_hash() == solution.content_hash()
    except ValueError:
        return False


def read_solution(forge: Any, places: Iterable[tuple[str, str | None]], want_hash: str) -> Solution | None:
    """The first ``(path, ref)`` that holds a valid Solution JSON with content hash ``want_hash``: a
    solution is identified by what it computes, never by a name or path someone could reuse."""
    for path, ref in places:
        raw = forge.read_file(path, ref=ref)
        if raw is None:
            continue
        try:
            sol = Solution.model_validate_json(raw)
        except ValueError:
            continue
        if sol.content_hash() == want_hash:
            return sol
    return None


def folder_for(forge: Any, solution: Solution, ref: str | None = None) -> str:
    """A kernels/ folder for ``solution`` that holds nothing else on ``ref`` (default branch if None)."""
    base = f"kernels/{solution.definition}/{safe_name(solution.name)}"
    if _holds(forge, f"{base}/solution.json", ref, solution) is False:
        return f"{base}-{solution.content_hash()[:8]}"
    return base


@dataclass(frozen=True)
class Attempt:
    pr: PullRequest
    branch: str
    opened: bool          # False: the PR existed already (open or closed) and was left as it was
    solution_path: str | None


def ensure_attempt(forge: Any, solution: Solution, *, node: str, meta: Mapping[str, Any], body: str,
                   title: str | None = None, labels: Iterable[str] = (CANDIDATE_LABEL,),
                   known_prs: Iterable[PullRequest] | None = None) -> Attempt:
    """The PR of ``solution``'s attempt: the existing one for its branch (open or closed: never a second
    PR for a node), else branch + commit (when the branch is absent) + a new PR with ``meta``.

    ``known_prs``: the PRs already listed by the caller (saves listing every PR again per attempt).
    Raises ``BranchTouchedByHumansError`` for a PR-less branch a person pushed to.
    """
    definition = solution.definition
    branch = attempt_branch(definition, node)
    prs = known_prs if known_prs is not None else forge.list_prs(state="all", head_prefix=branch)
    existing = sorted((p for p in prs if p.head_branch == branch and not p.from_fork), key=lambda p: p.number)
    if existing:
        return Attempt(existing[-1], branch, False, None)
    folder = folder_for(forge, solution)
    path = f"{folder}/solution.json"
    if forge.branch_head(branch) is None:
        _, main = forge.default_head()
        message = f"kbot: {solution.name} for {definition}\n\n{solution.description or ''}".strip()
        forge.commit_files(branch, main, solution_files(solution, folder), message)
    else:
        # Left by an interrupted earlier run (commit made, PR not opened yet) -- or by a person.
        humans = forge.branch_touched_by_humans(branch)
        if humans:
            raise BranchTouchedByHumansError(branch, humans)
        if not _holds(forge, path, branch, solution):
            raise AttemptError(f"branch {branch} exists but does not hold {solution.name} at {path}")
    pr = forge.open_pr(branch, title or f"kbot: {solution.name} ({definition})",
                       write_meta(body, {**meta, "solution_path": path}, branch), labels=list(labels))
    return Attempt(pr, branch, True, path)
