"""As a GitHub App (real RSA key, JWTs verified by the fake): the report adds a check run next to the
commit status; and the CLI entry points the lead wires (`register(cli)`)."""

from __future__ import annotations

import json

from candkit import bot_candidate
from click.testing import CliRunner
from reportkit import good

from bot.forge.github import GitHubForge
from bot.review.publish import publish_results

APP_ID = 4711
INSTALLATION = 99


def test_publish_as_app_creates_check_run(github_server, github_app_key):
    private, public = github_app_key
    github_server.register_app(APP_ID, public, slug="kbot", installation_id=INSTALLATION)
    forge = GitHubForge(github_server.full_name, app_id=APP_ID, private_key=private, base_url=github_server.base_url,
                        seconds_between_requests=None, seconds_between_writes=None, backoff=0.0, sleep=lambda s: None)
    assert forge.info.supports_check_runs
    _, main = forge.default_head()
    pr = bot_candidate(forge, "d", "n1")
    out = publish_results(forge, pr.number, pr.head_sha, report=good(definition="d"), promote=False)
    assert out.state == "success"
    runs = [c for c in github_server.check_runs.values() if c["head_sha"] == pr.head_sha]
    assert len(runs) == 1 and runs[0]["name"] == "kbot/harness" and runs[0]["conclusion"] == "success"
    # a re-run updates the same check run and review
    publish_results(forge, pr.number, pr.head_sha, report=good(definition="d"), promote=False)
    assert len([c for c in github_server.check_runs.values() if c["head_sha"] == pr.head_sha]) == 1
    assert len(github_server.reviews_on(pr.number)) == 1


def cli():
    import click

    from bot.cli.github_bot import register

    @click.group()
    def root() -> None:
        pass

    register(root)
    return root


def test_cli_review_decide_leaderboard(tmp_path):
    rep = tmp_path / "r.json"
    good().dump(rep)
    r = CliRunner().invoke(cli(), ["bot", "review", str(rep)])
    assert r.exit_code == 0 and "<!-- kbot:review -->" in r.output
    r = CliRunner().invoke(cli(), ["bot", "decide", str(rep), "--champion-hash", "b" * 64])
    assert r.exit_code == 0 and json.loads(r.output)["action"] == "promote"
    r = CliRunner().invoke(cli(), ["bot", "decide", str(rep), "--champion-hash", "b" * 64, "--behind"])
    assert r.exit_code == 1 and json.loads(r.output)["action"] == "rebenchmark"
    champ = tmp_path / "champion.json"
    champ.write_text(json.dumps({"definition": "d", "solution": "v1", "solution_hash": "1" * 64, "history": []}))
    r = CliRunner().invoke(cli(), ["bot", "leaderboard", str(champ)])
    assert r.exit_code == 0 and "# Leaderboard: d" in r.output


def test_cli_refuses_bad_input(tmp_path, monkeypatch):
    monkeypatch.delenv("KBOT_WEBHOOK_SECRET", raising=False)
    monkeypatch.delenv("KBOT_WEBHOOK_SECRET_OLD", raising=False)
    r = CliRunner().invoke(cli(), ["serve", "--state-dir", str(tmp_path / "s")])
    assert r.exit_code != 0 and "KBOT_WEBHOOK_SECRET" in str(r.exception or r.output)
    (tmp_path / "res").mkdir()
    r = CliRunner().invoke(cli(), ["bot", "report", "--results", str(tmp_path / "res"), "--head-sha", "xyz", "--pr", "1"])
    assert r.exit_code == 2 and "40-character" in r.output
