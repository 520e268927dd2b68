"""LocalForge passes the same behaviour tests as GitHubForge (``tests/forge/forge_contract.py``).

The harness does what a person would do around the bot on this machine: commit to the bare
repository directly with git plumbing under their own name, post a comment or open an issue, and set
roles and team memberships in the store. Its ground-truth reads go to ``forge.json`` itself, not
through LocalForge's own readers.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

import pytest

from bot.forge.base import (
    BranchTouchedByHumansError,
    ForgeError,
    HeadMovedError,
    NotFoundError,
    NotMergeableError,
    Permission,
)
from bot.forge.local import LocalForge
from bot.forge.markers import sticky_marker
from tests.forge.forge_contract import ForgeContract


def _person_git(forge: LocalForge, who: str, *args: str, input: bytes | None = None, index: str | None = None) -> str:
    """git on the forge's repository as ``who`` (author and committer), never as the bot."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_DIR=str(forge.git_dir), GIT_AUTHOR_NAME=who.title(), GIT_AUTHOR_EMAIL=f"{who}@example.com",
               GIT_COMMITTER_NAME=who.title(), GIT_COMMITTER_EMAIL=f"{who}@example.com")
    if index:
        env["GIT_INDEX_FILE"] = index
    return subprocess.run(["git", *args], input=input, env=env, check=True, capture_output=True).stdout.decode().strip()


