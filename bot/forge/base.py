"""The forge interface: everything the bot asks of a code host, with no host-specific types.

Two implementations share it: ``bot.forge.github.GitHubForge`` (GitHub or GitHub Enterprise over
PyGithub) and a local git-backed forge (branches in a local repository, reviews and statuses in a
local store). Command handlers, the controller and promotion code only ever see this module.

Conventions
-----------
* A pull request is addressed by its ``number``; issue comments on a PR use the same number (on
  GitHub a PR is an issue). Commands posted on plain issues use the issue number too.
* Branch names are plain names (``kbot/gdn_decode/n12``), never ``refs/heads/...``.
* File contents are ``bytes`` or ``str`` (encoded as UTF-8); ``None`` in ``commit_files`` deletes.
* Every write is idempotent under retries: an implementation must not create a second PR, comment,
  review or check run when a request is retried after a server error (find by marker or key first).
* Errors are the ``ForgeError`` subclasses below, never a host library's exception type.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterator, Literal, Mapping, Protocol, runtime_checkable

from bot.names import STATUS_CONTEXT

# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


class ForgeError(Exception):
    """Base of every error a forge raises."""


class NotFoundError(ForgeError):
    """The repository, branch, file, PR, comment or user does not exist (or is not visible)."""


class ConflictError(ForgeError):
    """A guarded write lost a race: the target moved since the caller last looked."""


class BranchMovedError(ConflictError):
    """``commit_files``: the branch head is not ``base_sha`` any more (someone pushed); nothing written."""


class HeadMovedError(ConflictError):
    """``merge``: the PR head is not the sha that was benchmarked (GitHub answers 409)."""


class NotMergeableError(ForgeError):
    """``merge``: the PR cannot be merged (conflicts, closed, required checks; GitHub answers 405)."""


class BranchTouchedByHumansError(ForgeError):
    """The bot refuses to write to a branch that a person has pushed to."""

    def __init__(self, branch: str, commits: list["CommitInfo"]):
        self.branch = branch
        self.commits = commits
        who = ", ".join(sorted({c.author_login or c.author_email or "?" for c in commits}))
        super().__init__(f"branch {branch!r} has {len(commits)} commit(s) not made by the bot (by {who})")


class UnsupportedError(ForgeError):
    """The operation needs a capability this forge/auth mode lacks (e.g. check runs with a token)."""


class RateLimitedError(ForgeError):
    """The host refused the request for rate limiting, after the implementation's own waits."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class ForgePermissionError(ForgeError):
    """The bot's credentials may not do this (403 that is not a rate limit)."""


# --------------------------------------------------------------------------------------------------
# Records (plain, immutable, host-neutral)
# --------------------------------------------------------------------------------------------------


class Permission(str, enum.Enum):
    """Repository permission of a user, ordered from weakest to strongest."""

    NONE = "none"
    READ = "read"
    TRIAGE = "triage"
    WRITE = "write"
    MAINTAIN = "maintain"
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        return list(Permission).index(self)  # definition order is the order of rights

    def at_least(self, other: "Permission | str") -> bool:
        return self.rank >= Permission(other).rank


StatusState = Literal["pending", "success", "failure", "error"]
CheckStatus = Literal["queued", "in_progress", "completed"]
CheckConclusion = Literal["success", "failure", "neutral", "cancelled", "skipped", "timed_out",
                          "action_required"]
MergeMethod = Literal["squash", "merge", "rebase"]
Reaction = Literal["+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"]


@dataclass(frozen=True)
class PullRequest:
    number: int
    title: str
    body: str
    head_branch: str
    head_sha: str
    base_branch: str
    state: Literal["open", "closed"]
    merged: bool
    author: str
    labels: tuple[str, ...] = ()
    url: str = ""                       # page for people (html_url on GitHub)
    merge_commit_sha: str | None = None
    mergeable: bool | None = None       # None: unknown / still being computed
    head_repo: str | None = None        # "owner/name" of the head; None if the fork was deleted
    base_repo: str | None = None

    @property
    def is_open(self) -> bool:
        return self.state == "open"

    @property
    def from_fork(self) -> bool:
        return self.head_repo is not None and self.base_repo is not None and self.head_repo != self.base_repo


@dataclass(frozen=True)
class Comment:
    """A conversation comment on an issue or PR."""

    id: int
    body: str
    author: str
    author_is_bot: bool
    created_at: datetime | None = None
    updated_at: datetime | None = None
    url: str = ""


@dataclass(frozen=True)
class Review:
    id: int
    body: str
    author: str
    state: str                          # COMMENTED, APPROVED, CHANGES_REQUESTED, DISMISSED, PENDING
    commit_sha: str | None = None
    url: str = ""


@dataclass(frozen=True)
class CommitStatus:
    context: str
    state: StatusState
    description: str = ""
    target_url: str | None = None


