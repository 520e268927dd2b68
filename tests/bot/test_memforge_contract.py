"""The in-memory forge the bot tests use passes the same behaviour tests as GitHubForge and LocalForge,
so a bot test that passes against it is not passing because the fake is more lenient than GitHub."""

from __future__ import annotations

import pytest
from forge.forge_contract import ForgeContract  # tests/ is on sys.path (tests/bot/conftest.py)
from memforge import MemForge

from bot.forge.base import Forge, NotMergeableError, Permission


class MemForgeHarness:
    """What a person does around the bot, done directly on MemForge's store."""

    def __init__(self, forge: MemForge):
        self.forge = forge

    def human_push(self, branch, files, author):
        return self.forge.human_push(branch, files, "a person's commit", author=author)

    def human_comment(self, number, body, author):
        return self.forge.add_human_comment(number, body, author=author).id

    def create_issue(self, title, author):
        return self.forge.add_issue()

    def set_permission(self, user, permission):
        self.forge.perms[user] = Permission(permission)

    def add_team_member(self, org, team, user, active=True):
        if active:  # a pending invitation is not a membership
            self.forge.teams.setdefault((org, team), set()).add(user)

    def comment_bodies(self, number, author=None):
        return [c.body for c in self.forge.comments.get(number, []) if author is None or c.author == author]

    def pull_count(self):
        return len(self.forge.prs)


class TestMemForge(ForgeContract):
    @pytest.fixture
    def harness(self):
        return MemForgeHarness(MemForge())


def test_is_a_forge():
    assert isinstance(MemForge(), Forge)


def test_merge_refuses_a_file_both_sides_changed():
    f = MemForge(files={"a.txt": "0\n", "b.txt": "0\n"})
    _, main = f.default_head()
    one = f.commit_files("kbot/x/n1", main, {"a.txt": "1\n"}, "n1")
    two = f.commit_files("kbot/x/n2", main, {"a.txt": "2\n", "b.txt": "2\n"}, "n2")
    p1, p2 = f.open_pr("kbot/x/n1", "n1", ""), f.open_pr("kbot/x/n2", "n2", "")
    f.merge(p1.number, one)
    assert f.get_pr(p2.number).mergeable is False
    with pytest.raises(NotMergeableError, match="a.txt"):
        f.merge(p2.number, two)
    assert f.read_file("a.txt") == b"1\n" and f.read_file("b.txt") == b"0\n"


def test_merge_keeps_the_base_branch_changes_the_pr_did_not_touch():
    f = MemForge(files={"a.txt": "0\n"})
    _, main = f.default_head()
    cand = f.commit_files("kbot/x/n1", main, {"c.txt": "c\n"}, "n1")
    f.commit_files("main", main, {"a.txt": "moved on\n"}, "main moves after the branch was cut")
    pr = f.open_pr("kbot/x/n1", "n1", "")
    f.merge(pr.number, cand)
    assert f.read_file("a.txt") == b"moved on\n" and f.read_file("c.txt") == b"c\n"
