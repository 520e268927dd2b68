"""An in-memory Forge for the bot's unit tests: commits with full trees, branches, PRs, comments,
reviews, reactions, labels, statuses, permissions. It follows the contract in bot/forge/base.py
(idempotent writes, sha-guarded merge, sticky upserts by the bot only) and records every write so
tests can assert what the bot did and did not do. End-to-end tests use the GitHub fake server."""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import replace
from typing import Iterator

from bot.forge.base import (
    BranchMovedError,
    CheckRun,
    CombinedStatus,
    Comment,
    CommitInfo,
    CommitStatus,
    ForgeInfo,
    HeadMovedError,
    MergeResult,
    NotFoundError,
    NotMergeableError,
    Permission,
    PullRequest,
    Review,
)
from bot.forge.markers import has_marker

BOT = "kbot[bot]"


class MemForge:
    def __init__(self, repo: str = "octo/kernels", bot_login: str = BOT, files: dict[str, str] | None = None):
        self._info = ForgeInfo(kind="github", repo=repo, bot_login=bot_login, supports_check_runs=False)
        self.ids = itertools.count(1000)
        self.commits: dict[str, tuple[str | None, dict[str, bytes], str]] = {}  # sha -> (parent, tree, author)
        self.branches: dict[str, str] = {}
        root = self._commit(None, {k: v.encode() for k, v in (files or {}).items()}, "human", "initial")
        self.branches["main"] = root
        self.prs: dict[int, PullRequest] = {}
        self.pr_base_commit: dict[int, str] = {}
        self.comments: dict[int, list[Comment]] = {}
        self.reviews: dict[int, list[Review]] = {}
        self.reactions: list[tuple[int, str]] = []
        self.pr_labels: dict[int, list[str]] = {}
        self.statuses: dict[str, list[CommitStatus]] = {}
        self.perms: dict[str, Permission] = {}
        self.teams: dict[tuple[str, str], set[str]] = {}
        self.writes: list[tuple] = []
        self.next_number = 1

    # -- helpers for tests ----------------------------------------------------------------------
    def _commit(self, parent: str | None, tree: dict[str, bytes], author: str, message: str) -> str:
        sha = hashlib.sha1(repr((parent, sorted(tree.items()), author, message, len(self.commits))).encode()).hexdigest()
        self.commits[sha] = (parent, dict(tree), author)
        return sha

    def human_push(self, branch: str, files: dict[str, str], message: str = "human edit") -> str:
        head = self.branches[branch]
        tree = dict(self.commits[head][1])
        tree.update({k: v.encode() for k, v in files.items()})
        sha = self._commit(head, tree, "human", message)
        self.branches[branch] = sha
        for n, pr in self.prs.items():
            if pr.head_branch == branch and pr.is_open:
                self.prs[n] = replace(pr, head_sha=sha)
        return sha

    def add_issue(self) -> int:
        n = self.next_number
        self.next_number += 1
        return n

    # -- identity ---------------------------------------------------------------------------------
    @property
    def info(self) -> ForgeInfo:
        return self._info

    def default_branch(self) -> str:
        return "main"

    def branch_head(self, branch: str) -> str | None:
        return self.branches.get(branch)

    def default_head(self) -> tuple[str, str]:
        return "main", self.branches["main"]

    def _resolve(self, ref: str | None) -> str:
        ref = ref or "main"
        if ref in self.branches:
            return self.branches[ref]
        if ref in self.commits:
            return ref
        raise NotFoundError(ref)

    def read_file(self, path: str, ref: str | None = None) -> bytes | None:
        return self.commits[self._resolve(ref)][1].get(path)

    # -- code -------------------------------------------------------------------------------------
    def commit_files(self, branch: str, base_sha: str, files, message: str) -> str:
        if branch in self.branches and self.branches[branch] != base_sha:
            raise BranchMovedError(branch)
        tree = dict(self.commits[base_sha][1])
        for path, content in (files.items() if isinstance(files, dict) else [(f.path, f.content) for f in files]):
            if content is None:
                tree.pop(path, None)
            else:
                tree[path] = content.encode() if isinstance(content, str) else content
        sha = self._commit(base_sha, tree, "bot", message)
        self.branches[branch] = sha
        self.writes.append(("commit", branch, sha))
        for n, pr in self.prs.items():
            if pr.head_branch == branch and pr.is_open:
                self.prs[n] = replace(pr, head_sha=sha)
        return sha

    def _ancestors(self, sha: str) -> list[str]:
        out = []
        while sha is not None:
            out.append(sha)
            sha = self.commits[sha][0]  # type: ignore[assignment]
        return out

    def branch_commits(self, branch: str, base: str | None = None) -> list[CommitInfo]:
        base_set = set(self._ancestors(self._resolve(base or "main")))
        out = []
        for sha in self._ancestors(self._resolve(branch)):
            if sha in base_set:
                break
            author = self.commits[sha][2]
            out.append(CommitInfo(sha, "", (self.commits[sha][0] or "",), author, f"{author}@x", author, f"{author}@x",
                                  author_login=BOT if author == "bot" else author))
        return out

    def branch_touched_by_humans(self, branch: str, base: str | None = None) -> list[CommitInfo]:
        return [c for c in self.branch_commits(branch, base) if c.author_login != BOT]

    def delete_branch(self, branch: str) -> None:
        self.branches.pop(branch, None)

    # -- pull requests ----------------------------------------------------------------------------
    def find_open_pr(self, head_branch: str) -> PullRequest | None:
        return next((p for p in self.prs.values() if p.head_branch == head_branch and p.is_open), None)

    def open_pr(self, head_branch, title, body, *, base=None, labels=(), draft=False) -> PullRequest:
        existing = self.find_open_pr(head_branch)
        if existing:
            return existing
        n = self.add_issue()
        base_sha = self.branches["main"]
        pr = PullRequest(n, title, body, head_branch, self.branches[head_branch], "main", "open", False, BOT,
                         tuple(labels), head_repo=self._info.repo, base_repo=self._info.repo)
        self.prs[n] = pr
        self.pr_base_commit[n] = base_sha
        self.pr_labels[n] = list(labels)
        self.writes.append(("open_pr", n))
        return pr

    def get_pr(self, number: int) -> PullRequest:
        if number not in self.prs:
            raise NotFoundError(f"PR {number}")
        return replace(self.prs[number], labels=tuple(self.pr_labels.get(number, [])))

    def update_pr(self, number, *, title=None, body=None) -> PullRequest:
        pr = self.prs[number]
        self.prs[number] = replace(pr, title=title or pr.title, body=body if body is not None else pr.body)
        return self.prs[number]

    def list_prs(self, *, state="open", label=None, head_prefix=None) -> Iterator[PullRequest]:
        for pr in list(self.prs.values()):
            if state != "all" and pr.state != state:
                continue
            if head_prefix and not pr.head_branch.startswith(head_prefix):
                continue
            yield self.get_pr(pr.number)

    def wait_mergeable(self, number: int, timeout: float = 30.0) -> PullRequest:
        return self.get_pr(number)

    def merge(self, number, sha, *, method="squash", title=None, message=None) -> MergeResult:
        pr = self.prs[number]
        if not pr.is_open:
            raise NotMergeableError("closed")
        if pr.head_sha != sha:
            raise HeadMovedError(f"head is {pr.head_sha}, not {sha}")
        base_tree = self.commits[self.pr_base_commit[number]][1]
        head_tree = self.commits[pr.head_sha][1]
        tree = dict(self.commits[self.branches["main"]][1])
        for path in set(base_tree) | set(head_tree):
            if base_tree.get(path) != head_tree.get(path):
                if path in head_tree:
                    tree[path] = head_tree[path]
                else:
                    tree.pop(path, None)
        new = self._commit(self.branches["main"], tree, "bot", title or pr.title)
        self.branches["main"] = new
        self.prs[number] = replace(pr, state="closed", merged=True, merge_commit_sha=new)
        self.writes.append(("merge", number, sha))
        return MergeResult(new)

    def close_pr(self, number, comment=None) -> PullRequest:
        if comment:
            self.upsert_comment(number, "<!-- kbot:close -->", "<!-- kbot:close -->\n" + comment)
        self.prs[number] = replace(self.prs[number], state="closed")
        self.writes.append(("close", number))
        return self.prs[number]

    # -- labels -----------------------------------------------------------------------------------
    def add_labels(self, number, labels) -> None:
        cur = self.pr_labels.setdefault(number, [])
        for lab in labels:
            if lab not in cur:
                cur.append(lab)
        self.writes.append(("labels+", number, tuple(labels)))

    def remove_label(self, number, label) -> None:
        cur = self.pr_labels.setdefault(number, [])
        if label in cur:
            cur.remove(label)
        self.writes.append(("label-", number, label))

    def labels(self, number) -> list[str]:
        return list(self.pr_labels.get(number, []))

    # -- conversation -----------------------------------------------------------------------------
    def list_comments(self, number) -> Iterator[Comment]:
        yield from list(self.comments.get(number, []))

    def get_comment(self, comment_id) -> Comment:
        for cs in self.comments.values():
            for c in cs:
                if c.id == comment_id:
                    return c
        raise NotFoundError(comment_id)

    def create_comment(self, number, body) -> Comment:
        c = Comment(next(self.ids), body, BOT, True)
        self.comments.setdefault(number, []).append(c)
        self.writes.append(("comment", number, c.id))
        return c

    def add_human_comment(self, number, body, author="alice") -> Comment:
        c = Comment(next(self.ids), body, author, False)
        self.comments.setdefault(number, []).append(c)
        return c

    def upsert_comment(self, number, marker, body) -> Comment:
        assert has_marker(body, marker), "upsert body must contain its marker"
        cs = self.comments.setdefault(number, [])
        for i, c in enumerate(cs):
            if c.author == BOT and has_marker(c.body, marker):
                cs[i] = replace(c, body=body)
                self.writes.append(("edit_comment", number, c.id))
                return cs[i]
        return self.create_comment(number, body)

    def delete_comment(self, comment_id) -> None:
        for cs in self.comments.values():
            cs[:] = [c for c in cs if c.id != comment_id]

    def add_reaction(self, comment_id, reaction) -> None:
        if (comment_id, reaction) not in self.reactions:
            self.reactions.append((comment_id, reaction))

    def upsert_review(self, number, marker, body, commit_sha=None) -> Review:
        assert has_marker(body, marker)
        rs = self.reviews.setdefault(number, [])
        for i, r in enumerate(rs):
            if r.author == BOT and has_marker(r.body, marker):
                rs[i] = replace(r, body=body, commit_sha=commit_sha or r.commit_sha)
                self.writes.append(("edit_review", number, r.id))
                return rs[i]
        r = Review(next(self.ids), body, BOT, "COMMENTED", commit_sha)
        rs.append(r)
        self.writes.append(("review", number, r.id))
        return r

    def list_reviews(self, number) -> Iterator[Review]:
        yield from list(self.reviews.get(number, []))

    # -- statuses ---------------------------------------------------------------------------------
    def set_status(self, sha, state, *, context="kbot/harness", description="", target_url=None) -> CommitStatus:
        s = CommitStatus(context, state, description, target_url)
        self.statuses.setdefault(sha, []).append(s)
        return s

    def combined_status(self, ref) -> CombinedStatus:
        latest: dict[str, CommitStatus] = {}
        for s in self.statuses.get(ref, []):
            latest[s.context] = s
        return CombinedStatus(ref, "pending", tuple(latest.values()))

    def create_check_run(self, *a, **k) -> CheckRun:
        from bot.forge.base import UnsupportedError

        raise UnsupportedError("token auth")

    def update_check_run(self, *a, **k) -> CheckRun:
        from bot.forge.base import UnsupportedError

        raise UnsupportedError("token auth")

    # -- permissions ------------------------------------------------------------------------------
    def permission(self, user: str) -> Permission:
        self.writes.append(("permission?", user))
        return self.perms.get(user, Permission.NONE)

    def is_team_member(self, org, team_slug, user) -> bool:
        return user in self.teams.get((org, team_slug), set())