@dataclass(frozen=True)
class CombinedStatus:
    sha: str
    state: StatusState                  # "pending" when nothing was reported
    statuses: tuple[CommitStatus, ...] = ()

    def get(self, context: str) -> CommitStatus | None:
        return next((s for s in self.statuses if s.context == context), None)


@dataclass(frozen=True)
class CheckRun:
    id: int
    name: str
    head_sha: str
    status: CheckStatus
    conclusion: CheckConclusion | None = None
    title: str = ""
    summary: str = ""
    url: str = ""


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    message: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    committer_name: str
    committer_email: str
    author_login: str | None = None     # host account linked to the author, if any
    committer_login: str | None = None


@dataclass(frozen=True)
class FileChange:
    """One entry of a multi-file commit; ``content=None`` deletes ``path``."""

    path: str
    content: bytes | None
    executable: bool = False


@dataclass(frozen=True)
class MergeResult:
    sha: str                            # the commit now on the base branch
    merged: bool = True
    message: str = ""


FileContent = bytes | str | None
FilesArg = Mapping[str, FileContent] | list[FileChange]


@dataclass(frozen=True)
class ForgeInfo:
    """Static facts about the forge connection."""

    kind: str                           # "github", "local"
    repo: str                           # "owner/name" (or a path for local)
    bot_login: str                      # the account the bot writes as; its own events are ignored
    supports_check_runs: bool = False
    extra: dict = field(default_factory=dict)


# --------------------------------------------------------------------------------------------------
# Helpers shared by implementations
# --------------------------------------------------------------------------------------------------


def normalize_files(files: FilesArg) -> list[FileChange]:
    """``{path: bytes|str|None}`` or ``[FileChange]`` → validated ``[FileChange]``.

    Every implementation of ``commit_files`` calls this, so all forges refuse the same unsafe paths.
    """
    items = files if isinstance(files, list) else [
        FileChange(p, c.encode() if isinstance(c, str) else c) for p, c in files.items()]
    seen: set[str] = set()
    out = []
    for fc in items:
        if not isinstance(fc, FileChange):
            raise ForgeError(f"files must be FileChange records, got {type(fc).__name__}")
        content = fc.content.encode() if isinstance(fc.content, str) else fc.content
        parts = fc.path.split("/")
        if (not fc.path or fc.path.startswith("/") or any(p in ("", ".", "..") for p in parts)
                or parts[0] == ".git" or "\0" in fc.path or "\\" in fc.path):
            raise ForgeError(f"refusing unsafe path {fc.path!r} (relative, no '..', no '.git', '/' separators)")
        if fc.path in seen:
            raise ForgeError(f"path {fc.path!r} given twice")
        seen.add(fc.path)
        out.append(FileChange(fc.path, content, fc.executable))
    if not out:
        raise ForgeError("commit_files needs at least one file")
    return out


# --------------------------------------------------------------------------------------------------
# The interface
# --------------------------------------------------------------------------------------------------


