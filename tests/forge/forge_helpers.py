"""Helpers shared by the forge tests (clients pointed at the fake GitHub)."""

from __future__ import annotations

import github

from bot.forge.github import GitHubForge


def make_forge(server, token: str | None = None, **kwargs) -> GitHubForge:
    """A GitHubForge on the fake: no client-side throttling and no real sleeping in tests."""
    kwargs.setdefault("sleep", lambda s: None)
    kwargs.setdefault("backoff", 0.0)
    return GitHubForge(server.full_name, token=token or server.bot_token, base_url=server.base_url,
                       seconds_between_requests=None, seconds_between_writes=None, **kwargs)


def make_client(server, token: str, **kwargs) -> github.Github:
    """Plain PyGithub (default retry policy) for driving the fake as a person or a naive client."""
    return github.Github(base_url=server.base_url, auth=github.Auth.Token(token), seconds_between_requests=None,
                         seconds_between_writes=None, **kwargs)
