"""The Forge on GitHub (or GitHub Enterprise), over PyGithub.

Authentication: a token (PAT or the workflow's ``GITHUB_TOKEN``), or a GitHub App (JWT signed with the
App's private key, exchanged for installation tokens that PyGithub refreshes). Any ``base_url`` works,
http included, so GitHub Enterprise and the local fake server both do.

Retries: PyGithub's default retry also re-sends POSTs after a 5xx, and a 5xx does not mean the write
did not happen (a gateway can time out after the commit). So here urllib3 retries only reads, and every
write goes through ``_write``: on a transient failure it first *looks* whether the write took effect
(an open PR for the branch, a comment with the marker, the branch already at the new sha) and only
writes again if not. Rate-limit answers (403/429 with ``Retry-After``) are waited out the same way.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import time
from datetime import datetime
from typing import Any, Callable, Iterator, Mapping, TypeVar

import github
import requests
from github import Auth, GithubException, GithubIntegration, GithubRetry, InputGitTreeElement

from bot.forge.base import (
    BranchMovedError,
    BranchTouchedByHumansError,
    CheckRun,
    CombinedStatus,
    Comment,
    CommitInfo,
    CommitStatus,
    FilesArg,
    ForgeError,
    ForgeInfo,
    ForgePermissionError,
    HeadMovedError,
    MergeResult,
    NotFoundError,
    NotMergeableError,
    Permission,
    PullRequest,
    RateLimitedError,
    Review,
    UnsupportedError,
    normalize_files,
)
from bot.forge.markers import has_marker, sticky_marker
from bot.names import STATUS_CONTEXT

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_API = "https://api.github.com"
CLOSE_MARKER = sticky_marker("closed")
BODY_LIMIT = 65536  # characters GitHub accepts in a PR body, comment or review


def _check_body(body: str | None, what: str) -> None:
    """Refuse before writing: GitHub answers 422 for longer bodies, after a wasted round trip."""
    if body is not None and len(body) > BODY_LIMIT:
        raise ForgeError(f"{what} body is {len(body)} characters; GitHub accepts at most {BODY_LIMIT}")


_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class GitHubForge:
    """``bot.forge.base.Forge`` for one GitHub repository."""

    def __init__(
        self,
        repo: str,
        *,
        token: str | None = None,
        app_id: int | str | None = None,
        private_key: str | None = None,
        installation_id: int | None = None,
        base_url: str = DEFAULT_API,
        bot_login: str | None = None,
        per_page: int = 100,
        attempts: int = 4,
        backoff: float = 1.0,
        max_wait: float = 60.0,
        timeout: float = 30.0,
        seconds_between_requests: float | None = 0.25,
        seconds_between_writes: float | None = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if "/" not in repo or repo.count("/") != 1:
            raise ForgeError(f"repo must be 'owner/name', not {repo!r}")
        if (token is None) == (app_id is None):
            raise ForgeError("give exactly one of token= or app_id= (with private_key=)")
        self.full_name = repo
        self.owner, self.name = repo.split("/")
        self.base_url = base_url.rstrip("/")
        self.attempts, self.backoff, self.max_wait, self._sleep = max(1, attempts), backoff, max_wait, sleep
        # urllib3 retries reads only (see module docstring); 403 is included for secondary rate limits.
        retry = GithubRetry(total=attempts, backoff_factor=backoff, allowed_methods=_READ_METHODS,
                            secondary_rate_wait=min(60.0, max_wait), max_rate_limit_wait=max_wait)
        common: dict[str, Any] = dict(base_url=self.base_url, per_page=per_page, timeout=int(timeout), retry=retry,
                                      seconds_between_requests=seconds_between_requests,
                                      seconds_between_writes=seconds_between_writes)
        self.is_app = app_id is not None
        if self.is_app:
            if not private_key:
                raise ForgeError("GitHub App auth needs private_key (PEM)")
            app_auth = Auth.AppAuth(int(app_id), private_key)
            integration = GithubIntegration(auth=app_auth, **{k: common[k] for k in ("base_url", "timeout", "retry",
                                                                                     "per_page")})
            try:
                if installation_id is None:
                    installation_id = integration.get_repo_installation(self.owner, self.name).id
                if bot_login is None:
                    bot_login = f"{integration.get_app().slug}[bot]"
            except GithubException as exc:
                raise self._translate(exc, "GitHub App setup") from exc
            self.installation_id = installation_id
            auth: Auth.Auth = app_auth.get_installation_auth(int(installation_id))
        else:
            auth = Auth.Token(token)
            self.installation_id = None
        self.gh = github.Github(auth=auth, **common)
        # URL-only handles (no GET before a write) for issues, pulls and commits.
        self.lazy = self.gh.withLazy(True).get_repo(self.full_name)
        if bot_login is None:
            try:
                bot_login = self.gh.get_user().login
            except GithubException as exc:
                if exc.status == 403:  # installation tokens (the workflow's GITHUB_TOKEN) cannot read /user
                    raise ForgeError("cannot tell whose token this is (GET /user refused): pass bot_login= "
                                     "(for the Actions GITHUB_TOKEN it is github-actions[bot])") from exc
                raise self._translate(exc, "who am I (GET /user)") from exc
        self.bot_login = bot_login
        self._repo_obj = None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **kwargs: Any) -> "GitHubForge":
        """From ``GITHUB_REPOSITORY``, ``GITHUB_API_URL`` and either ``KBOT_APP_ID`` + ``KBOT_APP_PRIVATE_KEY``
        (or ``KBOT_APP_PRIVATE_KEY_FILE``) [+ ``KBOT_APP_INSTALLATION_ID``], or ``KBOT_GITHUB_TOKEN``/``GITHUB_TOKEN``
        [+ ``KBOT_BOT_LOGIN``; inside Actions the ``GITHUB_TOKEN`` identity is ``github-actions[bot]``]."""
        env = dict(os.environ if env is None else env)
        repo = env.get("GITHUB_REPOSITORY") or kwargs.pop("repo", None)
        if not repo:
            raise ForgeError("GITHUB_REPOSITORY is not set")
        base_url = env.get("GITHUB_API_URL", DEFAULT_API)
        if env.get("KBOT_APP_ID"):
            key = env.get("KBOT_APP_PRIVATE_KEY")
            if not key and env.get("KBOT_APP_PRIVATE_KEY_FILE"):
                with open(env["KBOT_APP_PRIVATE_KEY_FILE"]) as fh:
                    key = fh.read()
            inst = env.get("KBOT_APP_INSTALLATION_ID")
            return cls(repo, app_id=env["KBOT_APP_ID"], private_key=key, base_url=base_url,
                       installation_id=int(inst) if inst else None, **kwargs)
        token = env.get("KBOT_GITHUB_TOKEN") or env.get("GITHUB_TOKEN")
        if not token:
            raise ForgeError("no credentials: set KBOT_APP_ID + KBOT_APP_PRIVATE_KEY, or KBOT_GITHUB_TOKEN/GITHUB_TOKEN")
        if env.get("KBOT_BOT_LOGIN"):
            kwargs.setdefault("bot_login", env["KBOT_BOT_LOGIN"])
        elif not env.get("KBOT_GITHUB_TOKEN") and env.get("GITHUB_ACTIONS") == "true":
            kwargs.setdefault("bot_login", "github-actions[bot]")  # the workflow token's identity
        return cls(repo, token=token, base_url=base_url, **kwargs)

    # ------------------------------------------------------------------------------------------
    # Error handling and retries
    # ------------------------------------------------------------------------------------------
    @staticmethod
    def _message(exc: GithubException) -> str:
        data = exc.data if isinstance(exc.data, dict) else {}
        msg = str(data.get("message") or exc.data or "")
        errors = data.get("errors")
        if errors:
            msg += ": " + "; ".join(e.get("message", str(e)) if isinstance(e, dict) else str(e) for e in errors)
        return msg

    def _is_rate_limit(self, exc: GithubException) -> bool:
        headers = exc.headers or {}
        return isinstance(exc, github.RateLimitExceededException) or exc.status == 429 or (
            exc.status == 403 and ("retry-after" in {k.lower() for k in headers}
                                   or "rate limit" in self._message(exc).lower()))

    def _translate(self, exc: Exception, what: str) -> ForgeError:
        if isinstance(exc, ForgeError):
            return exc
        if isinstance(exc, GithubException):
            msg = f"{what}: {exc.status} {self._message(exc)}"
            if self._is_rate_limit(exc):
                return RateLimitedError(msg, self._retry_after(exc))
            if exc.status == 404:
                return NotFoundError(msg)
            if exc.status in (401, 403):
                return ForgePermissionError(msg)
            return ForgeError(msg)
        return ForgeError(f"{what}: {type(exc).__name__}: {exc}")

    @staticmethod
    def _retry_after(exc: GithubException) -> float | None:
        for k, v in (exc.headers or {}).items():
            if k.lower() == "retry-after":
                try:
                    return float(v)
                except ValueError:
                    return None
        return None

    @staticmethod
    def _until_reset(exc: GithubException) -> float | None:
        """Seconds until a primary rate limit resets (X-RateLimit-Reset is an epoch time)."""
        for k, v in (exc.headers or {}).items():
            if k.lower() == "x-ratelimit-reset":
                try:
                    return max(0.0, float(v) - time.time())
                except ValueError:
                    return None
        return None

    def _transient(self, exc: Exception) -> bool:
        if isinstance(exc, GithubException):
            return exc.status >= 500 or self._is_rate_limit(exc)
        return isinstance(exc, (requests.ConnectionError, requests.Timeout, requests.exceptions.RetryError))

    def _read(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (GithubException, requests.RequestException) as exc:
            raise self._translate(exc, what) from exc

    def _write(self, what: str, do: Callable[[], T], recover: Callable[[], T | None] | None = None,
               on_error: Callable[[GithubException], T | None] | None = None) -> T:
        """Run a write; after a transient failure, ``recover()`` (did it land?) before writing again.

        ``on_error`` may turn a definite (non-transient) error into a result, e.g. "already exists".
        """
        last: Exception | None = None
        for attempt in range(self.attempts):
            try:
                return do()
            except GithubException as exc:
                if not self._transient(exc):
                    if on_error is not None:
                        result = on_error(exc)
                        if result is not None:
                            return result
                    raise self._translate(exc, what) from exc
                last = exc
            except (requests.ConnectionError, requests.Timeout) as exc:
                last = exc
            log.warning("%s: transient failure (%s), attempt %d/%d", what, last, attempt + 1, self.attempts)
            if recover is not None:
                found = self._read(f"{what} (checking whether it landed)", recover)
                if found is not None:
                    return found
            if attempt + 1 < self.attempts:
                wait = self._retry_after(last) if isinstance(last, GithubException) else None
                if wait is None and isinstance(last, GithubException) and self._is_rate_limit(last):
                    wait = self._until_reset(last)
                if wait is not None and wait > self.max_wait:
                    raise RateLimitedError(f"{what}: rate limited for {wait:.0f}s more", wait) from last
                self._sleep(wait if wait is not None else min(self.max_wait, self.backoff * 2 ** attempt))
        raise self._translate(last, what) from last  # type: ignore[arg-type]

    # ------------------------------------------------------------------------------------------
    # Identity and repository
    # ------------------------------------------------------------------------------------------
    @property
    def info(self) -> ForgeInfo:
        return ForgeInfo(kind="github", repo=self.full_name, bot_login=self.bot_login,
                         supports_check_runs=self.is_app,
                         extra={"base_url": self.base_url, "installation_id": self.installation_id})

    def _repo(self):
        if self._repo_obj is None:
            self._repo_obj = self._read("get repository", lambda: self.gh.get_repo(self.full_name))
        return self._repo_obj

    def default_branch(self) -> str:
        return self._repo().default_branch

    def branch_head(self, branch: str) -> str | None:
        try:
            return self._read(f"branch {branch}", lambda: self._repo().get_git_ref(f"heads/{branch}").object.sha)
        except NotFoundError:
            return None

    def default_head(self) -> tuple[str, str]:
        name = self.default_branch()
        sha = self.branch_head(name)
        if sha is None:
            raise NotFoundError(f"default branch {name!r} has no commits")
        return name, sha

    def read_file(self, path: str, ref: str | None = None) -> bytes | None:
        ref = ref or self.default_branch()
        try:
            content = self._read(f"read {path}@{ref}", lambda: self._repo().get_contents(path, ref=ref))
        except NotFoundError:
            return None
        if isinstance(content, list):
            raise ForgeError(f"{path}@{ref} is a directory")
        if content.encoding == "base64":
            return base64.b64decode(content.content or "")
        # Files over 1 MB come without content: fetch the blob.
        blob = self._read(f"blob {content.sha}", lambda: self._repo().get_git_blob(content.sha))
        return base64.b64decode(blob.content)

    # ------------------------------------------------------------------------------------------
    # Commits and branches
    # ------------------------------------------------------------------------------------------
    def commit_files(self, branch: str, base_sha: str, files: FilesArg, message: str) -> str:
        changes = normalize_files(files)
        repo = self._repo()
        try:
            ref = self._read(f"branch {branch}", lambda: repo.get_git_ref(f"heads/{branch}"))
        except NotFoundError:
            ref = None
        if ref is not None:
            humans = self.branch_touched_by_humans(branch)
            if humans:
                raise BranchTouchedByHumansError(branch, humans)
            if ref.object.sha != base_sha:
                raise BranchMovedError(f"branch {branch} is at {ref.object.sha[:12]}, not at base {base_sha[:12]}")
        parent = self._read(f"commit {base_sha}", lambda: repo.get_git_commit(base_sha))
        elements = []
        for fc in changes:
            if fc.content is None:
                elements.append(InputGitTreeElement(fc.path, "100644", "blob", sha=None))
                continue
            encoded = base64.b64encode(fc.content).decode()
            blob = self._write(f"blob for {fc.path}", lambda e=encoded: repo.create_git_blob(e, "base64"))
            elements.append(InputGitTreeElement(fc.path, "100755" if fc.executable else "100644", "blob", sha=blob.sha))
        # Blobs, trees and commits are content-addressed: a repeated POST yields the same object.
        tree = self._write("tree", lambda: repo.create_git_tree(elements, base_tree=parent.tree))
        commit = self._write("commit", lambda: repo.create_git_commit(message, tree, [parent]))
        sha = commit.sha
        landed = lambda: sha if self.branch_head(branch) == sha else None  # noqa: E731

        if ref is None:
            def exists(exc: GithubException) -> str | None:
                if exc.status == 422 and "already exists" in self._message(exc).lower():
                    if landed():
                        return sha
                    raise BranchMovedError(f"branch {branch} was created by someone else meanwhile") from exc
                return None

            self._write(f"create branch {branch}", lambda: repo.create_git_ref(f"refs/heads/{branch}", sha),
                        recover=landed, on_error=exists)
        else:
            def moved(exc: GithubException) -> str | None:
                if exc.status == 422 and landed():
                    return sha
                if exc.status == 422:
                    raise BranchMovedError(f"branch {branch} moved during the commit ({self._message(exc)})") from exc
                return None

            self._write(f"update branch {branch}", lambda: ref.edit(sha, force=False), recover=landed, on_error=moved)
        return sha

    def branch_commits(self, branch: str, base: str | None = None) -> list[CommitInfo]:
        base = base or self.default_branch()

        def fetch() -> list[CommitInfo]:
            comparison = self._repo().compare(base, branch)
            return [self._commit_info(c) for c in comparison.commits]

        return list(reversed(self._read(f"compare {base}...{branch}", fetch)))

    # GitHub's compare API lists at most 300 files; a longer list may hide some, so it is refused.
    MAX_COMPARE_FILES = 300

    def changed_files(self, branch: str, base: str | None = None) -> list[str]:
        """Paths changed on ``branch`` since its merge base with ``base`` (default branch if None)."""
        base = base or self.default_branch()

        def fetch() -> list[str]:
            comparison = self._repo().compare(base, branch)
            paths: list[str] = []
            for f in comparison.files:
                paths.append(f.filename)
                prev = getattr(f, "previous_filename", None)
                if prev:
                    paths.append(prev)  # a rename changes its old path too
            return paths

        paths = self._read(f"compare files {base}...{branch}", fetch)
        if len(paths) >= self.MAX_COMPARE_FILES:
            raise ForgeError(f"{branch} changes {len(paths)}+ files; too many to check")
        return paths

    def branch_touched_by_humans(self, branch: str, base: str | None = None) -> list[CommitInfo]:
        return [c for c in self.branch_commits(branch, base)
                if c.author_login != self.bot_login or c.committer_login != self.bot_login]

    @staticmethod
    def _commit_info(c: Any) -> CommitInfo:
        g = c.commit
        return CommitInfo(
            sha=c.sha, message=g.message, parents=tuple(p.sha for p in c.parents),
            author_name=g.author.name if g.author else "", author_email=g.author.email if g.author else "",
            committer_name=g.committer.name if g.committer else "",
            committer_email=g.committer.email if g.committer else "",
            author_login=c.author.login if c.author else None,
            committer_login=c.committer.login if c.committer else None,
        )

    def delete_branch(self, branch: str) -> None:
        if self.branch_head(branch) is None:
            return
        def gone(exc: GithubException) -> bool | None:
            return True if exc.status == 422 and self.branch_head(branch) is None else None

        self._write(f"delete branch {branch}",
                    lambda: self._repo().get_git_ref(f"heads/{branch}").delete(),
                    recover=lambda: True if self.branch_head(branch) is None else None, on_error=gone)

    # ------------------------------------------------------------------------------------------
    # Pull requests
    # ------------------------------------------------------------------------------------------
    def _pr(self, p: Any, full: bool) -> PullRequest:
        return PullRequest(
            number=p.number, title=p.title, body=p.body or "", head_branch=p.head.ref, head_sha=p.head.sha,
            base_branch=p.base.ref, state=p.state, merged=(p.merged if full else p.merged_at is not None),
            author=p.user.login if p.user else "", labels=tuple(lb.name for lb in p.labels), url=p.html_url,
            merge_commit_sha=p.merge_commit_sha, mergeable=p.mergeable if full else None,
            head_repo=p.head.repo.full_name if p.head.repo else None,
            base_repo=p.base.repo.full_name if p.base.repo else None,
        )

    def find_open_pr(self, head_branch: str) -> PullRequest | None:
        def find() -> PullRequest | None:
            for p in self._repo().get_pulls(state="open", head=f"{self.owner}:{head_branch}"):
                if p.head.ref == head_branch and (p.head.repo is None or p.head.repo.full_name == self.full_name):
                    return self._pr(p, full=False)
            return None

        return self._read(f"find PR for {head_branch}", find)

    def open_pr(self, head_branch: str, title: str, body: str, *, base: str | None = None,
                labels: tuple[str, ...] | list[str] = (), draft: bool = False) -> PullRequest:
        _check_body(body, "PR")
        existing = self.find_open_pr(head_branch)
        if existing is None:
            base = base or self.default_branch()

            def duplicate(exc: GithubException) -> PullRequest | None:
                return self.find_open_pr(head_branch) if exc.status == 422 and \
                    "already exists" in self._message(exc) else None

            existing = self._write(
                f"open PR {head_branch}",
                lambda: self._pr(self._repo().create_pull(title=title, body=body, head=head_branch, base=base,
                                                          draft=draft), full=True),
                recover=lambda: self.find_open_pr(head_branch), on_error=duplicate)
        if labels and not set(labels) <= set(existing.labels):
            self.add_labels(existing.number, labels)
            existing = self.get_pr(existing.number)
        return existing

    def get_pr(self, number: int) -> PullRequest:
        return self._read(f"PR #{number}", lambda: self._pr(self._repo().get_pull(number), full=True))

    def update_pr(self, number: int, *, title: str | None = None, body: str | None = None) -> PullRequest:
        _check_body(body, "PR")
        kwargs = {k: v for k, v in (("title", title), ("body", body)) if v is not None}
        if kwargs:  # PATCH with the same values is idempotent: plain retries are safe
            self._write(f"update PR #{number}", lambda: self.lazy.get_pull(number).edit(**kwargs))
        return self.get_pr(number)

    def list_prs(self, *, state: str = "open", label: str | None = None,
                 head_prefix: str | None = None) -> Iterator[PullRequest]:
        if state not in ("open", "closed", "all"):
            raise ForgeError(f"state must be open, closed or all, not {state!r}")
        pulls = self._read("list PRs", lambda: self._repo().get_pulls(state=state, sort="created", direction="desc"))
        for p in _paged(self, "list PRs", pulls):
            pr = self._pr(p, full=False)
            if label is not None and label not in pr.labels:
                continue
            if head_prefix is not None and not pr.head_branch.startswith(head_prefix):
                continue
            yield pr

    def wait_mergeable(self, number: int, timeout: float = 30.0) -> PullRequest:
        deadline = time.monotonic() + timeout
        delay = 0.5
        while True:
            pr = self.get_pr(number)
            if pr.mergeable is not None or not pr.is_open or time.monotonic() >= deadline:
                return pr
            self._sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 8.0)

    def merge(self, number: int, sha: str, *, method: str = "squash", title: str | None = None,
              message: str | None = None) -> MergeResult:
        if method not in ("squash", "merge", "rebase"):
            raise ForgeError(f"merge method must be squash, merge or rebase, not {method!r}")
        current = self.get_pr(number)
        if current.merged:
            if current.head_sha == sha and current.merge_commit_sha:
                return MergeResult(current.merge_commit_sha, True, "already merged")
            raise NotMergeableError(f"PR #{number} was already merged at {current.head_sha[:12]}, not {sha[:12]}")
        if current.head_sha != sha:
            raise HeadMovedError(f"PR #{number} head is {current.head_sha[:12]}, benchmarked {sha[:12]}")
        kwargs: dict[str, Any] = {"merge_method": method, "sha": sha}
        if title is not None:
            kwargs["commit_title"] = title
        if message is not None:
            kwargs["commit_message"] = message

        def landed() -> MergeResult | None:
            pr = self.get_pr(number)
            if pr.merged and pr.head_sha == sha and pr.merge_commit_sha:
                return MergeResult(pr.merge_commit_sha, True, "merged")
            return None

        def refused(exc: GithubException) -> MergeResult | None:
            if exc.status == 409:
                raise HeadMovedError(f"PR #{number}: {self._message(exc)}") from exc
            if exc.status in (405, 422):
                # 405 also answers a retried merge that already went through, or a head that moved
                # in a way GitHub reports as "not mergeable": look before deciding.
                pr = self.get_pr(number)
                if pr.merged and pr.head_sha == sha and pr.merge_commit_sha:
                    return MergeResult(pr.merge_commit_sha, True, "merged")
                if pr.head_sha != sha:
                    raise HeadMovedError(f"PR #{number} head moved to {pr.head_sha[:12]}: {self._message(exc)}") from exc
                raise NotMergeableError(f"PR #{number}: {self._message(exc)}") from exc
            return None

        status = self._write(f"merge PR #{number}", lambda: self.lazy.get_pull(number).merge(**kwargs),
                             recover=landed, on_error=refused)
        if isinstance(status, MergeResult):
            return status
        if not status.merged:
            raise NotMergeableError(f"PR #{number}: {status.message}")
        return MergeResult(status.sha, True, status.message)

    def update_branch(self, number: int, expected_head: str | None = None, timeout: float = 60.0) -> str:
        """GitHub's "Update branch" (``PUT /pulls/{n}/update-branch`` with ``expected_head_sha``): the
        default branch merged into the PR head by GitHub. Returns the new head (unchanged when already up
        to date); ``BranchMovedError`` when the head is not ``expected_head``, ``NotMergeableError`` on a
        conflict. GitHub merges after its 202, so this waits (up to ``timeout``) for the head to move;
        the head it returns is whatever is there then: the caller checks that it is the merge it asked
        for (``bot.campaign.attempts.update_attempt``)."""
        pr = self.get_pr(number)
        if expected_head is not None and pr.head_sha != expected_head:
            raise BranchMovedError(f"{pr.head_branch} is at {pr.head_sha[:12]}, not {expected_head[:12]}")
        if not self.branch_commits(pr.base_branch, base=pr.head_sha):
            return pr.head_sha

        def refused(exc: GithubException) -> bool | None:
            msg = self._message(exc).lower()
            if exc.status == 403 and "not accessible by integration" in msg:
                # GitHub describes update-branch as not enabled for Apps: merge through "Merge a
                # branch" instead (no expected-head guard there; update_attempt checks the result).
                return self._merge_default_into(pr)
            if exc.status == 422 and "no new commits" in msg:
                return True
            if exc.status == 422 and "expected head sha" in msg:
                raise BranchMovedError(f"{pr.head_branch} moved before the update: {self._message(exc)}") from exc
            if exc.status == 422 and "conflict" in msg:
                raise NotMergeableError(f"PR #{number}: {self._message(exc)}") from exc
            return None

        def landed() -> bool | None:
            return True if self.get_pr(number).head_sha != pr.head_sha else None

        def update() -> bool:
            # PyGithub's PullRequest.update_branch only returns whether the status was 202 and drops
            # GitHub's reason; the requester's checked call raises with it (moved head, conflict).
            pull = self.lazy.get_pull(number)
            pull._requester.requestJsonAndCheck("PUT", f"{pull.url}/update-branch",
                                                input={"expected_head_sha": pr.head_sha})
            return True

        self._write(f"update branch of PR #{number}", update, recover=landed, on_error=refused)
        deadline, delay = time.monotonic() + timeout, 0.5
        while True:
            head = self.get_pr(number).head_sha
            if head != pr.head_sha or not self.branch_commits(pr.base_branch, base=head):
                return head
            if time.monotonic() >= deadline:
                raise ForgeError(f"PR #{number}: GitHub accepted the update but the head did not move in {timeout:.0f}s")
            self._sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 8.0)

    def _merge_default_into(self, pr: PullRequest) -> bool:
        """``POST /merges``: the base branch's head merged into the PR's head branch, if that branch is
        still at the PR's head (checked just before; the caller checks the result by content)."""
        if self.branch_head(pr.head_branch) != pr.head_sha:
            raise BranchMovedError(f"{pr.head_branch} moved before the update")
        main = self.branch_head(pr.base_branch)

        def conflict(exc: GithubException) -> bool | None:
            if exc.status == 409:
                raise NotMergeableError(f"PR #{pr.number}: {self._message(exc)}") from exc
            return None

        self._write(f"merge {pr.base_branch} into {pr.head_branch}",
                    lambda: self._repo().merge(pr.head_branch, main, f"Merge {pr.base_branch} into {pr.head_branch}"),
                    recover=lambda: True if self.branch_head(pr.head_branch) != pr.head_sha else None, on_error=conflict)
        return True

    def close_pr(self, number: int, comment: str | None = None) -> PullRequest:
        if comment:
            self.upsert_comment(number, CLOSE_MARKER, f"{CLOSE_MARKER}\n{comment}")
        pr = self.get_pr(number)
        if pr.is_open:
            self._write(f"close PR #{number}", lambda: self.lazy.get_pull(number).edit(state="closed"))
            pr = self.get_pr(number)
        return pr

    # ------------------------------------------------------------------------------------------
    # Labels
    # ------------------------------------------------------------------------------------------
    def add_labels(self, number: int, labels: list[str] | tuple[str, ...]) -> None:
        if labels:  # adding a label twice is a no-op on GitHub: plain retries are safe
            self._write(f"label #{number}", lambda: self.lazy.get_issue(number).add_to_labels(*labels))

    def remove_label(self, number: int, label: str) -> None:
        def absent(exc: GithubException) -> bool | None:
            return True if exc.status == 404 else None

        self._write(f"unlabel #{number}", lambda: self.lazy.get_issue(number).remove_from_labels(label),
                    on_error=absent)

    def labels(self, number: int) -> list[str]:
        return self._read(f"labels of #{number}", lambda: [lb.name for lb in self.lazy.get_issue(number).get_labels()])

    # ------------------------------------------------------------------------------------------
    # Comments, reactions, reviews
    # ------------------------------------------------------------------------------------------
    @staticmethod
    def _comment(c: Any) -> Comment:
        return Comment(id=c.id, body=c.body or "", author=c.user.login if c.user else "",
                       author_is_bot=bool(c.user and (c.user.type == "Bot" or c.user.login.endswith("[bot]"))),
                       created_at=_dt(c.created_at), updated_at=_dt(c.updated_at), url=c.html_url or "")

    def list_comments(self, number: int) -> Iterator[Comment]:
        comments = self._read(f"comments of #{number}", lambda: self.lazy.get_issue(number).get_comments())
        for c in _paged(self, f"comments of #{number}", comments):
            yield self._comment(c)

    def get_comment(self, comment_id: int) -> Comment:
        return self._read(f"comment {comment_id}", lambda: self._comment(self._issue_comment(comment_id, lazy=False)))

    def _issue_comment(self, comment_id: int, lazy: bool = True) -> Any:
        """A handle on an issue comment by id (PyGithub only offers one through an issue)."""
        from github.IssueComment import IssueComment

        requester = self.lazy.requester if lazy else self.gh.requester
        return IssueComment(requester, url=f"{self.lazy.url}/issues/comments/{int(comment_id)}")

    def create_comment(self, number: int, body: str) -> Comment:
        _check_body(body, "comment")
        return self._write(f"comment on #{number}",
                           lambda: self._comment(self.lazy.get_issue(number).create_comment(body)))

    def _find_own(self, what: str, fetch: Callable[[], Any], marker: str) -> Any | None:
        """The bot's newest item (comment or review) holding ``marker``: all pages are read, others'
        items ignored, so a person quoting the marker cannot take over the sticky one."""
        found = None
        for item in _paged(self, what, self._read(what, fetch)):
            if item.user and item.user.login == self.bot_login and has_marker(item.body, marker):
                found = item
        return found

    def _find_own_comment(self, number: int, marker: str) -> Any | None:
        return self._find_own(f"comments of #{number}", lambda: self.lazy.get_issue(number).get_comments(), marker)

    def upsert_comment(self, number: int, marker: str, body: str) -> Comment:
        _check_body(body, "comment")
        if not has_marker(body, marker):
            raise ForgeError(f"sticky comment body must contain its marker {marker!r} on a line of its own")
        existing = self._find_own_comment(number, marker)
        if existing is not None:
            if existing.body != body:
                self._write(f"edit comment {existing.id}", lambda: existing.edit(body))  # updates `existing`
            return self._comment(existing)

        def recover() -> Comment | None:
            c = self._find_own_comment(number, marker)
            return self._comment(c) if c is not None else None

        return self._write(f"comment on #{number}",
                           lambda: self._comment(self.lazy.get_issue(number).create_comment(body)), recover=recover)

    def delete_comment(self, comment_id: int) -> None:
        def gone(exc: GithubException) -> bool | None:
            return True if exc.status == 404 else None

        self._write(f"delete comment {comment_id}", lambda: self._issue_comment(comment_id).delete(),
                    on_error=gone)

    def add_reaction(self, comment_id: int, reaction: str) -> None:
        # POST answers 200 for an existing reaction: retries are harmless.
        self._write(f"react to {comment_id}",
                    lambda: self._issue_comment(comment_id).create_reaction(reaction))

    @staticmethod
    def _review(r: Any) -> Review:
        return Review(id=r.id, body=r.body or "", author=r.user.login if r.user else "", state=r.state,
                      commit_sha=r.commit_id, url=r.html_url or "")

    def list_reviews(self, number: int) -> Iterator[Review]:
        reviews = self._read(f"reviews of #{number}", lambda: self.lazy.get_pull(number).get_reviews())
        for r in _paged(self, f"reviews of #{number}", reviews):
            yield self._review(r)

    def _find_own_review(self, number: int, marker: str) -> Any | None:
        return self._find_own(f"reviews of #{number}", lambda: self.lazy.get_pull(number).get_reviews(), marker)

    def upsert_review(self, number: int, marker: str, body: str, commit_sha: str | None = None) -> Review:
        _check_body(body, "review")
        if not has_marker(body, marker):
            raise ForgeError(f"sticky review body must contain its marker {marker!r} on a line of its own")
        existing = self._find_own_review(number, marker)
        if existing is not None:
            if existing.body != body:
                self._write(f"edit review {existing.id}", lambda: existing.edit(body))  # updates `existing`
            return self._review(existing)

        def create() -> Review:
            pull = self.lazy.get_pull(number)
            kwargs: dict[str, Any] = {"body": body, "event": "COMMENT"}
            if commit_sha:
                kwargs["commit"] = self.lazy.get_commit(commit_sha)
            return self._review(pull.create_review(**kwargs))

        def recover() -> Review | None:
            r = self._find_own_review(number, marker)
            return self._review(r) if r is not None else None

        return self._write(f"review on #{number}", create, recover=recover)

    # ------------------------------------------------------------------------------------------
    # Statuses and check runs
    # ------------------------------------------------------------------------------------------
    def set_status(self, sha: str, state: str, *, context: str = STATUS_CONTEXT, description: str = "",
                   target_url: str | None = None) -> CommitStatus:
        if state not in ("pending", "success", "failure", "error"):
            raise ForgeError(f"status state must be pending, success, failure or error, not {state!r}")
        kwargs: dict[str, Any] = {"state": state, "context": context, "description": description[:140]}
        if target_url:
            kwargs["target_url"] = target_url
        # Statuses are last-writer-wins per context, so a duplicate POST changes nothing visible.
        s = self._write(f"status {context} on {sha[:12]}", lambda: self.lazy.get_commit(sha).create_status(**kwargs))
        return CommitStatus(context=s.context, state=s.state, description=s.description or "", target_url=s.target_url)

    def combined_status(self, ref: str) -> CombinedStatus:
        def fetch() -> CombinedStatus:
            c = self.lazy.get_commit(ref).get_combined_status()
            return CombinedStatus(sha=c.sha, state=c.state, statuses=tuple(
                CommitStatus(context=s.context, state=s.state, description=s.description or "",
                             target_url=s.target_url) for s in c.statuses))

        return self._read(f"combined status of {ref}", fetch)

    @staticmethod
    def _check(c: Any) -> CheckRun:
        out = c.output
        return CheckRun(id=c.id, name=c.name, head_sha=c.head_sha, status=c.status, conclusion=c.conclusion,
                        title=(out.title or "") if out else "", summary=(out.summary or "") if out else "",
                        url=c.html_url or "")

    def _require_checks(self) -> None:
        if not self.is_app:
            raise UnsupportedError("check runs need GitHub App authentication; with a token use set_status()")

    def create_check_run(self, sha: str, name: str, *, status: str = "in_progress", conclusion: str | None = None,
                         title: str = "", summary: str = "", details_url: str | None = None) -> CheckRun:
        self._require_checks()

        def existing() -> Any | None:
            runs = self.lazy.get_commit(sha).get_check_runs(check_name=name)
            return next(iter(runs), None)

        found = self._read(f"check runs of {sha[:12]}", existing)
        if found is not None:
            return self.update_check_run(found.id, status=status, conclusion=conclusion, title=title, summary=summary)
        kwargs: dict[str, Any] = {"name": name, "head_sha": sha, "status": "completed" if conclusion else status}
        if conclusion:
            kwargs["conclusion"] = conclusion
        if title or summary:
            kwargs["output"] = {"title": title or name, "summary": summary or title}
        if details_url:
            kwargs["details_url"] = details_url

        def recover() -> CheckRun | None:
            run = existing()
            return self._check(run) if run is not None else None

        return self._write(f"check run {name}", lambda: self._check(self._repo().create_check_run(**kwargs)),
                           recover=recover)

    def update_check_run(self, check_run_id: int, *, status: str | None = None, conclusion: str | None = None,
                         title: str | None = None, summary: str | None = None) -> CheckRun:
        self._require_checks()
        run = self._read(f"check run {check_run_id}", lambda: self._repo().get_check_run(check_run_id))
        kwargs: dict[str, Any] = {}
        if conclusion:
            kwargs.update(status="completed", conclusion=conclusion)
        elif status:
            kwargs["status"] = status
        if title is not None or summary is not None:
            kwargs["output"] = {"title": title or run.name, "summary": summary or ""}
        if kwargs:
            self._write(f"update check run {check_run_id}", lambda: run.edit(**kwargs))
        return self._read(f"check run {check_run_id}", lambda: self._check(self._repo().get_check_run(check_run_id)))

    # ------------------------------------------------------------------------------------------
    # Authorization lookups
    # ------------------------------------------------------------------------------------------
    def permission(self, user: str) -> Permission:
        try:
            # role_name holds maintain/triage; the legacy "permission" field folds them into write/read.
            role = self._read(f"permission of {user}", lambda: self._repo().get_collaborator_role_name(user))
        except NotFoundError:
            return Permission.NONE
        try:
            return Permission(role)
        except ValueError:
            # Custom repository roles inherit from a base role we cannot see here: treat as read.
            log.warning("unknown role %r for %s; treating as read", role, user)
            return Permission.READ

    def is_team_member(self, org: str, team_slug: str, user: str) -> bool:
        url = f"/orgs/{org}/teams/{team_slug}/memberships/{user}"
        try:
            _, data = self._read(f"team {org}/{team_slug}", lambda: self.gh.requester.requestJsonAndCheck("GET", url))
        except NotFoundError:
            return False
        return isinstance(data, dict) and data.get("state") == "active"


    def dispatch_workflow(self, workflow: str, ref: str, inputs: Mapping[str, str]) -> None:
        """``workflow_dispatch`` (204). Not deduplicated: a POST retried after a server error may start
        a second run, which only measures the same head again (results and reviews are sticky)."""
        if not isinstance(workflow, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}\.ya?ml", workflow):
            raise ForgeError(f"workflow must be a file name under .github/workflows/, not {workflow!r}")
        wf = self._read(f"workflow {workflow}", lambda: self._repo().get_workflow(workflow))
        self._write(f"dispatch {workflow}", lambda: wf.create_dispatch(ref, {k: str(v) for k, v in inputs.items()}, throw=True))


def _dt(value: Any) -> datetime | None:
    return value if isinstance(value, datetime) else None


def _paged(forge: GitHubForge, what: str, paginated: Any) -> Iterator[Any]:
    """Iterate a PyGithub PaginatedList, translating errors raised while fetching later pages."""
    it = iter(paginated)
    while True:
        try:
            item = next(it)
        except StopIteration:
            return
        except (GithubException, requests.RequestException) as exc:
            raise forge._translate(exc, what) from exc
        yield item