class LocalForgeHarness:
    """What a person does around the bot, done directly on LocalForge's repository and store."""

    def __init__(self, forge: LocalForge):
        self.forge = forge

    def human_push(self, branch, files, author):
        f = self.forge
        old = f.branch_head(branch)
        parent = old or f.default_head()[1]
        with tempfile.TemporaryDirectory() as tmp:
            index = os.path.join(tmp, "index")
            _person_git(f, author, "read-tree", parent, index=index)
            for path, content in files.items():
                if content is None:
                    _person_git(f, author, "update-index", "--force-remove", path, index=index)
                    continue
                data = content.encode() if isinstance(content, str) else content
                blob = _person_git(f, author, "hash-object", "-w", "--stdin", input=data)
                _person_git(f, author, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", index=index)
            tree = _person_git(f, author, "write-tree", index=index)
        sha = _person_git(f, author, "commit-tree", tree, "-p", parent, "-m", "a person's commit")
        _person_git(f, author, "update-ref", f"refs/heads/{branch}", sha, old or "0" * 40)
        return sha

    def human_comment(self, number, body, author):
        return self.forge.create_comment(number, body, author=author).id

    def create_issue(self, title, author):
        return self.forge.create_issue(title, author=author)

    def set_permission(self, user, permission):
        self.forge.set_permission(user, permission)

    def add_team_member(self, org, team, user, active=True):
        self.forge.set_team_membership(org, team, user, "active" if active else "pending")

    def _store(self) -> dict:
        path = self.forge.store_path  # written on the first change, so absent means empty
        return json.loads(path.read_text()) if path.exists() else {"prs": {}, "comments": {}}

    def comment_bodies(self, number, author=None):
        comments = sorted(self._store()["comments"].values(), key=lambda c: c["id"])
        return [c["body"] for c in comments if c["number"] == number and (author is None or c["author"] == author)]

    def pull_count(self):
        return len(self._store()["prs"])


def _seeded(tmp_path) -> LocalForge:
    f = LocalForge(tmp_path / "forge", owner="owner")
    f.commit_files("main", None, {"README.md": "seed\n", "kernels/gemm/champion.json": "{}\n"}, "seed")
    return f


class TestLocalForge(ForgeContract):
    @pytest.fixture
    def harness(self, tmp_path):
        return LocalForgeHarness(_seeded(tmp_path))


# -- LocalForge specifics beyond the contract: the same GitHub rules, checked where it is cheap here --

@pytest.fixture
def h(tmp_path) -> LocalForgeHarness:
    return LocalForgeHarness(_seeded(tmp_path))


def _pr(h: LocalForgeHarness, node: str, files: dict) -> tuple[int, str]:
    f = h.forge
    sha = f.commit_files(f"kbot/gemm/{node}", f.default_head()[1], files, node)
    return f.open_pr(f"kbot/gemm/{node}", node, "").number, sha


def test_issues_and_prs_share_numbers_and_an_issue_is_not_a_pr(h):
    f = h.forge
    issue = f.create_issue("campaign", author="alice")
    pr, _ = _pr(h, "n1", {"a.txt": "1\n"})
    assert (issue, pr) == (1, 2)
    with pytest.raises(NotFoundError):
        f.get_pr(issue)
    with pytest.raises(NotFoundError):
        list(f.list_reviews(issue))
    assert [p.number for p in f.list_prs(state="all")] == [pr]
    with pytest.raises(NotFoundError):
        f.create_comment(99, "nowhere")


def test_merge_refusals_match_github(h):
    f = h.forge
    p1, s1 = _pr(h, "n1", {"a.txt": "1\n"})
    p2, s2 = _pr(h, "n2", {"a.txt": "2\n"})  # the same file as n1: conflicts once n1 lands
    with pytest.raises(ForgeError, match="merge method"):
        f.merge(p1, s1, method="fast-forward")  # type: ignore[arg-type]
    merged = f.merge(p1, s1)
    with pytest.raises(NotMergeableError):
        f.merge(p1, s2)  # merged already, at another sha
    assert f.get_pr(p2).mergeable is False
    with pytest.raises(NotMergeableError):
        f.merge(p2, s2)
    f.close_pr(p2)
    with pytest.raises(NotMergeableError):
        f.merge(p2, s2)  # closed without merging
    assert f.default_head()[1] == merged.sha


def test_rebase_merge_replays_each_commit(h):
    f = h.forge
    _, main = f.default_head()
    first = f.commit_files("kbot/gemm/n1", main, {"a.txt": "1\n"}, "first")
    second = f.commit_files("kbot/gemm/n1", first, {"b.txt": "2\n"}, "second")
    pr = f.open_pr("kbot/gemm/n1", "n1", "")
    f.commit_files("main", main, {"c.txt": "main moved\n"}, "main moves on")
    result = f.merge(pr.number, second, method="rebase")
    replayed = f.branch_commits("main", base=main)
    assert [c.message.strip() for c in replayed] == ["second", "first", "main moves on"]
    assert replayed[0].sha == result.sha and result.sha not in (first, second)
    assert [f.read_file(p) for p in ("a.txt", "b.txt", "c.txt")] == [b"1\n", b"2\n", b"main moved\n"]
    assert f.merge(pr.number, second, method="rebase").sha == result.sha


def test_open_pr_validation(h):
    f = h.forge
    _, main = f.default_head()
    _person_git(f, "alice", "update-ref", "refs/heads/kbot/gemm/empty", main)
    with pytest.raises(ForgeError, match="No commits"):
        f.open_pr("kbot/gemm/empty", "nothing to merge", "")
    f.commit_files("kbot/gemm/n1", main, {"a.txt": "1\n"}, "n1")
    with pytest.raises(NotFoundError):
        f.open_pr("kbot/gemm/n1", "n1", "", base="release")
    with pytest.raises(ForgeError):
        f.open_pr("kbot/gemm/n1", "n1", "x" * 70_000)
    assert h.pull_count() == 0


def test_close_comment_is_the_bots_own(h):
    f = h.forge
    pr, _ = _pr(h, "n1", {"a.txt": "1\n"})
    h.human_comment(pr, "Slower than the champion.", author="mallory")
    f.close_pr(pr, "Slower than the champion.")
    assert h.comment_bodies(pr, author=f.info.bot_login) == ["Slower than the champion."]
    f.close_pr(pr, "Slower than the champion.")
    assert len(h.comment_bodies(pr)) == 2


def test_human_commit_refused_even_with_a_stale_base(h):
    f = h.forge
    _, main = f.default_head()
    bot = f.commit_files("kbot/gemm/n1", main, {"a.txt": "1\n"}, "n1")
    h.human_push("kbot/gemm/n1", {"a.txt": "mine\n"}, author="alice")
    with pytest.raises(BranchTouchedByHumansError):
        f.commit_files("kbot/gemm/n1", bot, {"a.txt": "2\n"}, "stale, and on a person's commit")


def test_statuses_need_a_real_commit_and_error_fails_the_combination(h):
    f = h.forge
    _, main = f.default_head()
    with pytest.raises(ForgeError):
        f.set_status("0" * 40, "success")
    f.set_status("main", "success", context="a")  # a branch name means its head, as on GitHub
    f.set_status(main, "error", context="b")
    combined = f.combined_status(main)
    assert combined.state == "failure" and {s.context for s in combined.statuses} == {"a", "b"}


def test_small_idempotence_rules(h):
    f = h.forge
    number = f.create_issue("x", author="alice")
    c = f.create_comment(number, "hi")
    f.delete_comment(c.id)
    f.delete_comment(c.id)  # already gone: not an error, like a retried DELETE
    f.delete_branch("kbot/none/n0")
    with pytest.raises(ForgeError):
        f.add_reaction(h.human_comment(number, "/optimize", author="alice"), "thumbs-up")  # type: ignore[arg-type]
    marker = sticky_marker("status")
    first = f.upsert_comment(number, marker, f"{marker}\nsame")
    again = f.upsert_comment(number, marker, f"{marker}\nsame")
    assert again.updated_at == first.updated_at and again.id == first.id


def test_permissions_persist_and_the_owner_is_admin(h, tmp_path):
    f = h.forge
    f.set_permission("alice", "write")
    f.set_team_membership("org", "kernels", "bob")
    again = LocalForge(tmp_path / "forge", owner="owner")  # another process
    assert again.permission("alice") == Permission.WRITE and again.is_team_member("org", "kernels", "bob")
    assert again.permission("owner") == Permission.ADMIN == again.permission(again.info.bot_login)
    f.set_permission("alice", "none")
    f.set_team_membership("org", "kernels", "bob", None)
    assert again.permission("alice") == Permission.NONE and not again.is_team_member("org", "kernels", "bob")
    with pytest.raises(ForgeError):
        f.set_permission("carol", "superuser")


def test_head_moved_wins_over_everything_for_an_open_pr(h):
    f = h.forge
    pr, sha = _pr(h, "n1", {"a.txt": "1\n"})
    h.human_push("kbot/gemm/n1", {"a.txt": "2\n"}, author="alice")
    with pytest.raises(HeadMovedError):
        f.merge(pr, sha)


def test_changed_files_since_the_merge_base(h):
    f = h.forge
    _, main = f.default_head()
    f.commit_files("kbot/gemm/n1", main, {"kernels/gemm/n1/k.py": "1\n", "README.md": None}, "n1")
    f.commit_files("main", main, {"kernels/gemm/champion.json": '{"moved": 1}\n'}, "main moves on")
    # main's later change is not the branch's; the deletion is
    assert f.changed_files("kbot/gemm/n1") == ["README.md", "kernels/gemm/n1/k.py"]
    with pytest.raises(NotFoundError):
        f.changed_files("kbot/gemm/none")


def test_deleting_a_head_branch_closes_its_open_pr(h):
    f = h.forge
    pr, sha = _pr(h, "n1", {"a.txt": "1\n"})
    f.delete_branch("kbot/gemm/n1")
    closed = f.get_pr(pr)
    assert not closed.is_open and not closed.merged and closed.head_sha == sha
    assert f.branch_head("kbot/gemm/n1") is None and f.find_open_pr("kbot/gemm/n1") is None
