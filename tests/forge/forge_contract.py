"""Behaviour every ``Forge`` must have, as reusable tests.

Each implementation subclasses ``ForgeContract`` and provides a ``harness`` fixture: the forge under
test plus a few "what a person does" hooks that go around the bot (a push, a comment, a permission
change) and ground-truth reads from the backing store. GitHubForge runs it against the fake GitHub
(``test_forge_contract.py``); the local git-backed forge runs the same class against its own store::

    from tests.forge.forge_contract import ForgeContract

    class TestLocalForge(ForgeContract):
        @pytest.fixture
        def harness(self, tmp_path):
            return MyLocalHarness(tmp_path)
"""

from __future__ import annotations

from typing import Protocol

import pytest

from bot.forge.base import (
    BranchMovedError,
    BranchTouchedByHumansError,
    Forge,
    ForgeError,
    HeadMovedError,
    Permission,
    UnsupportedError,
)
from bot.forge.markers import REVIEW_MARKER, decode_meta, encode_meta, sticky_marker


class ForgeHarness(Protocol):
    forge: Forge

    def human_push(self, branch: str, files: dict[str, str | bytes | None], author: str) -> str:
        """A person's commit on ``branch`` (created from the default branch if absent); returns its sha."""

    def human_comment(self, number: int, body: str, author: str) -> int:
        """A person's comment on issue/PR ``number``; returns the comment id."""

    def create_issue(self, title: str, author: str) -> int:
        """An issue (where commands can be posted); returns its number."""

    def set_permission(self, user: str, permission: str) -> None: ...

    def add_team_member(self, org: str, team: str, user: str, active: bool = True) -> None: ...

    def comment_bodies(self, number: int, author: str | None = None) -> list[str]:
        """Ground truth from the store: bodies of the comments on ``number`` (by ``author`` if given)."""

    def pull_count(self) -> int:
        """Ground truth: how many PRs exist, open or not."""


FILES = {"kernels/gemm/n1/solution.json": '{"name": "n1"}\n', "kernels/gemm/n1/kernel.py": "K = 1\n"}


