"""GitHubForge (token and App auth) passes the forge contract against the fake GitHub."""

from __future__ import annotations

import pytest
from forge_contract import ForgeContract
from forge_helpers import make_forge

from bot.forge.github import GitHubForge


class FakeGitHubHarness:
    def __init__(self, server, forge):
        self.server, self.forge = server, forge

    def human_push(self, branch, files, author):
        return self.server.push_commit(branch, files, author=author, message="a person's commit")

    def human_comment(self, number, body, author):
        return self.server.add_comment(number, body, author=author)["id"]

    def create_issue(self, title, author):
        return self.server.create_issue(title, author=author)

    def set_permission(self, user, permission):
        self.server.set_permission(user, permission)

    def add_team_member(self, org, team, user, active=True):
        self.server.add_team_member(org, team, user, state="active" if active else "pending")

    def comment_bodies(self, number, author=None):
        return [c["body"] for c in self.server.comments_on(number) if author is None or c["user"]["login"] == author]

    def pull_count(self):
        return len(self.server.pulls)


class TestGitHubForgeWithToken(ForgeContract):
    @pytest.fixture
    def harness(self, github_server):
        # The fake reports mergeable as null once after a PR opens or moves, like GitHub.
        github_server.mergeable_lag = 1
        return FakeGitHubHarness(github_server, make_forge(github_server))


class TestGitHubForgeAsApp(ForgeContract):
    @pytest.fixture
    def harness(self, github_server, github_app_key):
        private, public = github_app_key
        github_server.register_app(77, public, slug="kbot", installation_id=7)
        forge = GitHubForge(github_server.full_name, app_id=77, private_key=private, base_url=github_server.base_url,
                            seconds_between_requests=None, seconds_between_writes=None, sleep=lambda s: None,
                            backoff=0.0)
        return FakeGitHubHarness(github_server, forge)
