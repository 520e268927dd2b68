"""A forge on this machine: a real bare git repository plus a JSON store for PRs, reviews and statuses.

This is what ``kbot optimize`` runs on when there is no GitHub. It implements the same ``Forge``
protocol as ``GitHubForge`` and passes the same behaviour tests (``tests/forge/forge_contract.py``,
run in ``tests/local/test_local_forge_contract.py``), so the promotion code (``bot.promotion``), the
review publisher (``bot.review.publish.publish_results``) and the leaderboard run unchanged on it.

* Code lives in a bare repository (``repo.git``): commits are written with git plumbing
  (``hash-object``, a private index, ``write-tree``, ``commit-tree``) and branches move with
  ``update-ref <new> <old>``, git's own compare-and-swap. Nothing is ever checked out, so no working
  tree (the user's or any other) is touched.
* A merge is sha-guarded like GitHub's: it refuses (``HeadMovedError``) when the PR head is not the
  sha that was benchmarked, and writes a real squash commit on the default branch (tree from
  ``git merge-tree --write-tree``; a conflict is ``NotMergeableError``). Re-running a merge that
  already happened at that sha returns the same result, as on GitHub.
* Issues, pull requests (one number sequence, as on GitHub), comments, reviews, labels, statuses,
  permissions and team memberships are one JSON document (``forge.json``), rewritten atomically
  (temp file + fsync + rename) under an exclusive ``flock``, so it survives restarts and two
  processes never interleave writes. Closed and merged PRs are kept forever.
* What people do around the bot has no web UI here: a person commits to the repository directly
  (any author other than the bot's e-mail counts as a person), and ``create_issue``,
  ``create_comment(author=...)``, ``set_permission`` and ``set_team_membership`` stand in for the
  issue form, the comment box and the repository settings.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Literal, get_args

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
    HeadMovedError,
    MergeMethod,
    MergeResult,
    NotFoundError,
    NotMergeableError,
    Permission,
    PullRequest,
    Reaction,
    Review,
    UnsupportedError,
    normalize_files,
)
from bot.forge.markers import has_marker
from bot.names import STATUS_CONTEXT

BOT_LOGIN = "kbot"
BOT_EMAIL = "kbot@localhost"
DEFAULT_BRANCH = "main"
ZERO = "0" * 40
# GitHub refuses longer PR bodies, comments and reviews (422); refusing here too means a text that
# works locally also works on GitHub.
BODY_LIMIT = 65536
REACTIONS = frozenset(get_args(Reaction))
TEAM_STATES = ("active", "pending")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _dt(s: str | None) -> datetime | None:
    return datetime.fromisoformat(s) if s else None


def _check_body(body: str | None, what: str) -> None:
    if body is not None and len(body) > BODY_LIMIT:
        raise ForgeError(f"{what} body is {len(body)} characters; GitHub accepts at most {BODY_LIMIT}")


@dataclass
class _Git:
    git_dir: Path

    def __call__(self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None,
                 check: bool = True) -> subprocess.CompletedProcess:
        # Only our variables: a GIT_WORK_TREE or GIT_INDEX_FILE inherited from a hook must not leak in.
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        full_env.update({"GIT_DIR": str(self.git_dir), "GIT_CONFIG_NOSYSTEM": "1",
                         "GIT_AUTHOR_NAME": BOT_LOGIN, "GIT_AUTHOR_EMAIL": BOT_EMAIL,
                         "GIT_COMMITTER_NAME": BOT_LOGIN, "GIT_COMMITTER_EMAIL": BOT_EMAIL, **(env or {})})
        p = subprocess.run(["git", *args], input=input, env=full_env, capture_output=True)
        if check and p.returncode != 0:
            raise ForgeError(f"git {' '.join(args[:3])}: {p.stderr.decode(errors='replace').strip()[:500]}")
        return p

    def out(self, *args: str, **kw: Any) -> str:
        return self(*args, **kw).stdout.decode().strip()


class LocalForge:
    """``Forge`` over ``<root>/repo.git`` and ``<root>/forge.json`` (see the module docstring)."""

    def __init__(self, root: str | Path, *, bot_login: str = BOT_LOGIN, owner: str | None = None):
        self.root = Path(root).resolve()
        self.git_dir = self.root / "repo.git"
        self.store_path = self.root / "forge.json"
        self.lock_path = self.root / "forge.lock"
        self.bot_login = bot_login
        self.owner = owner or os.environ.get("USER") or "owner"
        self.git = _Git(self.git_dir)
        self.root.mkdir(parents=True, exist_ok=True)
        if not (self.git_dir / "HEAD").exists():
            subprocess.run(["git", "init", "--quiet", "--bare", f"--initial-branch={DEFAULT_BRANCH}", str(self.git_dir)],
                           check=True, capture_output=True)

    # -- the bot's signing key ---------------------------------------------------------------------
    def meta_signing_key(self) -> bytes:
        """This forge's key for the signed meta block (``bot.forge.trusted_meta``), made on first use.

        The local forge is its own host: whoever can write its store can write its pull requests too, so
        a key kept there (``meta.key``, mode 0600) is as trustworthy as the forge itself. It lets the
        local loop prove which heads the bot pushed, like ``KBOT_META_KEY`` on GitHub (which wins
        when it is set)."""
        path = self.root / "meta.key"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_hex(32))
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd) as f:
            key = f.read().strip()
        if len(key) < 32:
            raise ForgeError(f"{path}: not a signing key (remove it to make a new one)")
        return key.encode()

    # -- store -------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """Read-modify-write of the store under an exclusive lock; written back atomically on success."""
        with open(self.lock_path, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                data = self._load()
                yield data
                self._save(data)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _load(self) -> dict[str, Any]:
        data: dict[str, Any] = {"version": 1, "next_id": 1}
        if self.store_path.exists():
            try:
                data = json.loads(self.store_path.read_text())
            except ValueError as e:
                raise ForgeError(f"{self.store_path} is not valid JSON ({e}); it is only written atomically, "
                                 "so it was edited by hand") from None
        # Stores written before issues, permissions and teams existed simply lack those tables.
        for table in ("prs", "issues", "comments", "reviews", "statuses", "permissions", "teams"):
            data.setdefault(table, {})
        return data

    def _save(self, data: dict[str, Any]) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".forge.json-")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.store_path)

    @staticmethod
    def _next_id(data: dict[str, Any]) -> int:
        n = int(data["next_id"])
        data["next_id"] = n + 1
        return n

    @staticmethod
    def _next_number(data: dict[str, Any]) -> int:
        """Issues and PRs share one sequence 1, 2, 3... as on GitHub (the key predates issues)."""
        n = int(data.get("next_pr", 1))
        data["next_pr"] = n + 1
        return n

    # -- identity and repository -------------------------------------------------------------------
    @property
    def info(self) -> ForgeInfo:
        return ForgeInfo(kind="local", repo=str(self.git_dir), bot_login=self.bot_login, supports_check_runs=False)

    def default_branch(self) -> str:
        return DEFAULT_BRANCH

    def _resolve(self, ref: str) -> str | None:
        for cand in (f"refs/heads/{ref}", ref):
            p = self.git("rev-parse", "--verify", "--quiet", f"{cand}^{{commit}}", check=False)
            if p.returncode == 0:
                return p.stdout.decode().strip()
        return None

    def branch_head(self, branch: str) -> str | None:
        p = self.git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False)
        return p.stdout.decode().strip() if p.returncode == 0 else None

    def default_head(self) -> tuple[str, str]:
        head = self.branch_head(DEFAULT_BRANCH)
        if head is None:
            raise NotFoundError(f"{self.git_dir}: the default branch {DEFAULT_BRANCH} does not exist yet")
        return DEFAULT_BRANCH, head

    def read_file(self, path: str, ref: str | None = None) -> bytes | None:
        sha = self._resolve(ref or DEFAULT_BRANCH)
        if sha is None:
            return None
        p = self.git("cat-file", "blob", f"{sha}:{path}", check=False)
        if p.returncode == 0:
            return p.stdout
        if self.git.out("cat-file", "-t", f"{sha}:{path}", check=False) == "tree":
            raise ForgeError(f"{path}@{ref or DEFAULT_BRANCH} is a directory")  # as GitHubForge says
        return None

    def list_files(self, ref: str | None = None, under: str = "") -> list[str]:
        sha = self._resolve(ref or DEFAULT_BRANCH)
        if sha is None:
            return []
        args = ["ls-tree", "-r", "--name-only", sha] + ([under] if under else [])
        return [line for line in self.git.out(*args).splitlines() if line]

    # -- writing code ------------------------------------------------------------------------------
    def _tree_with(self, base_sha: str | None, files: FilesArg) -> str:
        changes = normalize_files(files)  # the same unsafe-path rules as every other forge
        with tempfile.TemporaryDirectory() as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            if base_sha:
                self.git("read-tree", base_sha, env=env)
            # One --index-info batch; mode 0 removes a path (--force-remove wants a work tree, and a
            # bare repository has none).
            lines = []
            for ch in changes:
                if ch.content is None:
                    lines.append(f"0 {ZERO}\t{ch.path}\n")
                    continue
                blob = self.git.out("hash-object", "-w", "--stdin", input=ch.content)
                lines.append(f"{'100755' if ch.executable else '100644'} {blob}\t{ch.path}\n")
            self.git("update-index", "--index-info", input="".join(lines).encode(), env=env)
            return self.git.out("write-tree", env=env)

    def commit_files(self, branch: str, base_sha: str | None, files: FilesArg, message: str,
                     *, author: tuple[str, str] | None = None) -> str:
        """See ``Forge.commit_files``. ``base_sha=None`` writes a root commit on a branch that must not exist.
        ``author`` (name, e-mail): a person's commit (``kbot submit``), authored and committed by them;
        the bot then treats the branch as a person's (it never writes to it)."""
        normalize_files(files)  # refuse bad input before looking at anything
        head = self.branch_head(branch)
        if head is not None and author is not None:
            raise BranchMovedError(f"{branch} exists; a person's submission starts a branch of its own")
        if head is not None:
            # GitHubForge's order: a person's commit is the more useful reason when both apply.
            humans = self.branch_touched_by_humans(branch)
            if humans:
                raise BranchTouchedByHumansError(branch, humans)
            if head != base_sha:
                raise BranchMovedError(f"{branch} is at {head[:12]}, not {str(base_sha)[:12]}")
        if base_sha is not None and self._resolve(base_sha) is None:
            raise NotFoundError(f"no commit {base_sha!r} to build on")
        tree = self._tree_with(base_sha, files)
        parents = ["-p", base_sha] if base_sha else []
        env = None
        if author is not None:
            name, email = author
            if not name or not email or "\n" in name + email or email == BOT_EMAIL:
                raise ForgeError(f"a person's commit needs a name and an e-mail other than the bot's, not {author!r}")
            env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}
        sha = self.git.out("commit-tree", tree, *parents, "-m", message, env=env)
        # Compare-and-swap: the ref moves only if it is still what we read (absent: all zeros).
        p = self.git("update-ref", f"refs/heads/{branch}", sha, head or ZERO, check=False)
        if p.returncode != 0:
            raise BranchMovedError(f"{branch} moved while committing: {p.stderr.decode().strip()[:200]}")
        return sha

    def _commit_info(self, sha: str) -> CommitInfo:
        fmt = "%H%x00%P%x00%an%x00%ae%x00%cn%x00%ce%x00%B"
        parts = self.git.out("show", "-s", f"--format={fmt}", sha).split("\x00", 6)
        return CommitInfo(sha=parts[0], parents=tuple(parts[1].split()), author_name=parts[2], author_email=parts[3],
                          committer_name=parts[4], committer_email=parts[5], message=parts[6],
                          author_login=self.bot_login if parts[3] == BOT_EMAIL else None,
                          committer_login=self.bot_login if parts[5] == BOT_EMAIL else None)

    def branch_commits(self, branch: str, base: str | None = None) -> list[CommitInfo]:
        tip = self._resolve(branch)
        if tip is None:
            raise NotFoundError(f"no branch {branch!r}")
        base_sha = self._resolve(base or DEFAULT_BRANCH)
        if base_sha is None and base is not None:
            raise NotFoundError(f"no branch {base!r} to compare with")
        rng = f"{base_sha}..{tip}" if base_sha else tip
        # --topo-order: children before parents even when commits share a timestamp (same second).
        return [self._commit_info(s) for s in self.git.out("rev-list", "--topo-order", rng).splitlines() if s]

    def changed_files(self, branch: str, base: str | None = None) -> list[str]:
        """Paths changed on ``branch`` since its merge base with ``base`` (default branch if None), like
        GitHubForge's (GitHub's compare ``base...branch``); a rename lists its old and new path."""
        tip = self._resolve(branch)
        if tip is None:
            raise NotFoundError(f"no branch {branch!r}")
        base_sha = self._resolve(base or DEFAULT_BRANCH)
        if base_sha is None:
            raise NotFoundError(f"no branch {base or DEFAULT_BRANCH!r} to compare with")
        fork = self.git.out("merge-base", base_sha, tip, check=False)
        if not fork:
            raise ForgeError(f"{branch} and {base or DEFAULT_BRANCH} share no history")
        out = self.git("diff", "--name-only", "--no-renames", "-z", fork, tip).stdout.decode()
        return sorted(p for p in out.split("\0") if p)

    def branch_touched_by_humans(self, branch: str, base: str | None = None) -> list[CommitInfo]:
        return [c for c in self.branch_commits(branch, base)
                if c.author_email != BOT_EMAIL or c.committer_email != BOT_EMAIL]

    def delete_branch(self, branch: str) -> None:
        """Delete ``branch``; a branch that is already gone is not an error (as with GitHubForge).
        As on GitHub, an open PR whose head branch is deleted is closed (at its last head)."""
        head = self.branch_head(branch)
        if head is None:
            return
        with self._locked() as data:
            p = self.git("update-ref", "-d", f"refs/heads/{branch}", head, check=False)
            if p.returncode != 0 and self.branch_head(branch) is not None:
                raise BranchMovedError(f"{branch} moved while deleting it: {p.stderr.decode().strip()[:200]}")
            for rec in data["prs"].values():
                if rec["head_branch"] == branch and rec["state"] == "open":
                    rec.update(state="closed", head_sha=head, closed_at=_now(), updated_at=_now())

    def update_branch(self, number: int, expected_head: str | None = None) -> str:
        """Merge the default branch into the PR head (GitHub's "Update branch", with its
        ``expected_head_sha``): one bot merge commit. Returns the new head sha (unchanged when already
        up to date); ``BranchMovedError`` when the head is not ``expected_head``."""
        pr = self.get_pr(number)
        if expected_head is not None and pr.head_sha != expected_head:
            raise BranchMovedError(f"{pr.head_branch} is at {pr.head_sha[:12]}, not {expected_head[:12]}")
        main = self.branch_head(DEFAULT_BRANCH)
        if main is None or not self.branch_commits(DEFAULT_BRANCH, base=pr.head_branch):
            return pr.head_sha
        tree = self._merge_tree(pr.head_sha, main)
        sha = self.git.out("commit-tree", tree, "-p", pr.head_sha, "-p", main,
                           "-m", f"Merge {DEFAULT_BRANCH} into {pr.head_branch}")
        p = self.git("update-ref", f"refs/heads/{pr.head_branch}", sha, pr.head_sha, check=False)
        if p.returncode != 0:
            raise BranchMovedError(f"{pr.head_branch} moved while updating")
        return sha

    def _merge_tree(self, ours: str, theirs: str) -> str:
        p = self.git("merge-tree", "--write-tree", ours, theirs, check=False)
        if p.returncode != 0:
            raise NotMergeableError(f"{ours[:12]} and {theirs[:12]} conflict")
        return p.stdout.decode().split("\n", 1)[0].strip()

    def _mergeable(self, base_branch: str, head: str) -> bool:
        """What GitHub's ``mergeable`` says: the head merges into the base without conflicts."""
        base = self.branch_head(base_branch)
        if base is None:
            return False
        return self.git("merge-tree", "--write-tree", base, head, check=False).returncode == 0

    def _replay(self, onto: str, commits: list[CommitInfo]) -> str:
        """Rebase-merge: re-create ``commits`` (oldest first) on ``onto``, authors and messages kept.

        git 2.39's ``merge-tree`` has no ``--merge-base``, so each cherry-pick is a three-way merge of
        throwaway commits that share a root holding the picked commit's parent tree.
        """
        tip = onto
        for c in commits:
            if len(c.parents) != 1:
                raise NotMergeableError(f"{c.sha[:12]} is a merge commit; a rebase merge cannot replay it "
                                        "(use squash or merge)")
            root = self.git.out("commit-tree", f"{c.parents[0]}^{{tree}}", "-m", "base")
            ours = self.git.out("commit-tree", f"{tip}^{{tree}}", "-p", root, "-m", "ours")
            theirs = self.git.out("commit-tree", f"{c.sha}^{{tree}}", "-p", root, "-m", "theirs")
            tree = self._merge_tree(ours, theirs)
            date = self.git.out("show", "-s", "--format=%aI", c.sha)
            env = {"GIT_AUTHOR_NAME": c.author_name, "GIT_AUTHOR_EMAIL": c.author_email, "GIT_AUTHOR_DATE": date}
            tip = self.git.out("commit-tree", tree, "-p", tip, env=env, input=c.message.encode())
        return tip

    # -- pull requests -----------------------------------------------------------------------------
    def _pr(self, rec: dict[str, Any], full: bool = False) -> PullRequest:
        """``full``: also compute ``mergeable`` (GitHub only reports it when one PR is fetched)."""
        is_open = rec["state"] == "open"
        head = (self.branch_head(rec["head_branch"]) or rec["head_sha"]) if is_open else rec["head_sha"]
        return PullRequest(
            number=rec["number"], title=rec["title"], body=rec["body"], head_branch=rec["head_branch"],
            head_sha=head, base_branch=rec["base_branch"], state=rec["state"], merged=rec["merged"],
            author=rec["author"], labels=tuple(rec.get("labels", [])), url=f"local:{self.root}#pr-{rec['number']}",
            merge_commit_sha=rec.get("merge_commit_sha"),
            mergeable=self._mergeable(rec["base_branch"], head) if full and is_open else None,
            head_repo=str(self.git_dir), base_repo=str(self.git_dir))

    @staticmethod
    def _get(data: dict[str, Any], number: int) -> dict[str, Any]:
        """The pull request ``number`` (an issue's number is not a pull request)."""
        rec = data["prs"].get(str(number))
        if rec is None:
            raise NotFoundError(f"no pull request #{number}")
        return rec

    @staticmethod
    def _get_item(data: dict[str, Any], number: int) -> dict[str, Any]:
        """The issue or pull request ``number`` (labels and comments work on both, as on GitHub)."""
        rec = data["prs"].get(str(number)) or data["issues"].get(str(number))
        if rec is None:
            raise NotFoundError(f"no issue or pull request #{number}")
        return rec

    def find_open_pr(self, head_branch: str) -> PullRequest | None:
        for rec in self._load()["prs"].values():
            if rec["head_branch"] == head_branch and rec["state"] == "open":
                return self._pr(rec)
        return None

    def open_pr(self, head_branch: str, title: str, body: str, *, base: str | None = None,
                labels: tuple[str, ...] | list[str] = (), draft: bool = False, author: str | None = None) -> PullRequest:
        """``author``: a person opening the PR (``kbot submit``); the bot otherwise."""
        _check_body(body, "PR")
        base = base or DEFAULT_BRANCH
        with self._locked() as data:
            for rec in data["prs"].values():
                if rec["head_branch"] == head_branch and rec["state"] == "open":
                    return self._pr(rec, full=True)  # idempotent: the open PR of this branch
            # GitHub's validation (422): a title, both branches, and something to merge.
            if not title:
                raise ForgeError("a pull request needs a title")
            head = self.branch_head(head_branch)
            if head is None:
                raise NotFoundError(f"no branch {head_branch!r} to open a pull request from")
            base_sha = self.branch_head(base)
            if base_sha is None:
                raise NotFoundError(f"no base branch {base!r} to open a pull request against")
            if self.git("merge-base", "--is-ancestor", head, base_sha, check=False).returncode == 0:
                raise ForgeError(f"No commits between {base} and {head_branch}")
            n = self._next_number(data)
            rec = {"number": n, "title": title, "body": body, "head_branch": head_branch, "head_sha": head,
                   "base_branch": base, "state": "open", "merged": False, "author": author or self.bot_login,
                   "labels": sorted(set(labels)), "created_at": _now(), "updated_at": _now(), "draft": draft,
                   "merge_commit_sha": None, "closed_at": None}
            data["prs"][str(n)] = rec
        return self._pr(rec, full=True)

    def get_pr(self, number: int) -> PullRequest:
        return self._pr(self._get(self._load(), number), full=True)

    def update_pr(self, number: int, *, title: str | None = None, body: str | None = None) -> PullRequest:
        _check_body(body, "PR")
        if title == "":
            raise ForgeError("a pull request needs a title")
        with self._locked() as data:
            rec = self._get(data, number)
            if title is not None:
                rec["title"] = title
            if body is not None:
                rec["body"] = body
            rec["updated_at"] = _now()
        return self._pr(rec, full=True)

    def list_prs(self, *, state: Literal["open", "closed", "all"] = "open", label: str | None = None,
                 head_prefix: str | None = None) -> Iterator[PullRequest]:
        if state not in ("open", "closed", "all"):
            raise ForgeError(f"state must be open, closed or all, not {state!r}")
        recs = sorted(self._load()["prs"].values(), key=lambda r: r["number"])
        for rec in recs:
            if state != "all" and rec["state"] != state:
                continue
            if label is not None and label not in rec.get("labels", []):
                continue
            if head_prefix is not None and not rec["head_branch"].startswith(head_prefix):
                continue
            yield self._pr(rec)

    def wait_mergeable(self, number: int, timeout: float = 30.0) -> PullRequest:
        return self.get_pr(number)  # computed on every read: never "still being computed"

    def merge(self, number: int, sha: str, *, method: MergeMethod = "squash", title: str | None = None,
              message: str | None = None) -> MergeResult:
        if method not in ("squash", "merge", "rebase"):
            raise ForgeError(f"merge method must be squash, merge or rebase, not {method!r}")
        with self._locked() as data:
            rec = self._get(data, number)
            if rec["merged"]:
                # GitHub: a retried merge of the same sha finds it done; another sha cannot merge now.
                if rec["head_sha"] == sha and rec.get("merge_commit_sha"):
                    return MergeResult(sha=rec["merge_commit_sha"], merged=True, message="already merged")
                raise NotMergeableError(f"#{number} was already merged at {rec['head_sha'][:12]}, not {sha[:12]}")
            if rec["state"] != "open":
                raise NotMergeableError(f"#{number} is closed")
            head = self.branch_head(rec["head_branch"])
            if head != sha:
                raise HeadMovedError(f"#{number} head is {str(head)[:12]}, not the benchmarked {sha[:12]}")
            base = self.branch_head(rec["base_branch"])
            if base is None:
                raise NotMergeableError(f"base branch {rec['base_branch']} does not exist")
            if method == "rebase":
                commits = list(reversed(self.branch_commits(rec["head_branch"], base=rec["base_branch"])))
                new = self._replay(base, commits)
            else:
                tree = self._merge_tree(base, sha)
                if method == "squash":
                    default_title, parents = f"{rec['title']} (#{number})", ["-p", base]
                else:
                    default_title = f"Merge pull request #{number} from {rec['head_branch']}"
                    parents = ["-p", base, "-p", sha]
                msg = (title or default_title) + ("\n\n" + message if message else "")
                new = self.git.out("commit-tree", tree, *parents, "-m", msg)
            p = self.git("update-ref", f"refs/heads/{rec['base_branch']}", new, base, check=False)
            if p.returncode != 0:
                raise NotMergeableError(f"{rec['base_branch']} moved during the merge; retry")
            rec.update(state="closed", merged=True, merge_commit_sha=new, head_sha=sha, closed_at=_now(), updated_at=_now())
        return MergeResult(sha=new, merged=True, message="merged")

    def close_pr(self, number: int, comment: str | None = None) -> PullRequest:
        """Close without merging. ``comment`` is posted first unless the bot already posted that exact
        text on this PR (retries, or a second close); people's comments are never considered."""
        _check_body(comment, "comment")
        with self._locked() as data:
            rec = self._get(data, number)
            if comment and not any(c["number"] == number and c["author"] == self.bot_login and c["body"] == comment
                                   for c in data["comments"].values()):
                self._add_comment(data, number, comment, self.bot_login)
            if rec["state"] == "open":
                rec.update(state="closed", head_sha=self.branch_head(rec["head_branch"]) or rec["head_sha"],
                           closed_at=_now(), updated_at=_now())
        return self._pr(rec)

    # -- issues (what a person opens to post commands on) -----------------------------------------
    def create_issue(self, title: str, body: str = "", *, author: str | None = None) -> int:
        """Open an issue (numbered in the same sequence as PRs); returns its number."""
        _check_body(body, "issue")
        if not title:
            raise ForgeError("an issue needs a title")
        with self._locked() as data:
            n = self._next_number(data)
            data["issues"][str(n)] = {"number": n, "title": title, "body": body, "author": author or self.owner,
                                      "state": "open", "labels": [], "created_at": _now(), "updated_at": _now()}
        return n

    # -- labels ------------------------------------------------------------------------------------
    def add_labels(self, number: int, labels: list[str] | tuple[str, ...]) -> None:
        with self._locked() as data:
            rec = self._get_item(data, number)
            rec["labels"] = sorted(set(rec.get("labels", [])) | set(labels))

    def remove_label(self, number: int, label: str) -> None:
        with self._locked() as data:
            rec = self._get_item(data, number)
            rec["labels"] = [x for x in rec.get("labels", []) if x != label]

    def labels(self, number: int) -> list[str]:
        return list(self._get_item(self._load(), number).get("labels", []))

    # -- conversation ------------------------------------------------------------------------------
    def _comment(self, c: dict[str, Any]) -> Comment:
        return Comment(id=c["id"], body=c["body"], author=c["author"], author_is_bot=c["author"] == self.bot_login,
                       created_at=_dt(c.get("created_at")), updated_at=_dt(c.get("updated_at")))

    def _add_comment(self, data: dict[str, Any], number: int, body: str, author: str) -> dict[str, Any]:
        self._get_item(data, number)
        cid = self._next_id(data)
        c = {"id": cid, "number": number, "body": body, "author": author,
             "created_at": _now(), "updated_at": _now(), "reactions": []}
        data["comments"][str(cid)] = c
        return c

    def list_comments(self, number: int) -> Iterator[Comment]:
        data = self._load()
        self._get_item(data, number)
        for c in sorted(data["comments"].values(), key=lambda c: c["id"]):
            if c["number"] == number:
                yield self._comment(c)

    def get_comment(self, comment_id: int) -> Comment:
        c = self._load()["comments"].get(str(comment_id))
        if c is None:
            raise NotFoundError(f"no comment {comment_id}")
        return self._comment(c)

    def create_comment(self, number: int, body: str, *, author: str | None = None) -> Comment:
        """``author`` lets tests and local users post as someone other than the bot."""
        _check_body(body, "comment")
        with self._locked() as data:
            c = self._add_comment(data, number, body, author or self.bot_login)
        return self._comment(c)

    def upsert_comment(self, number: int, marker: str, body: str) -> Comment:
        _check_body(body, "comment")
        if not has_marker(body, marker):
            raise ForgeError(f"a sticky comment body must contain its marker {marker!r} on a line of its own")
        with self._locked() as data:
            self._get_item(data, number)
            mine = [c for c in data["comments"].values()
                    if c["number"] == number and c["author"] == self.bot_login and has_marker(c["body"], marker)]
            if mine:
                c = max(mine, key=lambda c: c["id"])
                if c["body"] != body:  # an unchanged body is not an edit (GitHubForge skips it too)
                    c.update(body=body, updated_at=_now())
            else:
                c = self._add_comment(data, number, body, self.bot_login)
        return self._comment(c)

    def delete_comment(self, comment_id: int) -> None:
        """Delete a comment; one that is already gone is not an error (a retried delete)."""
        with self._locked() as data:
            data["comments"].pop(str(comment_id), None)

    def add_reaction(self, comment_id: int, reaction: str) -> None:
        if reaction not in REACTIONS:
            raise ForgeError(f"reaction must be one of {', '.join(sorted(REACTIONS))}, not {reaction!r}")
        with self._locked() as data:
            c = data["comments"].get(str(comment_id))
            if c is None:
                raise NotFoundError(f"no comment {comment_id}")
            if reaction not in c["reactions"]:
                c["reactions"].append(reaction)

    def _review(self, r: dict[str, Any]) -> Review:
        return Review(id=r["id"], body=r["body"], author=r["author"], state=r["state"], commit_sha=r.get("commit_sha"))

    def upsert_review(self, number: int, marker: str, body: str, commit_sha: str | None = None) -> Review:
        _check_body(body, "review")
        if not has_marker(body, marker):
            raise ForgeError(f"a sticky review body must contain its marker {marker!r} on a line of its own")
        with self._locked() as data:
            rec = self._get(data, number)
            mine = [r for r in data["reviews"].values()
                    if r["number"] == number and r["author"] == self.bot_login and has_marker(r["body"], marker)]
            if mine:
                # GitHub edits only a review's body: the commit it was made on stays what it was.
                r = max(mine, key=lambda r: r["id"])
                if r["body"] != body:
                    r.update(body=body, updated_at=_now(), edits=r.get("edits", 0) + 1)
            else:
                sha = commit_sha or self.branch_head(rec["head_branch"]) or rec["head_sha"]
                if self._resolve(sha) is None:
                    raise NotFoundError(f"no commit {sha!r} to review")
                rid = self._next_id(data)
                r = {"id": rid, "number": number, "body": body, "author": self.bot_login, "state": "COMMENTED",
                     "commit_sha": sha, "created_at": _now(), "updated_at": _now(), "edits": 0}
                data["reviews"][str(rid)] = r
        return self._review(r)

    def list_reviews(self, number: int) -> Iterator[Review]:
        data = self._load()
        self._get(data, number)
        for r in sorted(data["reviews"].values(), key=lambda r: r["id"]):
            if r["number"] == number:
                yield self._review(r)

    # -- statuses and checks -----------------------------------------------------------------------
    def set_status(self, sha: str, state: str, *, context: str = STATUS_CONTEXT,
                   description: str = "", target_url: str | None = None) -> CommitStatus:
        if state not in ("pending", "success", "failure", "error"):
            raise ForgeError(f"status state must be pending, success, failure or error, not {state!r}")
        commit = self._resolve(sha)
        if commit is None:  # GitHub: 422 "No commit found for SHA"
            raise ForgeError(f"no commit found for {sha!r}")
        with self._locked() as data:
            data["statuses"].setdefault(commit, {})[context] = {
                "state": state, "description": description[:140], "target_url": target_url, "updated_at": _now()}
        return CommitStatus(context, state, description[:140], target_url)  # type: ignore[arg-type]

    def combined_status(self, ref: str) -> CombinedStatus:
        sha = self._resolve(ref)
        if sha is None:
            raise NotFoundError(f"no commit or branch {ref!r}")
        entries = self._load()["statuses"].get(sha, {})
        sts = tuple(CommitStatus(ctx, e["state"], e["description"], e.get("target_url")) for ctx, e in sorted(entries.items()))
        states = {s.state for s in sts}
        # GitHub's rule: any failure or error fails; nothing reported or anything pending is pending.
        state = ("failure" if states & {"failure", "error"} else
                 "pending" if not sts or "pending" in states else "success")
        return CombinedStatus(sha, state, sts)  # type: ignore[arg-type]

    def create_check_run(self, sha: str, name: str, **kw: Any) -> CheckRun:
        raise UnsupportedError("the local forge reports commit statuses, not check runs")

    def update_check_run(self, check_run_id: int, **kw: Any) -> CheckRun:
        raise UnsupportedError("the local forge reports commit statuses, not check runs")

    # -- who may command the bot -------------------------------------------------------------------
    def set_permission(self, user: str, permission: Permission | str) -> None:
        """The repository role of ``user`` (``none`` removes it). The owner and the bot are always admin."""
        try:
            role = Permission(permission)
        except ValueError:
            raise ForgeError(f"permission must be one of {', '.join(p.value for p in Permission)}, "
                             f"not {permission!r}") from None
        with self._locked() as data:
            if role == Permission.NONE:
                data["permissions"].pop(user, None)
            else:
                data["permissions"][user] = role.value

    def set_team_membership(self, org: str, team_slug: str, user: str, state: str | None = "active") -> None:
        """``active``, ``pending`` (invited, not yet a member) or ``None`` (removed)."""
        if state is not None and state not in TEAM_STATES:
            raise ForgeError(f"team membership state must be active, pending or None, not {state!r}")
        with self._locked() as data:
            team = data["teams"].setdefault(f"{org}/{team_slug}", {})
            if state is None:
                team.pop(user, None)
            else:
                team[user] = state

    def permission(self, user: str) -> Permission:
        if user in (self.owner, self.bot_login):
            return Permission.ADMIN
        return Permission(self._load()["permissions"].get(user, Permission.NONE.value))

    def is_team_member(self, org: str, team_slug: str, user: str) -> bool:
        return self._load()["teams"].get(f"{org}/{team_slug}", {}).get(user) == "active"

    def dispatch_workflow(self, workflow: str, ref: str, inputs: Any) -> None:
        raise UnsupportedError("the local forge runs no workflows: `kbot submit` evaluates a person's kernel on this machine")

    # -- what a person does (no web UI here) -------------------------------------------------------
    def approve(self, number: int, sha: str, by: str, body: str = "Approved.") -> Review:
        """An approving review of ``sha`` by ``by`` (a person: the bot's own reviews never approve)."""
        if by == self.bot_login:
            raise ForgeError("the bot does not approve pull requests")
        if self._resolve(sha) is None:
            raise NotFoundError(f"no commit {sha!r} to approve")
        with self._locked() as data:
            rec = self._get(data, number)
            if rec["author"] == by:
                raise ForgeError("Can not approve your own pull request")
            rid = self._next_id(data)
            r = {"id": rid, "number": number, "body": body, "author": by, "state": "APPROVED",
                 "commit_sha": sha, "created_at": _now(), "updated_at": _now(), "edits": 0}
            data["reviews"][str(rid)] = r
        return self._review(r)