@runtime_checkable
class Forge(Protocol):
    """What the bot needs from a code host. See the module docstring for conventions."""

    # -- identity and repository ---------------------------------------------------------------
    @property
    def info(self) -> ForgeInfo: ...

    def default_branch(self) -> str: ...

    def branch_head(self, branch: str) -> str | None:
        """Head sha of ``branch``, or None if it does not exist."""
        ...

    def default_head(self) -> tuple[str, str]:
        """(default branch name, its head sha)."""
        ...

    def read_file(self, path: str, ref: str | None = None) -> bytes | None:
        """Content of ``path`` at ``ref`` (branch, tag or sha; default branch if None); None if absent."""
        ...

    # -- writing code ----------------------------------------------------------------------------
    def commit_files(self, branch: str, base_sha: str, files: FilesArg, message: str) -> str:
        """Write ONE commit whose parent is ``base_sha`` and whose tree is base's tree plus ``files``.

        If ``branch`` does not exist it is created at the new commit. If it exists its head must be
        ``base_sha`` (a fast-forward), otherwise ``BranchMovedError`` and nothing changes. Raises
        ``BranchTouchedByHumansError`` if the existing branch holds commits not made by the bot.
        Returns the new commit sha.
        """
        ...

    def branch_commits(self, branch: str, base: str | None = None) -> list[CommitInfo]:
        """Commits on ``branch`` that are not on ``base`` (default branch if None), newest first."""
        ...

    def branch_touched_by_humans(self, branch: str, base: str | None = None) -> list[CommitInfo]:
        """The commits of ``branch_commits`` not authored AND committed by the bot (empty: safe)."""
        ...

    def delete_branch(self, branch: str) -> None: ...

    # -- pull requests ---------------------------------------------------------------------------
    def find_open_pr(self, head_branch: str) -> PullRequest | None: ...

    def open_pr(self, head_branch: str, title: str, body: str, *, base: str | None = None,
                labels: tuple[str, ...] | list[str] = (), draft: bool = False) -> PullRequest:
        """Open a PR from ``head_branch``, or return the open one that already exists (idempotent)."""
        ...

    def get_pr(self, number: int) -> PullRequest: ...

    def update_pr(self, number: int, *, title: str | None = None, body: str | None = None) -> PullRequest: ...

    def list_prs(self, *, state: Literal["open", "closed", "all"] = "open", label: str | None = None,
                 head_prefix: str | None = None) -> Iterator[PullRequest]:
        """All PRs matching the filters (the implementation paginates)."""
        ...

    def wait_mergeable(self, number: int, timeout: float = 30.0) -> PullRequest:
        """Refetch until ``mergeable`` is known (GitHub computes it lazily) or ``timeout`` passes."""
        ...

    def merge(self, number: int, sha: str, *, method: MergeMethod = "squash", title: str | None = None,
              message: str | None = None) -> MergeResult:
        """Merge exactly ``sha``. ``HeadMovedError`` if the head moved, ``NotMergeableError`` otherwise."""
        ...

    def close_pr(self, number: int, comment: str | None = None) -> PullRequest:
        """Close without merging; post ``comment`` first if given (idempotent: not re-posted)."""
        ...

    # -- labels ----------------------------------------------------------------------------------
    def add_labels(self, number: int, labels: list[str] | tuple[str, ...]) -> None: ...

    def remove_label(self, number: int, label: str) -> None:
        """Remove ``label``; no error if it was not there."""
        ...

    def labels(self, number: int) -> list[str]: ...

    # -- conversation ----------------------------------------------------------------------------
    def list_comments(self, number: int) -> Iterator[Comment]: ...

    def get_comment(self, comment_id: int) -> Comment: ...

    def create_comment(self, number: int, body: str) -> Comment:
        """Post a new comment (not deduplicated: use ``upsert_comment`` for anything retried)."""
        ...

    def upsert_comment(self, number: int, marker: str, body: str) -> Comment:
        """Sticky comment: edit the bot's comment containing ``marker`` in place, else create it.

        ``body`` must contain ``marker`` (``bot.forge.markers.sticky_marker(...)``); comments by anyone
        other than the bot are never considered, whatever they contain.
        """
        ...

    def delete_comment(self, comment_id: int) -> None: ...

    def add_reaction(self, comment_id: int, reaction: Reaction) -> None:
        """React to an issue/PR comment; reacting twice is not an error."""
        ...

    def upsert_review(self, number: int, marker: str, body: str, commit_sha: str | None = None) -> Review:
        """Sticky review (event COMMENT): edit the bot's review containing ``marker``, else create it."""
        ...

    def list_reviews(self, number: int) -> Iterator[Review]: ...

    # -- statuses and checks ---------------------------------------------------------------------
    def set_status(self, sha: str, state: StatusState, *, context: str = STATUS_CONTEXT,
                   description: str = "", target_url: str | None = None) -> CommitStatus: ...

    def combined_status(self, ref: str) -> CombinedStatus: ...

    def create_check_run(self, sha: str, name: str, *, status: CheckStatus = "in_progress",
                         conclusion: CheckConclusion | None = None, title: str = "",
                         summary: str = "", details_url: str | None = None) -> CheckRun:
        """Create (or, if one named ``name`` exists for ``sha``, update) a check run.

        ``UnsupportedError`` unless ``info.supports_check_runs`` (GitHub: App installation auth).
        """
        ...

    def update_check_run(self, check_run_id: int, *, status: CheckStatus | None = None,
                         conclusion: CheckConclusion | None = None, title: str | None = None,
                         summary: str | None = None) -> CheckRun: ...

    # -- who may command the bot -----------------------------------------------------------------
    def permission(self, user: str) -> Permission:
        """The user's permission on the repository (``Permission.NONE`` for strangers)."""
        ...

    def is_team_member(self, org: str, team_slug: str, user: str) -> bool:
        """Active membership only (a pending invitation does not count)."""
        ...

    def update_branch(self, number: int, expected_head: str | None = None) -> str:
        """Merge the default branch into PR ``number``'s head (GitHub's "Update branch"), only if the head
        is still ``expected_head`` (else ``BranchMovedError``); the new head sha (unchanged when already
        up to date). ``NotMergeableError`` on a conflict."""
        ...

    # -- workflows -------------------------------------------------------------------------------
    def dispatch_workflow(self, workflow: str, ref: str, inputs: Mapping[str, str]) -> None:
        """Start ``workflow`` (a file name under .github/workflows/) on ``ref`` with ``inputs``
        (``workflow_dispatch``). ``UnsupportedError`` where the host runs no workflows (the local forge)."""
        ...
