"""A faithful local GitHub REST server for tests, and the pytest fixtures that start it.

Use from any test package::

    # tests/<area>/conftest.py
    from fakes.github_server import github_server, github_app_key  # noqa: F401  (fixtures)

    def test_x(github_server):
        gh = github.Github(base_url=github_server.base_url, auth=github.Auth.Token(github_server.bot_token))
        github_server.set_permission("alice", "write")
        github_server.fail_next("POST", r"/issues/\\d+/comments$", status=502, after=True)
        ...

``github_server`` yields a started ``FakeGitHub`` (see ``fakes/github/server.py``) with

* ``base_url`` (``http://127.0.0.1:<port>``), ``full_name`` (``kbot-org/kernels``), ``repo_path`` (the bare
  git repository: ``git clone`` it), ``default_branch`` (``main``, holding an initial commit);
* accounts: ``owner`` (the org), ``bot_login``/``bot_token`` (a ``kbot-bot`` user with write access, for
  token auth), ``maintainer``/``maintainer_token`` (admin), ``outsider``/``outsider_token`` (no role);
* setup and fault scripting: ``add_user``, ``set_permission``, ``add_team_member``, ``register_app``,
  ``push_commit`` (a person's push), ``add_comment`` (a person's comment), ``create_issue``,
  ``fail_next(method, path_regex, status, n, after=False)``, ``rate_limit_next``, ``mergeable_pending``,
  ``after_update`` (a hook run right after an "Update branch" merge, e.g. a person's push);
* ``requests`` (method, path, status) and ``validation_errors``.

At teardown the fixture fails the test if any response did not validate against GitHub's OpenAPI
description (``shared/github/rest-api.openapi.json``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Relative imports: this module works as `fakes.github_server` (tests/ on sys.path) and as
# `tests.fakes.github_server` (repository root on sys.path, pytest's importlib mode).
from .github.openapi import load_spec  # noqa: F401  (re-exported)
from .github.server import FakeGitHub, HTTPError  # noqa: F401  (re-exported)

__all__ = ["FakeGitHub", "HTTPError", "github_server", "github_app_key", "make_server", "spec_path"]


def spec_path() -> Path:
    shared = Path(os.environ.get("KBOT_SHARED", Path(__file__).resolve().parents[2].parent / "shared"))
    return shared / "github" / "rest-api.openapi.json"


def make_server(root: Path, **kwargs) -> FakeGitHub:
    """A configured, not yet started server with the standard accounts (see module docstring)."""
    server = FakeGitHub(root, spec_path=spec_path(), **kwargs)
    server.bot_login = "kbot-bot"
    server.bot_token = server.add_user("kbot-bot", permission="write")
    server.maintainer = "maint"
    server.maintainer_token = server.add_user("maint", permission="admin")
    server.outsider = "stranger"
    server.outsider_token = server.add_user("stranger")
    server.owner = server.owner_login
    return server


@pytest.fixture
def github_server(tmp_path):
    if not spec_path().is_file():
        pytest.skip(f"GitHub OpenAPI description not found at {spec_path()} (set KBOT_SHARED)")
    server = make_server(tmp_path / "github")
    server.start()
    try:
        yield server
    finally:
        server.stop()
    errors = list(server.validation_errors)
    assert not errors, "fake GitHub answered outside the OpenAPI description:\n" + "\n".join(errors[:30])


@pytest.fixture(scope="session")
def github_app_key():
    """(private_pem, public_pem) of a fresh 2048-bit RSA key for GitHub App JWTs."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


def main(argv: list[str] | None = None) -> int:
    """Run the fake by hand: ``.venv/bin/python -m tests.fakes.github_server --dir /tmp/fakegh``."""
    import argparse
    import signal
    import threading

    parser = argparse.ArgumentParser(description="Local GitHub REST fake (one repository, real git).")
    parser.add_argument("--dir", type=Path, required=True, help="where the bare repository is created")
    parser.add_argument("--no-validate", action="store_true", help="skip OpenAPI validation of responses")
    args = parser.parse_args(argv)
    server = make_server(args.dir, validate=not args.no_validate)
    server.start()
    print(f"base_url   {server.base_url}\nrepository {server.full_name} ({server.repo_path})\n"
          f"bot        {server.bot_login} token {server.bot_token}\n"
          f"maintainer {server.maintainer} token {server.maintainer_token}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    stop.wait()
    server.stop()
    for problem in server.validation_errors:
        print("OpenAPI:", problem)
    return 1 if server.validation_errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
