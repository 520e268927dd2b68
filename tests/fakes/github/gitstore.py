"""A bare git repository driven with plumbing commands: the object store behind the fake GitHub.

Blobs, trees, commits and refs created through the REST API are real git objects, so a merge is a
real squash commit and tests can ``git clone`` the result.
"""

from __future__ import annotations

import os
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path


class GitError(Exception):
    pass


@dataclass(frozen=True)
class Person:
    name: str
    email: str
    date: str  # ISO 8601 with timezone, e.g. 2026-01-01T00:00:00Z

    def git_date(self) -> str:
        from datetime import datetime

        return str(int(datetime.fromisoformat(self.date.replace("Z", "+00:00")).timestamp())) + " +0000"


@dataclass(frozen=True)
class CommitObject:
    sha: str
    tree: str
    parents: tuple[str, ...]
    author: Person
    committer: Person
    message: str


@dataclass(frozen=True)
class TreeEntry:
    mode: str   # 100644, 100755, 040000, 160000, 120000
    type: str   # blob, tree, commit
    sha: str
    path: str
    size: int | None = None


class GitStore:
    def __init__(self, path: Path, default_branch: str = "main"):
        self.path = Path(path)
        if not (self.path / "HEAD").exists():
            self.path.mkdir(parents=True, exist_ok=True)
            self.git("init", "--quiet", "--bare", f"--initial-branch={default_branch}")
        self._batch: subprocess.Popen | None = None  # one long-lived `git cat-file --batch` for reads
        self._batch_lock = threading.Lock()

    def close(self) -> None:
        with self._batch_lock:
            if self._batch is not None:
                self._batch.stdin.close()
                self._batch.wait(timeout=10)
                self._batch = None

    def cat(self, sha: str) -> tuple[str, bytes] | None:
        """(type, content) of an object, or None if it does not exist (one process for all reads)."""
        if not _is_hex(sha):
            return None
        with self._batch_lock:
            if self._batch is None or self._batch.poll() is not None:
                env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
                env.update({"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(self.path), "LC_ALL": "C"})
                self._batch = subprocess.Popen(["git", "--git-dir", str(self.path), "cat-file", "--batch"],
                                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
            self._batch.stdin.write(sha.encode() + b"\n")
            self._batch.stdin.flush()
            header = self._batch.stdout.readline().decode().split()
            if len(header) != 3:  # "<name> missing" (or ambiguous)
                return None
            _, typ, size = header
            data = self._batch.stdout.read(int(size))
            self._batch.stdout.read(1)  # the newline after the content
            return typ, data

    # -- plumbing ------------------------------------------------------------------------------
    def run(self, *args: str, input: bytes | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
        # A clean environment: no user/system config, no inherited GIT_* variables.
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        full_env.update({"GIT_CONFIG_NOSYSTEM": "1", "HOME": str(self.path), "LC_ALL": "C"})
        full_env.update(env or {})
        return subprocess.run(["git", "--git-dir", str(self.path), *args], input=input, capture_output=True,
                              env=full_env)

    def git(self, *args: str, input: bytes | None = None, env: dict | None = None, check: bool = True) -> bytes:
        proc = self.run(*args, input=input, env=env)
        if check and proc.returncode != 0:
            raise GitError(f"git {' '.join(args)}: {proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout

    def object_type(self, sha: str) -> str | None:
        found = self.cat(sha)
        return found[0] if found else None

    def write_blob(self, data: bytes) -> str:
        return self.git("hash-object", "-w", "-t", "blob", "--stdin", input=data).decode().strip()

    def read_blob(self, sha: str) -> bytes:
        found = self.cat(sha)
        if found is None or found[0] != "blob":
            raise GitError(f"{sha} is not a blob")
        return found[1]

    def ls_tree(self, tree: str, recursive: bool = False) -> list[TreeEntry]:
        args = ["ls-tree", "-z", "--long"] + (["-r"] if recursive else []) + [tree]
        entries = []
        for rec in self.git(*args).split(b"\0"):
            if not rec:
                continue
            meta, name = rec.split(b"\t", 1)
            mode, typ, sha, size = meta.decode().split()
            entries.append(TreeEntry(mode, typ, sha, name.decode(), None if size == "-" else int(size)))
        return entries

    def mktree(self, entries: list[TreeEntry]) -> str:
        data = b"".join(f"{e.mode} {e.type} {e.sha}\t{e.path}".encode() + b"\0" for e in entries)
        return self.git("mktree", "-z", input=data).decode().strip()

    def build_tree(self, base_tree: str | None, changes: dict[str, TreeEntry | None]) -> str:
        """Base tree (flattened) plus ``changes`` (path → entry, None deletes), written bottom-up."""
        flat: dict[str, TreeEntry] = {}
        if base_tree:
            for e in self.ls_tree(base_tree, recursive=True):
                flat[e.path] = e
        for path, entry in changes.items():
            if entry is None:
                # Deleting a directory path removes everything below it, as GitHub does.
                flat = {p: e for p, e in flat.items() if p != path and not p.startswith(path + "/")}
            elif entry.type == "tree":
                flat = {p: e for p, e in flat.items() if p != path and not p.startswith(path + "/")}
                for e in self.ls_tree(entry.sha, recursive=True):
                    flat[f"{path}/{e.path}"] = TreeEntry(e.mode, e.type, e.sha, f"{path}/{e.path}")
            else:
                flat[path] = entry
        return self._write_nested(flat)

    def _write_nested(self, flat: dict[str, TreeEntry]) -> str:
        children: dict[str, dict[str, TreeEntry]] = {}
        here: list[TreeEntry] = []
        for path, e in flat.items():
            head, _, rest = path.partition("/")
            if rest:
                children.setdefault(head, {})[rest] = e
            else:
                here.append(TreeEntry(e.mode, e.type, e.sha, head))
        for name, sub in children.items():
            here.append(TreeEntry("040000", "tree", self._write_nested(sub), name))
        return self.mktree(here)

    def commit_tree(self, tree: str, parents: list[str], message: str, author: Person, committer: Person) -> str:
        args = ["commit-tree", tree]
        for p in parents:
            args += ["-p", p]
        env = {
            "GIT_AUTHOR_NAME": author.name, "GIT_AUTHOR_EMAIL": author.email, "GIT_AUTHOR_DATE": author.git_date(),
            "GIT_COMMITTER_NAME": committer.name, "GIT_COMMITTER_EMAIL": committer.email,
            "GIT_COMMITTER_DATE": committer.git_date(),
        }
        return self.git(*args, input=message.encode(), env=env).decode().strip()

    def read_commit(self, sha: str) -> CommitObject:
        found = self.cat(sha)
        if found is None or found[0] != "commit":
            raise GitError(f"{sha} is not a commit")
        raw = found[1].decode(errors="replace")
        header, _, message = raw.partition("\n\n")
        tree, parents, author, committer = "", [], None, None
        for line in header.splitlines():
            key, _, value = line.partition(" ")
            if key == "tree":
                tree = value
            elif key == "parent":
                parents.append(value)
            elif key in ("author", "committer"):
                person = _parse_person(value)
                author, committer = (person, committer) if key == "author" else (author, person)
        return CommitObject(sha, tree, tuple(parents), author, committer, message)

    # -- refs ----------------------------------------------------------------------------------
    def resolve(self, rev: str) -> str | None:
        out = self.git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False).decode().strip()
        return out or None

    def ref_sha(self, ref: str) -> str | None:
        out = self.git("rev-parse", "--verify", "--quiet", ref, check=False).decode().strip()
        return out or None

    def refs(self, prefix: str = "refs/") -> dict[str, str]:
        out = self.git("for-each-ref", "--format=%(refname) %(objectname)", prefix).decode()
        return dict(line.split(" ", 1) for line in out.splitlines() if line)

    def update_ref(self, ref: str, new: str, old: str | None = None) -> None:
        self.git("update-ref", ref, new, *([old] if old else []))

    def delete_ref(self, ref: str) -> None:
        self.git("update-ref", "-d", ref)

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return self.run("merge-base", "--is-ancestor", ancestor, descendant).returncode == 0

    def merge_base(self, a: str, b: str) -> str | None:
        out = self.git("merge-base", a, b, check=False).decode().strip()
        return out or None

    def rev_list(self, *args: str) -> list[str]:
        return self.git("rev-list", *args).decode().split()

    def merge_tree(self, base: str, head: str) -> str | None:
        """Tree of merging ``head`` into ``base``, or None on conflicts."""
        proc = self.run("merge-tree", "--write-tree", base, head)
        if proc.returncode != 0:
            return None
        return proc.stdout.decode().split()[0]


def _parse_person(value: str) -> Person:
    from datetime import datetime, timezone

    name, _, rest = value.partition(" <")
    email, _, when = rest.partition("> ")
    ts = int(when.split()[0])
    return Person(name, email, datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))


def _is_hex(s: str) -> bool:
    return 4 <= len(s) <= 64 and all(c in "0123456789abcdef" for c in s)
