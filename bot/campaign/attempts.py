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

The meta block records the exact commit the bot pushed (``head_sha``, signed with the meta key:
``bot.forge.trusted_meta``); promotion merges only that head. A branch that exists without a PR (left
by an interrupted run) cannot be proven to be the bot's -- its commits may carry the bot's name and
e-mail without being the bot's -- so it is made again from the default branch; one that a person
visibly pushed to is never written to or opened (``BranchTouchedByHumansError``). When the bot itself
moves a candidate's head (``update_attempt``: the default branch merged in), it records the new head.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from bot.forge.base import BranchTouchedByHumansError, ForgeError, PullRequest
from bot.forge.trusted_meta import pushed_head, read_meta, record_head, verify_update, write_meta
from bot.names import CANDIDATE_LABEL, attempt_branch
from bot.review.markdown import commit_text
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
        if src.path.lower().endswith(".json"):
            # A JSON file beside solution.json would overwrite it, or be benchmarked as a solution of its own.
            raise AttemptError(f"{solution.name}: source {src.path!r} is a JSON file; a solution's folder holds one, solution.json")
        files[f"{folder}/{src.path}"] = src.content
    return files


def commit_message(title: str, description: str | None) -> str:
    """A candidate's commit message: the title, and the agent's description (model text) as one
    defused line (``bot.review.markdown.commit_text``), so nothing in it acts as a git trailer."""
    head = commit_text(title, 200)
    text = commit_text(description or "", 2000)
    return f"{head}\n\n{text}" if text else head


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
    if forge.branch_head(branch) is not None:
        # Left by an interrupted earlier run (commit made, PR not opened yet) -- or by a person.
        humans = forge.branch_touched_by_humans(branch)
        if humans:
            raise BranchTouchedByHumansError(branch, humans)
        # Its commits say they are the bot's, which anyone can write: start the branch again.
        forge.delete_branch(branch)
    _, main = forge.default_head()
    message = commit_message(f"kbot: {solution.name} for {definition}", solution.description)
    head = forge.commit_files(branch, main, solution_files(solution, folder), message)
    pr = forge.open_pr(branch, title or f"kbot: {solution.name} ({definition})",
                       write_meta(body, {**meta, "solution_path": path}, branch, head_sha=head, forge=forge),
                       labels=list(labels))
    return Attempt(pr, branch, True, path)


def update_attempt(forge: Any, number: int) -> str:
    """Merge the default branch into candidate PR ``number`` (the forge's ``update_branch``: GitHub's
    "Update branch", or the local forge's merge) and record the new head in its signed meta block;
    returns the head to measure. Only a head the bot recorded is updated: a head someone else pushed
    stays as it is (and the candidate gate refuses it). The new head is recorded only when
    ``verify_update`` finds it to be exactly that merge; otherwise the head is left unrecorded (the gate
    refuses it too) and ``UpdateRefused`` says why."""
    from bot.promotion.candidate_gate import solution_folder

    pr = forge.get_pr(number)
    meta = read_meta(pr, forge)
    if meta is None or pushed_head(meta) != pr.head_sha:
        return pr.head_sha
    head = forge.update_branch(number, expected_head=pr.head_sha)
    if head == pr.head_sha:
        return head
    folder = solution_folder(meta)
    problems = verify_update(forge, pr.head_sha, head, folder) if folder else ["the meta block names no solution folder"]
    if problems:
        raise UpdateRefused(f"PR #{number}: the head after the update is not the bot's merge: " + "; ".join(problems))
    record_head(forge, number, meta, head, merge=True)
    return head


class UpdateRefused(ForgeError):
    """The head found after bringing a candidate up to date is not the merge the bot asked for."""