class ForgeContract:
    @pytest.fixture
    def harness(self) -> ForgeHarness:  # pragma: no cover - every subclass provides it
        raise NotImplementedError

    # -- helpers ---------------------------------------------------------------------------------
    @staticmethod
    def _candidate(h: ForgeHarness, branch: str = "kbot/gemm/n1", files=None) -> str:
        _, head = h.forge.default_head()
        return h.forge.commit_files(branch, head, files or FILES, f"candidate {branch}")

    # -- repository and commits -------------------------------------------------------------------
    def test_default_branch_and_files(self, harness):
        f = harness.forge
        name, sha = f.default_head()
        assert name == f.default_branch() and f.branch_head(name) == sha
        assert f.branch_head("kbot/none/n0") is None
        assert f.read_file("no/such/file.txt") is None
        assert isinstance(f.info.bot_login, str) and f.info.bot_login

    def test_commit_files_one_commit_then_fast_forward(self, harness):
        f = harness.forge
        _, main = f.default_head()
        sha = f.commit_files("kbot/gemm/n1", main, FILES, "n1")
        assert f.branch_head("kbot/gemm/n1") == sha
        assert [c.sha for c in f.branch_commits("kbot/gemm/n1")] == [sha]
        assert f.branch_commits("kbot/gemm/n1")[0].parents == (main,)
        for path, text in FILES.items():
            assert f.read_file(path, ref="kbot/gemm/n1") == text.encode()
            assert f.read_file(path) is None  # default branch untouched
        sha2 = f.commit_files("kbot/gemm/n1", sha, {"kernels/gemm/n1/kernel.py": None, "b.bin": b"\x00\xff"}, "n1b")
        assert f.read_file("kernels/gemm/n1/kernel.py", ref=sha2) is None
        assert f.read_file("b.bin", ref="kbot/gemm/n1") == b"\x00\xff"
        with pytest.raises(BranchMovedError):
            f.commit_files("kbot/gemm/n1", sha, {"c": "c"}, "stale base")
        assert f.branch_head("kbot/gemm/n1") == sha2
        with pytest.raises(ForgeError):
            f.commit_files("kbot/gemm/n2", main, {"../escape": "x"}, "unsafe")
        assert f.branch_head("kbot/gemm/n2") is None

    def test_human_commits_are_detected_and_never_rewritten(self, harness):
        f = harness.forge
        sha = self._candidate(harness)
        assert f.branch_touched_by_humans("kbot/gemm/n1") == []
        human = harness.human_push("kbot/gemm/n1", {"kernels/gemm/n1/kernel.py": "K = 9\n"}, author="alice")
        assert [c.sha for c in f.branch_touched_by_humans("kbot/gemm/n1")] == [human]
        with pytest.raises(BranchTouchedByHumansError):
            f.commit_files("kbot/gemm/n1", human, {"x": "y"}, "bot on top of a person")
        assert f.branch_head("kbot/gemm/n1") == human
        assert [c.sha for c in f.branch_commits("kbot/gemm/n1")] == [human, sha]

    # -- pull requests ----------------------------------------------------------------------------
    def test_open_pr_is_idempotent_and_listable(self, harness):
        f = harness.forge
        self._candidate(harness)
        self._candidate(harness, "kbot/norm/n2", {"kernels/norm/n2/k.py": "N = 2\n"})
        meta = {"definition": "gemm", "node": "n1"}
        pr = f.open_pr("kbot/gemm/n1", "gemm n1", f"Body\n\n{encode_meta(meta)}\n", labels=["kbot"])
        assert f.open_pr("kbot/gemm/n1", "gemm n1", "other body", labels=["kbot"]).number == pr.number
        assert harness.pull_count() == 1
        assert pr.is_open and pr.author == f.info.bot_login and pr.head_branch == "kbot/gemm/n1"
        assert decode_meta(f.get_pr(pr.number).body) == meta
        assert f.find_open_pr("kbot/gemm/n1").number == pr.number and f.find_open_pr("kbot/x/n9") is None
        other = f.open_pr("kbot/norm/n2", "norm n2", "")
        f.add_labels(other.number, ["winner"])
        assert [p.number for p in f.list_prs(label="winner")] == [other.number]
        assert [p.number for p in f.list_prs(head_prefix="kbot/gemm/")] == [pr.number]
        assert sorted(p.number for p in f.list_prs()) == sorted([pr.number, other.number])
        updated = f.update_pr(pr.number, title="gemm n1 (v2)")
        assert updated.title == "gemm n1 (v2)"

    def test_labels(self, harness):
        f = harness.forge
        number = harness.create_issue("campaign", author="alice")
        f.add_labels(number, ["kbot", "busy"])
        f.add_labels(number, ["kbot"])
        f.remove_label(number, "busy")
        f.remove_label(number, "busy")
        assert f.labels(number) == ["kbot"]

    def test_merge_is_sha_guarded(self, harness):
        f = harness.forge
        sha = self._candidate(harness)
        pr = f.open_pr("kbot/gemm/n1", "gemm n1", "")
        assert f.wait_mergeable(pr.number, timeout=5).mergeable is True
        result = f.merge(pr.number, sha, method="squash")
        assert result.merged and f.branch_head(f.default_branch()) == result.sha
        assert f.read_file("kernels/gemm/n1/kernel.py") == b"K = 1\n"
        merged = f.get_pr(pr.number)
        assert merged.merged and not merged.is_open
        assert f.merge(pr.number, sha).sha == result.sha  # re-running a finished merge is harmless

        sha2 = self._candidate(harness, "kbot/gemm/n2", {"kernels/gemm/n2/k.py": "2\n"})
        pr2 = f.open_pr("kbot/gemm/n2", "gemm n2", "")
        harness.human_push("kbot/gemm/n2", {"kernels/gemm/n2/k.py": "22\n"}, author="alice")
        with pytest.raises(HeadMovedError):
            f.merge(pr2.number, sha2)
        assert f.branch_head(f.default_branch()) == result.sha

    def test_close_with_comment_is_idempotent(self, harness):
        f = harness.forge
        self._candidate(harness)
        pr = f.open_pr("kbot/gemm/n1", "gemm n1", "")
        f.close_pr(pr.number, "Slower than the champion.")
        closed = f.close_pr(pr.number, "Slower than the champion.")
        assert not closed.is_open and not closed.merged
        assert len(harness.comment_bodies(pr.number)) == 1

    # -- conversation -----------------------------------------------------------------------------
    def test_sticky_comment_is_the_bots_own(self, harness):
        f = harness.forge
        number = harness.create_issue("campaign", author="alice")
        marker = sticky_marker("status")
        harness.human_comment(number, f"{marker}\nforged by a person", author="mallory")
        first = f.upsert_comment(number, marker, f"{marker}\nv1")
        second = f.upsert_comment(number, marker, f"{marker}\nv2")
        assert first.id == second.id and second.body.endswith("v2")
        assert harness.comment_bodies(number, author=f.info.bot_login) == [f"{marker}\nv2"]
        assert len(harness.comment_bodies(number)) == 2
        with pytest.raises(ForgeError):
            f.upsert_comment(number, marker, "no marker here")

    def test_sticky_review(self, harness):
        f = harness.forge
        sha = self._candidate(harness)
        pr = f.open_pr("kbot/gemm/n1", "gemm n1", "")
        first = f.upsert_review(pr.number, REVIEW_MARKER, f"{REVIEW_MARKER}\nv1", commit_sha=sha)
        second = f.upsert_review(pr.number, REVIEW_MARKER, f"{REVIEW_MARKER}\nv2", commit_sha=sha)
        assert first.id == second.id
        bots = [r for r in f.list_reviews(pr.number) if r.author == f.info.bot_login]
        assert [r.body for r in bots] == [f"{REVIEW_MARKER}\nv2"]

    def test_comments_and_reactions(self, harness):
        f = harness.forge
        number = harness.create_issue("campaign", author="alice")
        cid = harness.human_comment(number, "/optimize", author="alice")
        f.add_reaction(cid, "eyes")
        f.add_reaction(cid, "eyes")
        got = f.get_comment(cid)
        assert got.body == "/optimize" and got.author == "alice"
        mine = f.create_comment(number, "on it")
        assert [c.body for c in f.list_comments(number)] == ["/optimize", "on it"]
        f.delete_comment(mine.id)
        assert [c.id for c in f.list_comments(number)] == [cid]

    # -- statuses, checks, permissions ------------------------------------------------------------
    def test_statuses_and_checks(self, harness):
        f = harness.forge
        sha = self._candidate(harness)
        f.set_status(sha, "pending", description="queued")
        f.set_status(sha, "failure", description="2 workloads failed")
        combined = f.combined_status(sha)
        assert combined.state == "failure" and combined.get("kbot/harness").description == "2 workloads failed"
        if f.info.supports_check_runs:
            run = f.create_check_run(sha, "kbot/harness", conclusion="success", title="ok", summary="ok")
            assert run.conclusion == "success"
        else:
            with pytest.raises(UnsupportedError):
                f.create_check_run(sha, "kbot/harness")

    def test_permissions_and_teams(self, harness):
        f = harness.forge
        harness.set_permission("alice", "maintain")
        harness.set_permission("tri", "triage")
        harness.add_team_member("org", "kernels", "bob")
        harness.add_team_member("org", "kernels", "carol", active=False)
        assert f.permission("alice") == Permission.MAINTAIN
        assert f.permission("tri") == Permission.TRIAGE and not f.permission("tri").at_least("write")
        assert f.permission("nobody-at-all") == Permission.NONE
        assert f.is_team_member("org", "kernels", "bob")
        assert not f.is_team_member("org", "kernels", "carol")
        assert not f.is_team_member("org", "kernels", "alice")
