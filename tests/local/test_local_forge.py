"""LocalForge semantics: a real git repository underneath, GitHub-like PR/review/merge rules on top."""

from __future__ import annotations

import subprocess

import pytest

from bot.forge.base import (
    BranchMovedError,
    BranchTouchedByHumansError,
    Forge,
    ForgeError,
    HeadMovedError,
    NotMergeableError,
)
from bot.forge.local import LocalForge
from bot.forge.markers import REVIEW_MARKER


@pytest.fixture
def forge(tmp_path):
    f = LocalForge(tmp_path / "forge")
    f.commit_files("main", None, {"README.md": "hello\n", "kernels/d/champ/solution.json": "{}\n"}, "init")
    return f


def _git(f: LocalForge, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(f.git_dir), *args], check=True, capture_output=True, text=True).stdout.strip()


def _candidate(f: LocalForge, branch: str, content: str = "x = 1\n") -> str:
    _, main = f.default_head()
    return f.commit_files(branch, main, {f"kernels/d/{branch.rsplit('/', 1)[1]}/main.py": content}, f"add {branch}")


def test_is_a_forge_and_commits_are_real_git(forge):
    assert isinstance(forge, Forge)
    sha = _candidate(forge, "kbot/d/n1")
    assert _git(forge, "cat-file", "-t", sha) == "commit"
    assert _git(forge, "show", f"{sha}:kernels/d/n1/main.py") == "x = 1"
    assert _git(forge, "log", "-1", "--format=%an <%ae>", sha) == "kbot <kbot@localhost>"
    # main untouched by a branch commit; bare repo: no working tree anywhere
    assert forge.read_file("kernels/d/n1/main.py") is None
    assert forge.read_file("kernels/d/n1/main.py", ref="kbot/d/n1") == b"x = 1\n"
    assert _git(forge, "rev-parse", "--is-bare-repository") == "true"


def test_commit_on_moved_branch_refused(forge):
    _, main = forge.default_head()
    first = _candidate(forge, "kbot/d/n1")
    with pytest.raises(BranchMovedError):
        forge.commit_files("kbot/d/n1", main, {"a": "b"}, "stale base")
    assert forge.branch_head("kbot/d/n1") == first
    second = forge.commit_files("kbot/d/n1", first, {"a": "b"}, "fast-forward")
    assert forge.branch_commits("kbot/d/n1")[0].sha == second


def test_human_commit_on_bot_branch_refused(forge):
    first = _candidate(forge, "kbot/d/n1")
    tree = _git(forge, "rev-parse", f"{first}^{{tree}}")
    env = {"GIT_AUTHOR_NAME": "Ann", "GIT_AUTHOR_EMAIL": "ann@example.com", "GIT_COMMITTER_NAME": "Ann",
           "GIT_COMMITTER_EMAIL": "ann@example.com", "PATH": "/usr/bin:/bin"}
    human = subprocess.run(["git", "--git-dir", str(forge.git_dir), "commit-tree", tree, "-p", first, "-m", "mine"],
                           check=True, capture_output=True, text=True, env=env).stdout.strip()
    _git(forge, "update-ref", "refs/heads/kbot/d/n1", human)
    assert [c.sha for c in forge.branch_touched_by_humans("kbot/d/n1")] == [human]
    with pytest.raises(BranchTouchedByHumansError):
        forge.commit_files("kbot/d/n1", human, {"a": "b"}, "bot on top of a person")


def test_open_pr_is_idempotent_per_branch(forge):
    _candidate(forge, "kbot/d/n1")
    a = forge.open_pr("kbot/d/n1", "t", "body", labels=["kbot:candidate"])
    b = forge.open_pr("kbot/d/n1", "t again", "other body")
    assert a.number == b.number == 1
    assert len(list(forge.list_prs(state="all"))) == 1
    _candidate(forge, "kbot/d/n2")
    assert forge.open_pr("kbot/d/n2", "t2", "b2").number == 2  # PR numbers count 1, 2, ... like GitHub
    assert forge.labels(1) == ["kbot:candidate"]
    with pytest.raises(ForgeError):
        forge.open_pr("kbot/d/missing", "t", "b")


