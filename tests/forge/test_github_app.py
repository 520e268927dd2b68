"""GitHub App authentication: a real RSA key, JWTs verified by the fake, installation tokens."""

from __future__ import annotations

import pytest

from bot.forge.base import ForgeError, ForgePermissionError
from bot.forge.github import GitHubForge

APP_ID = 31337
INSTALLATION = 4242


def app_forge(server, private_key: str, **kwargs) -> GitHubForge:
    kwargs.setdefault("sleep", lambda s: None)
    return GitHubForge(server.full_name, app_id=APP_ID, private_key=private_key, base_url=server.base_url,
                       seconds_between_requests=None, seconds_between_writes=None, backoff=0.0, **kwargs)


def test_app_auth_installation_token_and_identity(github_server, github_app_key):
    private, public = github_app_key
    github_server.register_app(APP_ID, public, slug="kbot", installation_id=INSTALLATION)
    forge = app_forge(github_server, private)
    assert forge.info.bot_login == "kbot[bot]" and forge.info.supports_check_runs
    assert forge.installation_id == INSTALLATION
    _, main = forge.default_head()
    sha = forge.commit_files("kbot/gemm/n1", main, {"kernels/gemm/n1/k.py": "K = 1\n"}, "candidate")
    # Written as the App's bot account, so the bot recognizes the branch as its own.
    assert forge.branch_touched_by_humans("kbot/gemm/n1") == []
    pr = forge.open_pr("kbot/gemm/n1", "gemm: n1", "body")
    assert pr.author == "kbot[bot]"
    paths = [(m, p) for m, p, s in github_server.requests]
    assert ("POST", f"/app/installations/{INSTALLATION}/access_tokens") in paths
    assert ("GET", f"/repos/{github_server.full_name}/installation") in paths
    assert sha == forge.get_pr(pr.number).head_sha


def test_check_runs_with_app(github_server, github_app_key):
    private, public = github_app_key
    github_server.register_app(APP_ID, public, installation_id=INSTALLATION)
    forge = app_forge(github_server, private, installation_id=INSTALLATION)
    _, main = forge.default_head()
    run = forge.create_check_run(main, "kbot/harness", title="Benchmarking", summary="queued on h200")
    assert run.status == "in_progress" and run.conclusion is None
    done = forge.update_check_run(run.id, conclusion="success", title="1.8x", summary="all workloads passed")
    assert done.status == "completed" and done.conclusion == "success" and done.title == "1.8x"
    # Creating it again (a retried job) updates the same run instead of adding a second one.
    again = forge.create_check_run(main, "kbot/harness", conclusion="failure", title="re-run", summary="x")
    assert again.id == run.id and again.conclusion == "failure"
    assert len(github_server.check_runs) == 1


def test_check_run_create_survives_5xx_after_create(github_server, github_app_key):
    private, public = github_app_key
    github_server.register_app(APP_ID, public, installation_id=INSTALLATION)
    forge = app_forge(github_server, private, installation_id=INSTALLATION)
    _, main = forge.default_head()
    github_server.fail_next("POST", r"/check-runs$", status=502, after=True)
    forge.create_check_run(main, "kbot/harness", title="t", summary="s")
    assert len(github_server.check_runs) == 1


def test_jwt_signed_with_another_key_is_refused(github_server, github_app_key):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    _, public = github_app_key
    github_server.register_app(APP_ID, public, installation_id=INSTALLATION)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    with pytest.raises(ForgePermissionError):
        app_forge(github_server, other)


def test_wrong_installation_is_refused(github_server, github_app_key):
    private, public = github_app_key
    github_server.register_app(APP_ID, public, installation_id=INSTALLATION)
    forge = app_forge(github_server, private, installation_id=999)
    with pytest.raises(ForgeError):
        forge.default_branch()


def test_constructor_validates_arguments(github_server):
    with pytest.raises(ForgeError):
        GitHubForge("no-slash", token="x", base_url=github_server.base_url)
    with pytest.raises(ForgeError):
        GitHubForge(github_server.full_name, base_url=github_server.base_url)
    with pytest.raises(ForgeError):
        GitHubForge(github_server.full_name, app_id=1, base_url=github_server.base_url)
    with pytest.raises(ForgeError):
        GitHubForge.from_env({"GITHUB_REPOSITORY": github_server.full_name})


def test_installation_token_as_plain_token_needs_bot_login(github_server, github_app_key):
    """The Actions GITHUB_TOKEN is an installation token: /user is refused, so the login must be given."""
    import github

    private, public = github_app_key
    github_server.register_app(APP_ID, public, slug="kbot", installation_id=INSTALLATION)
    integration = github.GithubIntegration(auth=github.Auth.AppAuth(APP_ID, private), base_url=github_server.base_url)
    token = integration.get_access_token(INSTALLATION).token
    with pytest.raises(ForgeError, match="bot_login"):
        GitHubForge(github_server.full_name, token=token, base_url=github_server.base_url)
    env = {"GITHUB_REPOSITORY": github_server.full_name, "GITHUB_API_URL": github_server.base_url,
           "GITHUB_TOKEN": token, "KBOT_BOT_LOGIN": "kbot[bot]"}
    forge = GitHubForge.from_env(env, seconds_between_requests=None, seconds_between_writes=None)
    assert forge.info.bot_login == "kbot[bot]" and not forge.info.supports_check_runs
    _, main = forge.default_head()
    forge.commit_files("kbot/x/n1", main, {"a.txt": "a"}, "via installation token")
    assert forge.branch_touched_by_humans("kbot/x/n1") == []
    actions = dict(env, GITHUB_ACTIONS="true")
    del actions["KBOT_BOT_LOGIN"]
    assert GitHubForge.from_env(actions).info.bot_login == "github-actions[bot]"


def test_from_env_with_app_key_file(github_server, github_app_key, tmp_path):
    private, public = github_app_key
    github_server.register_app(APP_ID, public, slug="kbot", installation_id=INSTALLATION)
    key = tmp_path / "app.pem"
    key.write_text(private)
    env = {"GITHUB_REPOSITORY": github_server.full_name, "GITHUB_API_URL": github_server.base_url,
           "KBOT_APP_ID": str(APP_ID), "KBOT_APP_PRIVATE_KEY_FILE": str(key)}
    forge = GitHubForge.from_env(env, seconds_between_requests=None, seconds_between_writes=None)
    assert forge.info.bot_login == "kbot[bot]" and forge.installation_id == INSTALLATION
