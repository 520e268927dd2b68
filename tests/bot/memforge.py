"""An in-memory Forge for the bot's unit tests: commits with full trees, branches, PRs, comments,
reviews, reactions, labels, statuses, permissions. It follows the contract in bot/forge/base.py and
passes the same behaviour tests as GitHubForge (tests/forge/forge_contract.py, run against it in
test_memforge_contract.py): safe paths only, no bot commit on top of a person's, sha-guarded and
re-runnable merges, sticky upserts by the bot only. It records every write so tests can assert what
the bot did and did not do. End-to-end tests use the GitHub fake server.

One simplification against GitHub: a merge is a per-file three-way merge, so two sides changing the
same file differently is a conflict even where git would merge the lines cleanly."""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, replace
from typing import Iterator

from bot.forge.base import (
    BranchMovedError,
    BranchTouchedByHumansError,
    CheckRun,
    CombinedStatus,
    Comment,
    CommitInfo,
    CommitStatus,
    ForgeError,
    ForgeInfo,
    HeadMovedError,
    MergeResult,
    NotFoundError,
    NotMergeableError,
    Permission,
    PullRequest,
    Review,
    UnsupportedError,
    normalize_files,
)
from bot.forge.markers import has_marker

BOT = "kbot[bot]"


@dataclass(frozen=True)
class MemCommit:
    parent: str | None
    tree: dict[str, bytes]
    author: str                         # a login: the bot's, or a person's
    message: str


