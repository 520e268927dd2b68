"""The bot's answers are bounded per account: an account without a role gets no write at all (not a
reaction, not /help, not a parse-error reply) where the policy says so, and any other account at most
a small number of writes per window. Against the fake GitHub through the webhook app, counting the
bot's write requests.

Before: ten comments from an account with no role caused thirty bot writes (eyes + confused + reply each).
"""

from __future__ import annotations

import pytest
from e2ekit import Env

from bot.commands.bot_policy import BotPolicy

BODIES = ["/help", "/optimise x", "/status", "/help\n/help", "/nope", "/help", "/evaluate", "/x y", "/help", "/status"]


@pytest.fixture
def env(github_server, shared, tmp_path, repo):
    return Env(github_server, shared, tmp_path, repo)


def writes_for(env, login: str, bodies=BODIES) -> int:
    issue = env.server.create_issue("hello", author="alice")
    before = len(env.server.requests)
    for body in bodies:
        _, p = env.comment(issue, body, author=login)
        assert env.deliver("issue_comment", p).status == 202
    made = [r for r in env.server.requests[before:] if r[0] in ("POST", "PATCH", "PUT", "DELETE")]
    # the comments themselves are posted by the test through the server's setup API, not over HTTP
    return len(made)


def test_an_account_without_a_role_gets_no_writes(env):
    env.server.set_permission("nobody", "none")
    assert writes_for(env, "nobody") == 0


def test_an_account_with_read_gets_a_bounded_number_of_writes(env):
    budget = BotPolicy().rate_limit.max_writes
    assert 0 < budget <= 12
    assert writes_for(env, env.server.outsider) <= budget  # "read" on this repository


def test_collaborators_are_answered(env):
    assert writes_for(env, "alice", ["/help"] * 5) == 5 * 3  # eyes, rocket, the reply


def test_the_write_budget_slides_and_survives_a_restart(tmp_path):
    from bot.commands.auth import RateLimiter, write_budget
    from bot.forge.base import Permission

    policy = BotPolicy()
    assert write_budget(policy, Permission.NONE) == 0
    assert write_budget(policy, Permission.READ) == policy.rate_limit.max_writes
    assert write_budget(policy, Permission.WRITE) >= 3 * policy.rate_limit.max_commands
    db = tmp_path / "rate.sqlite3"
    assert all(RateLimiter(db).take_writes("Eve", 3, 9, 3600, now=1000.0 + i) for i in range(3))
    assert not RateLimiter(db).take_writes("eve", 3, 9, 3600, now=1010.0)  # the same account, any case
    assert RateLimiter(db).take_writes("eve", 3, 9, 3600, now=1000.0 + 3601)  # the first answer left the window