def test_sticky_review_and_comment_are_edited_in_place(forge):
    _candidate(forge, "kbot/d/n1")
    pr = forge.open_pr("kbot/d/n1", "t", "b")
    r1 = forge.upsert_review(pr.number, REVIEW_MARKER, f"{REVIEW_MARKER}\nfirst")
    r2 = forge.upsert_review(pr.number, REVIEW_MARKER, f"{REVIEW_MARKER}\nsecond")
    assert r1.id == r2.id
    reviews = list(forge.list_reviews(pr.number))
    assert [r.body.splitlines()[-1] for r in reviews] == ["second"]
    # someone else's comment carrying the marker is never the sticky one
    forge.create_comment(pr.number, "<!-- kbot:note -->\nfake", author="mallory")
    c1 = forge.upsert_comment(pr.number, "<!-- kbot:note -->", "<!-- kbot:note -->\nmine")
    c2 = forge.upsert_comment(pr.number, "<!-- kbot:note -->", "<!-- kbot:note -->\nmine, edited")
    assert c1.id == c2.id
    bodies = [c.body for c in forge.list_comments(pr.number)]
    assert bodies == ["<!-- kbot:note -->\nfake", "<!-- kbot:note -->\nmine, edited"]
    with pytest.raises(ForgeError):
        forge.upsert_review(pr.number, REVIEW_MARKER, "no marker")


def test_merge_is_sha_guarded_and_squashes_onto_main(forge):
    measured = _candidate(forge, "kbot/d/n1")
    pr = forge.open_pr("kbot/d/n1", "t", "b")
    _, main_before = forge.default_head()
    moved = forge.commit_files("kbot/d/n1", measured, {"kernels/d/n1/main.py": "x = 2\n"}, "pushed after the benchmark")
    with pytest.raises(HeadMovedError):
        forge.merge(pr.number, measured)
    assert forge.default_head()[1] == main_before and forge.get_pr(pr.number).is_open
    res = forge.merge(pr.number, moved, title="kbot: promote n1")
    head = forge.default_head()[1]
    assert res.sha == head
    parents = _git(forge, "log", "-1", "--format=%P", head).split()
    assert parents == [main_before]  # a squash: one parent, the old main
    assert forge.read_file("kernels/d/n1/main.py") == b"x = 2\n"
    assert _git(forge, "log", "-1", "--format=%s", head) == "kbot: promote n1"
    done = forge.get_pr(pr.number)
    assert done.merged and not done.is_open and done.merge_commit_sha == head
    assert forge.merge(pr.number, moved).sha == head  # a retried merge finds it done, as on GitHub
    with pytest.raises(NotMergeableError):
        forge.merge(pr.number, measured)  # merged already, at another sha


def test_closed_losers_are_kept_and_the_store_survives_a_restart(forge, tmp_path):
    for n in ("n1", "n2"):
        _candidate(forge, f"kbot/d/{n}")
        forge.open_pr(f"kbot/d/{n}", n, "body")
    forge.close_pr(2, comment="Closed: not promoted")
    forge.close_pr(2, comment="Closed: not promoted")  # retried: not posted twice
    forge.set_status(forge.get_pr(1).head_sha, "success", description="3/3 passed")
    again = LocalForge(tmp_path / "forge")  # a new process, same files
    assert [p.number for p in again.list_prs(state="open")] == [1]
    closed = list(again.list_prs(state="closed"))
    assert [(p.number, p.merged) for p in closed] == [(2, False)]
    assert again.branch_head("kbot/d/n2") is not None  # the loser's branch is kept too
    assert [c.body for c in again.list_comments(2)] == ["Closed: not promoted"]
    assert again.combined_status(again.get_pr(1).head_sha).state == "success"
    assert again.open_pr("kbot/d/n1", "dup?", "x").number == 1


def test_update_branch_merges_main_in(forge):
    _candidate(forge, "kbot/d/n1")
    pr = forge.open_pr("kbot/d/n1", "t", "b")
    _, main = forge.default_head()
    forge.commit_files("main", main, {"kernels/d/champion.json": "{}\n"}, "pointer")
    assert forge.branch_commits("main", base="kbot/d/n1")  # behind main
    new = forge.update_branch(pr.number)
    assert forge.get_pr(pr.number).head_sha == new
    assert not forge.branch_commits("main", base="kbot/d/n1")
    assert forge.update_branch(pr.number) == new  # already up to date: no new commit