class MemForge:
    def __init__(self, repo: str = "octo/kernels", bot_login: str = BOT, files: dict[str, str] | None = None):
        self._info = ForgeInfo(kind="github", repo=repo, bot_login=bot_login, supports_check_runs=False)
        self.ids = itertools.count(1000)
        self.commits: dict[str, MemCommit] = {}
        self.branches: dict[str, str] = {}
        root = self._commit(None, {k: v.encode() for k, v in (files or {}).items()}, "human", "initial")
        self.branches["main"] = root
        self.prs: dict[int, PullRequest] = {}
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
        self.commits[sha] = MemCommit(parent, dict(tree), author, message)
        return sha

    def _advance(self, branch: str, sha: str) -> None:
        """Move ``branch`` to ``sha``; open PRs from it follow, as on GitHub."""
        self.branches[branch] = sha
        for n, pr in self.prs.items():
            if pr.head_branch == branch and pr.is_open:
                self.prs[n] = replace(pr, head_sha=sha)

    def human_push(self, branch: str, files: dict[str, str | bytes | None], message: str = "human edit", *,
                   author: str = "human") -> str:
        """A person's commit on ``branch`` (created from main if absent), around the bot; None deletes."""
        head = self.branches.get(branch, self.branches["main"])
        tree = dict(self.commits[head].tree)
        for fc in normalize_files(dict(files)):
            if fc.content is None:
                tree.pop(fc.path, None)
            else:
                tree[fc.path] = fc.content
        sha = self._commit(head, tree, author, message)
        self._advance(branch, sha)
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
        return self.commits[self._resolve(ref)].tree.get(path)

    # -- code -------------------------------------------------------------------------------------
    def commit_files(self, branch: str, base_sha: str, files, message: str) -> str:
        changes = normalize_files(files)  # before anything else: an unsafe path writes nothing
        if base_sha not in self.commits:
            raise NotFoundError(f"no commit {base_sha!r}")
        head = self.branches.get(branch)
        if head is not None:
            if head != base_sha:
                raise BranchMovedError(f"{branch} is at {head[:12]}, not {base_sha[:12]}")
            humans = self.branch_touched_by_humans(branch)
            if humans:
                raise BranchTouchedByHumansError(branch, humans)
        tree = dict(self.commits[base_sha].tree)
        for fc in changes:
            if fc.content is None:
                tree.pop(fc.path, None)
            else:
                tree[fc.path] = fc.content
        sha = self._commit(base_sha, tree, self._info.bot_login, message)
        self._advance(branch, sha)
        self.writes.append(("commit", branch, sha))
        return sha

    def _ancestors(self, sha: str | None) -> list[str]:
        out = []
        while sha is not None:
            out.append(sha)
            sha = self.commits[sha].parent
        return out

    def branch_commits(self, branch: str, base: str | None = None) -> list[CommitInfo]:
        base_set = set(self._ancestors(self._resolve(base or "main")))
        out = []
        for sha in self._ancestors(self._resolve(branch)):
            if sha in base_set:
                break
            c = self.commits[sha]
            email = f"{c.author}@users.noreply.invalid"
            out.append(CommitInfo(sha, c.message, (c.parent,) if c.parent else (), c.author, email, c.author, email,
                                  author_login=c.author, committer_login=c.author))
        return out

    def branch_touched_by_humans(self, branch: str, base: str | None = None) -> list[CommitInfo]:
        bot = self._info.bot_login
        return [c for c in self.branch_commits(branch, base) if c.author_login != bot or c.committer_login != bot]

    def changed_files(self, branch: str, base: str | None = None) -> list[str]:
        """Paths whose content differs between the merge base with ``base`` and ``branch`` (GitHub's compare)."""
        head = self._resolve(branch)
        fork = self._merge_base(head, self._resolve(base or "main"))
        old = self.commits[fork].tree if fork else {}
        new = self.commits[head].tree
        return sorted(p for p in set(old) | set(new) if old.get(p) != new.get(p))

    def delete_branch(self, branch: str) -> None:
        self.branches.pop(branch, None)

    # -- pull requests ----------------------------------------------------------------------------
    def find_open_pr(self, head_branch: str) -> PullRequest | None:
        return next((p for p in self.prs.values() if p.head_branch == head_branch and p.is_open), None)

    def open_pr(self, head_branch, title, body, *, base=None, labels=(), draft=False) -> PullRequest:
        existing = self.find_open_pr(head_branch)
        if existing:
            return existing
        base = base or "main"
        for name in (head_branch, base):
            if name not in self.branches:
                raise NotFoundError(f"no branch {name!r}")
        n = self.add_issue()
        pr = PullRequest(n, title, body, head_branch, self.branches[head_branch], base, "open", False,
                         self._info.bot_login, tuple(labels), head_repo=self._info.repo, base_repo=self._info.repo)
        self.prs[n] = pr
        self.pr_labels[n] = list(labels)
        self.writes.append(("open_pr", n))
        return self.get_pr(n)

    def _pr(self, number: int) -> PullRequest:
        if number not in self.prs:
            raise NotFoundError(f"PR {number}")
        return self.prs[number]

    def get_pr(self, number: int) -> PullRequest:
        pr = self._pr(number)
        mergeable = None
        if pr.is_open:
            _, conflicts = self._squash_tree(pr)
            mergeable = not conflicts
        return replace(pr, labels=tuple(self.pr_labels.get(number, [])), mergeable=mergeable)

    def update_pr(self, number, *, title=None, body=None) -> PullRequest:
        pr = self._pr(number)
        self.prs[number] = replace(pr, title=title or pr.title, body=body if body is not None else pr.body)
        return self.get_pr(number)

    def list_prs(self, *, state="open", label=None, head_prefix=None) -> Iterator[PullRequest]:
        for pr in list(self.prs.values()):
            if state != "all" and pr.state != state:
                continue
            if label is not None and label not in self.pr_labels.get(pr.number, []):
                continue
            if head_prefix and not pr.head_branch.startswith(head_prefix):
                continue
            yield self.get_pr(pr.number)

    def wait_mergeable(self, number: int, timeout: float = 30.0) -> PullRequest:
        return self.get_pr(number)  # computed on every read: never "still being computed"

    def _merge_base(self, a: str, b: str) -> str | None:
        in_b = set(self._ancestors(b))
        return next((sha for sha in self._ancestors(a) if sha in in_b), None)

    def _squash_tree(self, pr: PullRequest) -> tuple[dict[str, bytes], list[str]]:
        """The base branch's tree with the PR's changes applied, and the paths that conflict."""
        base_head = self.branches.get(pr.base_branch)
        if base_head is None:
            return {}, [f"(base branch {pr.base_branch} is gone)"]
        fork = self._merge_base(pr.head_sha, base_head)
        if fork is None:
            return {}, ["(no common history)"]
        old, ours, theirs = self.commits[fork].tree, self.commits[pr.head_sha].tree, self.commits[base_head].tree
        tree, conflicts = dict(theirs), []
        for path in set(old) | set(ours):
            if old.get(path) == ours.get(path):
                continue  # the PR did not touch it
            if theirs.get(path) not in (old.get(path), ours.get(path)):
                conflicts.append(path)  # the base changed it too, differently
            elif path in ours:
                tree[path] = ours[path]
            else:
                tree.pop(path, None)
        return tree, sorted(conflicts)

    def merge(self, number, sha, *, method="squash", title=None, message=None) -> MergeResult:
        if method not in ("squash", "merge", "rebase"):
            raise ForgeError(f"merge method must be squash, merge or rebase, not {method!r}")
        pr = self._pr(number)
        if pr.merged:
            # GitHub: a retried merge of the same sha finds it done; a different sha cannot merge now.
            if pr.head_sha == sha and pr.merge_commit_sha:
                return MergeResult(pr.merge_commit_sha, True, "already merged")
            raise NotMergeableError(f"PR #{number} was already merged at {pr.head_sha[:12]}, not {sha[:12]}")
        if not pr.is_open:
            raise NotMergeableError(f"PR #{number} is closed")
        if pr.head_sha != sha:
            raise HeadMovedError(f"PR #{number} head is {pr.head_sha[:12]}, not the benchmarked {sha[:12]}")
        tree, conflicts = self._squash_tree(pr)
        if conflicts:
            raise NotMergeableError(f"PR #{number} conflicts with {pr.base_branch}: {', '.join(conflicts)}")
        msg = (title or f"{pr.title} (#{number})") + (f"\n\n{message}" if message else "")
        new = self._commit(self.branches[pr.base_branch], tree, self._info.bot_login, msg)
        self.branches[pr.base_branch] = new
        self.prs[number] = replace(pr, state="closed", merged=True, merge_commit_sha=new)
        self.writes.append(("merge", number, sha))
        return MergeResult(new, True, "merged")

    def close_pr(self, number, comment=None) -> PullRequest:
        if not self._pr(number).is_open:
            return self.get_pr(number)  # closing twice: nothing more is posted or written
        if comment:
            self.upsert_comment(number, "<!-- kbot:close -->", "<!-- kbot:close -->\n" + comment)
        self.prs[number] = replace(self.prs[number], state="closed")
        self.writes.append(("close", number))
        return self.get_pr(number)

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
        c = Comment(next(self.ids), body, self._info.bot_login, True)
        self.comments.setdefault(number, []).append(c)
        self.writes.append(("comment", number, c.id))
        return c

    def add_human_comment(self, number, body, author="alice") -> Comment:
        c = Comment(next(self.ids), body, author, False)
        self.comments.setdefault(number, []).append(c)
        return c

    def upsert_comment(self, number, marker, body) -> Comment:
        if not has_marker(body, marker):
            raise ForgeError(f"a sticky comment body must contain its marker {marker!r}")
        cs = self.comments.setdefault(number, [])
        for i, c in enumerate(cs):
            if c.author == self._info.bot_login and has_marker(c.body, marker):
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
        if not has_marker(body, marker):
            raise ForgeError(f"a sticky review body must contain its marker {marker!r}")
        rs = self.reviews.setdefault(number, [])
        for i, r in enumerate(rs):
            if r.author == self._info.bot_login and has_marker(r.body, marker):
                rs[i] = replace(r, body=body, commit_sha=commit_sha or r.commit_sha)
                self.writes.append(("edit_review", number, r.id))
                return rs[i]
        r = Review(next(self.ids), body, self._info.bot_login, "COMMENTED", commit_sha)
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
        sha = self._resolve(ref) if (ref in self.branches or ref in self.commits) else ref
        latest: dict[str, CommitStatus] = {}
        for s in self.statuses.get(sha, []):
            latest[s.context] = s  # the newest status of each context counts
        states = {s.state for s in latest.values()}
        # GitHub's rule: any failure or error fails; nothing reported or anything pending is pending.
        state = ("failure" if states & {"failure", "error"} else
                 "pending" if not states or "pending" in states else "success")
        return CombinedStatus(sha, state, tuple(latest.values()))

    def create_check_run(self, *a, **k) -> CheckRun:
        raise UnsupportedError("check runs need App auth; this forge stands for token auth")

    def update_check_run(self, *a, **k) -> CheckRun:
        raise UnsupportedError("check runs need App auth; this forge stands for token auth")

    # -- permissions ------------------------------------------------------------------------------
    def permission(self, user: str) -> Permission:
        self.writes.append(("permission?", user))
        return self.perms.get(user, Permission.NONE)

    def is_team_member(self, org, team_slug, user) -> bool:
        return user in self.teams.get((org, team_slug), set())

    def update_branch(self, number: int, expected_head: str | None = None) -> str:
        # Commits here have one parent: no merge commit. The fake GitHub and the local forge have it.
        raise UnsupportedError("the in-memory forge cannot merge the default branch into a PR head")

    # -- workflows --------------------------------------------------------------------------------
    def dispatch_workflow(self, workflow, ref, inputs) -> None:
        self.writes.append(("dispatch", workflow, ref, dict(inputs)))
