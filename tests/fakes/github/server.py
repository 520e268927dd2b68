"""A stateful local GitHub REST server backed by a real bare git repository.

It serves one repository (``owner/name``) plus the few org/app endpoints the bot uses, on
127.0.0.1 with a random port, through the stdlib ``ThreadingHTTPServer``. Every response body is
validated against GitHub's OpenAPI description; problems are collected in ``validation_errors`` (the
pytest fixture fails the test if any remain).

Scriptable faults: ``fail_next`` (5xx or any status on the next N requests matching a route, either
before the request takes effect or *after* it did, like a gateway timeout after a commit),
``rate_limit_next`` (secondary rate limit 403/429 with ``Retry-After``), ``mergeable_pending``
(``mergeable: null`` while "GitHub computes it").
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

from . import builders as B
from .gitstore import GitStore, Person, TreeEntry

PERMISSIONS = ["none", "read", "triage", "write", "maintain", "admin"]
# Legacy ``permission`` field of the collaborator-permission endpoint (role_name holds the real role).
LEGACY_PERMISSION = {"none": "none", "read": "read", "triage": "read", "write": "write", "maintain": "write",
                     "admin": "admin"}
SECONDARY_LIMIT_MESSAGE = ("You have exceeded a secondary rate limit. Please wait a few minutes before you "
                           "try again. If you reach out to GitHub Support for help, please include the request ID.")
CONTENTS_INLINE_LIMIT = 1024 * 1024  # bytes the contents API inlines; larger files need the blob API
BODY_LIMIT = 65536  # characters GitHub accepts in a PR body, comment or review
REACTIONS = {"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}
SLASHY_PARAMS = {"ref", "path", "branch", "basehead"}  # GitHub accepts '/' inside these


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class HTTPError(Exception):
    def __init__(self, status: int, message: str, errors: list | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.errors, self.headers = status, message, errors, headers or {}


@dataclass
class Account:
    login: str
    id: int
    kind: str            # User, Bot, Organization
    email: str
    name: str

    def obj(self) -> dict:
        return B.user(self.login, self.id, self.kind)


@dataclass
class Caller:
    account: Account | None
    installation: int | None = None   # set for App installation tokens
    app: bool = False                 # authenticated with the App's JWT
    app_id: int | None = None


@dataclass
class Fault:
    method: str
    pattern: re.Pattern
    status: int
    remaining: int
    after: bool           # apply the request, then answer with the error
    message: str = "Server Error"
    headers: dict = field(default_factory=dict)


@dataclass
class Route:
    method: str
    template: str          # the OpenAPI path template (validation looks it up)
    regex: re.Pattern
    handler: Callable


class FakeGitHub:
    """State and request dispatch. Start it with ``start()`` (or use it as a context manager)."""

    def __init__(self, root: Path, *, owner: str = "kbot-org", name: str = "kernels", default_branch: str = "main",
                 spec_path: str | Path | None = None, validate: bool = True, path_prefix: str = ""):
        self.root = Path(root)
        self.git = GitStore(self.root / f"{name}.git", default_branch)
        self.owner_login, self.name, self.default_branch = owner, name, default_branch
        self.full_name = f"{owner}/{name}"
        # GitHub Enterprise serves the API under /api/v3; clients must then carry it in base_url.
        self.path_prefix = "/" + path_prefix.strip("/") if path_prefix.strip("/") else ""
        self.lock = threading.RLock()
        self._ids = iter(range(1000, 10**9))
        self.accounts: dict[str, Account] = {}
        self.tokens: dict[str, Caller] = {}
        self.permissions: dict[str, str] = {}
        self.teams: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}   # (org, slug) -> user -> (state, role)
        self.apps: dict[int, dict] = {}
        self.installations: dict[int, int] = {}                               # installation id -> app id
        self.issues: dict[int, dict] = {}                                     # number -> issue/PR record
        self.pulls: dict[int, dict] = {}
        self.comments: dict[int, dict] = {}
        self.reviews: dict[int, dict] = {}
        self.labels: dict[str, dict] = {}
        self.statuses: dict[str, list[dict]] = {}
        self.check_runs: dict[int, dict] = {}
        self.dispatches: list[dict] = []                                      # workflow_dispatch events received
        self.faults: list[Fault] = []
        self.mergeable_pending_count: dict[int, int] = {}
        # Like GitHub, report ``mergeable: null`` on this many reads after a PR opens or its head moves
        # (0: always known at once). Tests of code that must wait for it set it to 1 or 2.
        self.mergeable_lag = 0
        self.after_update: Any = None  # h_update_branch's hook: called once with (PR number, merge sha)
        self.requests: list[tuple[str, str, int]] = []
        self.validation_errors: list[str] = []
        self.request_errors: list[str] = []          # requests GitHub would refuse (answered 422)
        self.rate_used: dict[str, int] = {}
        self.rate_limit = 5000
        self.rate_reset = int(time.time()) + 3600
        self.created_at = now_iso()
        owner_acct = self.add_account(owner, kind="Organization")
        self.repo_id = next(self._ids)
        self.spec = None
        if validate:
            from .openapi import load_spec

            default_spec = Path(__file__).resolve().parents[3].parent / "shared/github/rest-api.openapi.json"
            self.spec = load_spec(str(spec_path or default_spec))
        self.routes = self._routes()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        # An initial commit so the default branch exists, as on a repository created with a README.
        self.push_commit(default_branch, {"README.md": f"# {name}\n"}, author=owner_acct.login, message="Initial commit")

    # ------------------------------------------------------------------------------------------
    # Setup API for tests
    # ------------------------------------------------------------------------------------------
    def add_account(self, login: str, *, kind: str = "User", email: str | None = None, name: str | None = None) -> Account:
        with self.lock:
            if login in self.accounts:
                return self.accounts[login]
            uid = next(self._ids)
            acct = Account(login, uid, kind, email or f"{uid}+{login}@users.noreply.github.com", name or login)
            self.accounts[login] = acct
            return acct

    def add_user(self, login: str, *, permission: str | None = None, kind: str = "User", email: str | None = None) -> str:
        """Create an account and return a personal access token for it."""
        acct = self.add_account(login, kind=kind, email=email)
        if permission is not None:
            self.set_permission(login, permission)
        token = f"ghp_{secrets.token_hex(18)}"
        self.tokens[token] = Caller(acct)
        return token

    def set_permission(self, user: str, permission: str) -> None:
        if permission not in PERMISSIONS:
            raise ValueError(f"permission must be one of {PERMISSIONS}, not {permission!r}")
        self.add_account(user)
        self.permissions[user] = permission

    def add_team_member(self, org: str, team: str, user: str, *, state: str = "active", role: str = "member") -> None:
        self.add_account(user)
        self.teams.setdefault((org, team), {})[user] = (state, role)

    def register_app(self, app_id: int, public_key_pem: bytes | str, *, slug: str = "kbot",
                     installation_id: int = 4242, permission: str = "write") -> Account:
        """A GitHub App whose JWTs are verified with ``public_key_pem``; returns its bot account."""
        bot = self.add_account(f"{slug}[bot]", kind="Bot",
                               email=f"{app_id}+{slug}[bot]@users.noreply.github.com", name=f"{slug}[bot]")
        self.apps[app_id] = {"id": app_id, "slug": slug, "name": slug, "key": public_key_pem,
                             "created_at": now_iso(), "bot": bot.login}
        self.installations[installation_id] = app_id
        self.permissions[bot.login] = permission
        return bot

    def fail_next(self, method: str, path_regex: str, status: int = 502, n: int = 1, *, after: bool = False,
                  message: str = "Server Error") -> None:
        """The next ``n`` requests ``method`` whose path matches ``path_regex`` (``re.search``) fail.

        ``after=True`` lets the request take effect first (the client still sees the failure), which is
        what makes a blindly retried POST create duplicates.
        """
        if not 400 <= status <= 599 or n < 1:
            raise ValueError(f"fail_next needs an error status (400-599) and n >= 1, got {status}, {n}")
        self.faults.append(Fault(method.upper(), re.compile(path_regex), status, n, after, message))

    def rate_limit_next(self, n: int = 1, *, status: int = 403, retry_after: int = 0, method: str = ".*",
                        path_regex: str = ".*") -> None:
        """Secondary rate limit on the next ``n`` matching requests (403 or 429, with Retry-After)."""
        fault = Fault(method.upper() if method != ".*" else "*", re.compile(path_regex), status, n, False,
                      SECONDARY_LIMIT_MESSAGE, {"Retry-After": str(retry_after)})
        self.faults.append(fault)

    def set_rate_limit(self, remaining: int, *, limit: int = 5000, reset_in: int = 3600) -> None:
        """Primary rate limit: every caller has ``remaining`` requests left until ``reset_in`` seconds from now."""
        self.rate_limit = limit
        self.rate_used = {k: limit - remaining for k in list(self.rate_used) + ["anonymous"]}
        self._rate_default_used = limit - remaining
        self.rate_reset = int(time.time()) + reset_in

    def mergeable_pending(self, number: int, n: int = 1) -> None:
        """The next ``n`` reads of PR ``number`` report ``mergeable: null`` (still computing)."""
        self.mergeable_pending_count[number] = n

    def push_commit(self, branch: str, files: dict[str, bytes | str | None], *, author: str, message: str = "update",
                    parent: str | None = None, posing_as: str | None = None) -> str:
        """What a ``git push`` by ``author`` does: one commit on ``branch`` (created from the default branch).
        ``posing_as``: the commit's author and committer carry that account's name and e-mail instead
        (``git -c user.email=...``: git lets anyone write any identity, and GitHub attributes by e-mail)."""
        with self.lock:
            acct = self.add_account(author)
            if posing_as is not None:
                acct = self.accounts[posing_as]
            ref = f"refs/heads/{branch}"
            parent = parent or self.git.ref_sha(ref) or self.git.ref_sha(f"refs/heads/{self.default_branch}")
            base_tree = self.git.read_commit(parent).tree if parent else None
            changes: dict[str, TreeEntry | None] = {}
            for path, content in files.items():
                if content is None:
                    changes[path] = None
                else:
                    data = content.encode() if isinstance(content, str) else content
                    changes[path] = TreeEntry("100644", "blob", self.git.write_blob(data), path)
            tree = self.git.build_tree(base_tree, changes)
            person = Person(acct.name, acct.email, now_iso())
            sha = self.git.commit_tree(tree, [parent] if parent else [], message, person, person)
            self.git.update_ref(ref, sha)
            return sha

    def open_fork_pr(self, fork_owner: str, branch: str, files: dict[str, bytes | str | None], *, author: str,
                     title: str, body: str = "") -> int:
        """What a person does from a fork: push ``branch`` to ``fork_owner``'s copy and open a PR here. As
        on GitHub, the head commit is stored in this repository under ``refs/pull/<n>/head`` (no branch of
        this repository moves) and the PR's head repository is the fork."""
        with self.lock:
            acct = self.add_account(author)
            self.add_account(fork_owner)
            base_sha = self.git.ref_sha(f"refs/heads/{self.default_branch}")
            number = self._new_issue(title, body, acct, is_pull=True)["number"]
            sha = self._fork_commit(number, base_sha, files, acct, "submission")
            stamp = now_iso()
            self.pulls[number] = {
                "id": next(self._ids), "number": number, "title": title, "body": body, "user": acct.obj(),
                "head_ref": branch, "head_sha": sha, "base_ref": self.default_branch, "base_sha": base_sha,
                "state": "open", "draft": False, "created_at": stamp, "updated_at": stamp, "closed_at": None,
                "merged_at": None, "merge_commit_sha": None, "merged": False, "merged_by": None,
                "fork": fork_owner}
            return number

    def push_fork_commit(self, number: int, files: dict[str, bytes | str | None], *, author: str, message: str = "update") -> str:
        """A new commit on a fork PR's head (the person pushed to their fork)."""
        with self.lock:
            pr = self.pulls[number]
            sha = self._fork_commit(number, pr["head_sha"], files, self.add_account(author), message)
            pr.update(head_sha=sha, updated_at=now_iso())
            return sha

    def _fork_commit(self, number: int, parent: str, files: dict[str, bytes | str | None], acct: Account, message: str) -> str:
        base_tree = self.git.read_commit(parent).tree
        changes: dict[str, TreeEntry | None] = {}
        for path, content in files.items():
            data = None if content is None else (content.encode() if isinstance(content, str) else content)
            changes[path] = None if data is None else TreeEntry("100644", "blob", self.git.write_blob(data), path)
        person = Person(acct.name, acct.email, now_iso())
        sha = self.git.commit_tree(self.git.build_tree(base_tree, changes), [parent], message, person, person)
        self.git.update_ref(f"refs/pull/{number}/head", sha)
        return sha

    def create_issue(self, title: str, *, author: str, body: str = "") -> int:
        with self.lock:
            return self._new_issue(title, body, self.add_account(author), is_pull=False)["number"]

    def _new_issue(self, title: str, body: str | None, author: Account, *, is_pull: bool) -> dict:
        number = len(self.issues) + 1
        stamp = now_iso()
        self.issues[number] = {"number": number, "id": next(self._ids), "title": title, "body": body,
                               "is_pull": is_pull, "user": author.login, "labels": [], "state": "open",
                               "created_at": stamp, "updated_at": stamp, "closed_at": None}
        return self.issues[number]

    def comments_on(self, number: int) -> list[dict]:
        return [c for c in self.comments.values() if c["issue"] == number]

    def reviews_on(self, number: int) -> list[dict]:
        return [r for r in self.reviews.values() if r["pull"] == number]

    @property
    def repo_path(self) -> Path:
        return self.git.path

    @property
    def clone_url(self) -> str:
        return self.git.path.as_uri()

    # ------------------------------------------------------------------------------------------
    # HTTP plumbing
    # ------------------------------------------------------------------------------------------
    def start(self) -> "FakeGitHub":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in separate writes

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, headers, payload = server.handle(self.command, self.path, dict(self.headers), body)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

            def log_message(self, *args: Any) -> None:  # quiet: tests read server.requests instead
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-github", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        self.git.close()

    def __enter__(self) -> "FakeGitHub":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}{self.path_prefix}"

    def _rewrite(self, value: Any) -> Any:
        """api.github.com → our base URL in URL fields (PyGithub refuses URLs of another host)."""
        if isinstance(value, dict):
            return {k: (v.replace(B.API, self.base_url) if isinstance(v, str) and (k.endswith("url") or k == "href")
                        else self._rewrite(v)) for k, v in value.items()}
        if isinstance(value, list):
            return [self._rewrite(v) for v in value]
        return value

    def handle(self, method: str, raw_path: str, headers: dict, body: bytes) -> tuple[int, dict, bytes]:
        split = urllib.parse.urlsplit(raw_path)
        path = urllib.parse.unquote(split.path)
        if self.path_prefix:
            path = path[len(self.path_prefix):] if path.startswith(self.path_prefix + "/") else "/\0outside-prefix"
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(split.query, keep_blank_values=True).items()}
        out_headers = {"Content-Type": "application/json; charset=utf-8", "X-GitHub-Media-Type": "github.v3"}
        template = None
        with self.lock:
            try:
                route, params = self._route(method, path)
                template = route.template if route else None
                fault = self._take_fault(method, path)
                if fault and not fault.after:
                    raise HTTPError(fault.status, fault.message, headers=fault.headers)
                if route is None:
                    raise HTTPError(404, "Not Found")
                caller = self._authenticate(headers, path)
                rate = self._rate_headers(caller)
                out_headers.update(rate)
                if int(rate["X-RateLimit-Used"]) > self.rate_limit:
                    who = caller.account.id if caller.account else 0
                    raise HTTPError(403, f"API rate limit exceeded for user ID {who}.")
                try:
                    data = json.loads(body) if body else {}
                except ValueError:
                    raise HTTPError(400, "Problems parsing JSON") from None
                if not isinstance(data, dict) and route.handler != self.h_add_labels:
                    raise HTTPError(422, "Invalid request.\n\nA JSON object is required.")
                # The description's schema lists only {"labels": [...]}, but its own text (and GitHub)
                # accepts a bare array of names, which is what PyGithub sends.
                bare_labels = route.handler == self.h_add_labels and isinstance(data, list)
                if self.spec is not None and body and not bare_labels:
                    # GitHub checks request bodies against the same description before acting.
                    problems = self.spec.validate_request(method, route.template, data)
                    if problems:
                        self.request_errors.append(f"{method} {path}: " + "; ".join(problems))
                        raise HTTPError(422, "Invalid request.\n\n" + "\n".join(problems))
                status, payload, extra = route.handler(caller, params, query, data)
                out_headers.update(extra)
                if fault:  # it took effect; now the client sees a failure anyway
                    raise HTTPError(fault.status, fault.message, headers=fault.headers)
            except HTTPError as err:
                status, payload = err.status, B.error(err.message, err.status, err.errors)
                out_headers.update(err.headers)
            except Exception:  # a bug in the fake: answer 500 and make the test fail at teardown
                import traceback

                status, payload = 500, B.error("Server Error", 500)
                self.validation_errors.append(f"{method} {path}: fake server crashed:\n{traceback.format_exc()}")
            self.requests.append((method, path, status))
            self._validate(method, path, template, status, payload)
            encoded = b"" if payload is None else json.dumps(self._rewrite(payload)).encode()
            if "Link" in out_headers:
                out_headers["Link"] = out_headers["Link"].replace(B.API, self.base_url)
            return status, out_headers, encoded

    def _validate(self, method: str, path: str, template: str | None, status: int, payload: Any) -> None:
        if self.spec is None or template is None:
            return
        if not self.spec.template_matches(template, path):  # the route table disagrees with the description
            self.validation_errors.append(f"{method} {path}: served as {template}, which does not match it")
        problems = self.spec.validate(method, path, status, payload, template=template)
        # GitHub answers 401/403/404/422/5xx on any route, though the description lists them only on some:
        # such undocumented errors must still be GitHub's standard error object.
        if problems and status >= 400 and any("does not document status" in p for p in problems):
            problems = [f"{method} {path} -> {status}: {e.message}"
                        for e in self.spec.error_validator().iter_errors(payload)]
        self.validation_errors.extend(problems)

    def _take_fault(self, method: str, path: str) -> Fault | None:
        for f in self.faults:
            if f.remaining > 0 and f.method in (method, "*") and f.pattern.search(path):
                f.remaining -= 1
                return f
        return None

    def _route(self, method: str, path: str) -> tuple[Route | None, dict]:
        for r in self.routes:
            if r.method == method:
                m = r.regex.match(path)
                if m:
                    return r, m.groupdict()
        return None, {}

    def _authenticate(self, headers: dict, path: str) -> Caller:
        auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        scheme, _, cred = auth.partition(" ")
        if not cred:
            return Caller(None)
        if path.startswith("/app") or path.endswith("/installation"):
            return self._authenticate_jwt(cred)
        caller = self.tokens.get(cred)
        if caller is None:
            raise HTTPError(401, "Bad credentials")
        if caller.installation is not None and caller.account is None:
            raise HTTPError(401, "Bad credentials")
        return caller

    def _authenticate_jwt(self, token: str) -> Caller:
        import jwt

        try:
            claims = jwt.decode(token, options={"verify_signature": False})
            app = self.apps.get(int(claims.get("iss", -1)))
            if app is None:
                raise HTTPError(401, "'Issuer' claim ('iss') must be an Integer")
            verified = jwt.decode(token, app["key"], algorithms=["RS256"],
                                  options={"require": ["exp", "iat", "iss"]}, leeway=60)
            if verified["exp"] - verified["iat"] > 660:  # GitHub: at most 10 minutes (+ clock drift)
                raise HTTPError(401, "'Expiration time' claim ('exp') is too far in the future")
        except jwt.PyJWTError as exc:
            raise HTTPError(401, f"A JSON web token could not be decoded ({exc})") from None
        except ValueError:
            raise HTTPError(401, "A JSON web token could not be decoded") from None
        return Caller(None, app=True, app_id=app["id"])

    def _rate_headers(self, caller: Caller) -> dict:
        key = caller.account.login if caller.account else "anonymous"
        used = self.rate_used[key] = self.rate_used.get(key, getattr(self, "_rate_default_used", 0)) + 1
        reset = self.rate_reset
        return {"X-RateLimit-Limit": str(self.rate_limit), "X-RateLimit-Remaining": str(max(0, self.rate_limit - used)),
                "X-RateLimit-Used": str(used), "X-RateLimit-Reset": str(reset), "X-RateLimit-Resource": "core"}

    # ------------------------------------------------------------------------------------------
    # Helpers for handlers
    # ------------------------------------------------------------------------------------------
    def _routes(self) -> list[Route]:
        R = "/repos/{owner}/{repo}"
        table = [
            ("GET", "/user", self.h_user),
            ("GET", "/app", self.h_app),
            ("POST", "/app/installations/{installation_id}/access_tokens", self.h_access_token),
            ("GET", R + "/installation", self.h_repo_installation),
            ("GET", "/orgs/{org}/teams/{team_slug}/memberships/{username}", self.h_team_membership),
            ("GET", R, self.h_repo),
            ("GET", R + "/git/ref/{ref}", self.h_get_ref),
            ("GET", R + "/git/matching-refs/{ref}", self.h_matching_refs),
            ("POST", R + "/git/refs", self.h_create_ref),
            ("PATCH", R + "/git/refs/{ref}", self.h_update_ref),
            ("DELETE", R + "/git/refs/{ref}", self.h_delete_ref),
            ("POST", R + "/git/blobs", self.h_create_blob),
            ("GET", R + "/git/blobs/{file_sha}", self.h_get_blob),
            ("POST", R + "/git/trees", self.h_create_tree),
            ("GET", R + "/git/trees/{tree_sha}", self.h_get_tree),
            ("POST", R + "/git/commits", self.h_create_commit),
            ("GET", R + "/git/commits/{commit_sha}", self.h_get_git_commit),
            ("GET", R + "/contents/{path}", self.h_contents),
            ("GET", R + "/branches", self.h_branches),
            ("GET", R + "/branches/{branch}", self.h_branch),
            ("GET", R + "/commits", self.h_commits),
            ("GET", R + "/commits/{ref}/status", self.h_combined_status),
            ("GET", R + "/commits/{ref}/check-runs", self.h_list_check_runs),
            ("GET", R + "/commits/{ref}", self.h_commit),
            ("GET", R + "/compare/{basehead}", self.h_compare),
            ("GET", R + "/pulls", self.h_list_pulls),
            ("POST", R + "/pulls", self.h_create_pull),
            ("GET", R + "/pulls/{pull_number}", self.h_get_pull),
            ("PATCH", R + "/pulls/{pull_number}", self.h_update_pull),
            ("PUT", R + "/pulls/{pull_number}/merge", self.h_merge),
            ("PUT", R + "/pulls/{pull_number}/update-branch", self.h_update_branch),
            ("POST", R + "/merges", self.h_merges),
            ("GET", R + "/pulls/{pull_number}/reviews", self.h_list_reviews),
            ("POST", R + "/pulls/{pull_number}/reviews", self.h_create_review),
            ("PUT", R + "/pulls/{pull_number}/reviews/{review_id}", self.h_update_review),
            ("GET", R + "/issues/{issue_number}", self.h_get_issue),
            ("GET", R + "/issues/{issue_number}/comments", self.h_list_comments),
            ("POST", R + "/issues/{issue_number}/comments", self.h_create_comment),
            ("GET", R + "/issues/comments/{comment_id}", self.h_get_comment),
            ("PATCH", R + "/issues/comments/{comment_id}", self.h_update_comment),
            ("DELETE", R + "/issues/comments/{comment_id}", self.h_delete_comment),
            ("POST", R + "/issues/comments/{comment_id}/reactions", self.h_create_reaction),
            ("GET", R + "/issues/{issue_number}/labels", self.h_list_labels),
            ("POST", R + "/issues/{issue_number}/labels", self.h_add_labels),
            ("DELETE", R + "/issues/{issue_number}/labels/{name}", self.h_remove_label),
            ("POST", R + "/statuses/{sha}", self.h_create_status),
            ("POST", R + "/check-runs", self.h_create_check_run),
            ("PATCH", R + "/check-runs/{check_run_id}", self.h_update_check_run),
            ("GET", R + "/check-runs/{check_run_id}", self.h_get_check_run),
            ("GET", R + "/collaborators/{username}/permission", self.h_permission),
            ("GET", R + "/actions/workflows/{workflow_id}", self.h_workflow),
            ("POST", R + "/actions/workflows/{workflow_id}/dispatches", self.h_dispatch),
        ]
        routes = []
        for method, template, handler in table:
            parts = re.split(r"\{([^}]+)\}", template)
            rx = "".join(
                re.escape(p) if i % 2 == 0 else f"(?P<{p}>{'.+' if p in SLASHY_PARAMS else '[^/]+'})"
                for i, p in enumerate(parts))
            routes.append(Route(method, template, re.compile(f"^{rx}$"), handler))
        return routes

    def _check_repo(self, params: dict) -> None:
        if "owner" in params and (params["owner"].lower(), params["repo"].lower()) != \
                (self.owner_login.lower(), self.name.lower()):
            raise HTTPError(404, "Not Found")

    def _perm(self, caller: Caller) -> str:
        if caller.account is None:
            return "none"
        if caller.account.login == self.owner_login:
            return "admin"
        return self.permissions.get(caller.account.login, "read")

    def _require(self, caller: Caller, params: dict, level: str) -> None:
        self._check_repo(params)
        if caller.account is None:
            raise HTTPError(401, "Requires authentication")
        if PERMISSIONS.index(self._perm(caller)) < PERMISSIONS.index(level):
            raise HTTPError(403, "Resource not accessible by integration" if caller.installation is not None
                            else "Must have push access to repository")

    def _association(self, login: str) -> str:
        if login == self.owner_login:
            return "OWNER"
        perm = self.permissions.get(login)
        if perm in ("write", "maintain", "admin"):
            return "COLLABORATOR"
        return "NONE"

    @staticmethod
    def _check_body(body: Any, resource: str) -> None:
        if isinstance(body, str) and len(body) > BODY_LIMIT:
            raise HTTPError(422, "Validation Failed", [{
                "resource": resource, "field": "body", "code": "custom",
                "message": f"body is too long (maximum is {BODY_LIMIT} characters)"}])

    def _repo_obj(self, full: bool = False) -> dict:
        owner = self.accounts[self.owner_login].obj()
        return B.repository(owner, self.name, self.repo_id, self.default_branch, self.created_at, now_iso(), full=full)

    def _paginate(self, items: list, query: dict, path: str) -> tuple[list, dict]:
        try:
            per_page = min(max(int(query.get("per_page", 30)), 1), 100)
            page = max(int(query.get("page", 1)), 1)
        except ValueError:
            raise HTTPError(422, "Invalid pagination parameters") from None
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page: page * per_page]
        links = []

        def url(p: int) -> str:
            q = dict(query, page=str(p), per_page=str(per_page))
            return f"<{B.API}{path}?{urllib.parse.urlencode(q)}>"

        if page < last:
            links += [f'{url(page + 1)}; rel="next"', f'{url(last)}; rel="last"']
        if page > 1:
            links += [f'{url(1)}; rel="first"', f'{url(page - 1)}; rel="prev"']
        return chunk, ({"Link": ", ".join(links)} if links else {})

    def _commit_sha(self, rev: str) -> str:
        sha = self.git.resolve(rev) if re.fullmatch(r"[0-9a-f]{40}", rev) else (
            self.git.resolve(f"refs/heads/{rev}") or self.git.resolve(f"refs/tags/{rev}") or self.git.resolve(rev))
        if not sha:
            raise HTTPError(422 if re.fullmatch(r"[0-9a-f]{40}", rev) else 404, f"No commit found for SHA: {rev}")
        return sha

    def _account_by_email(self, email: str) -> dict | None:
        acct = next((a for a in self.accounts.values() if a.email.lower() == email.lower()), None)
        return acct.obj() if acct else None

    def _commit_obj(self, sha: str) -> dict:
        c = self.git.read_commit(sha)
        a = B.git_person(c.author.name, c.author.email, c.author.date)
        cm = B.git_person(c.committer.name, c.committer.email, c.committer.date)
        return B.commit(self.full_name, sha, c.tree, list(c.parents), a, cm, c.message,
                        self._account_by_email(c.author.email), self._account_by_email(c.committer.email))

    def _git_commit_obj(self, sha: str) -> dict:
        c = self.git.read_commit(sha)
        return B.git_commit(self.full_name, sha, c.tree, list(c.parents),
                            B.git_person(c.author.name, c.author.email, c.author.date),
                            B.git_person(c.committer.name, c.committer.email, c.committer.date), c.message)

    def _person(self, given: dict | None, caller: Caller, when: str) -> Person:
        if given:
            if not isinstance(given, dict) or not given.get("name") or not given.get("email"):
                raise HTTPError(422, "Invalid request.\n\n\"name\", \"email\" are required in author/committer")
            return Person(str(given["name"]), str(given["email"]), str(given.get("date") or when))
        acct = caller.account
        return Person(acct.name, acct.email, when)

    # ------------------------------------------------------------------------------------------
    # Users, apps, teams
    # ------------------------------------------------------------------------------------------
    def h_user(self, caller: Caller, params: dict, query: dict, data: Any):
        if caller.account is None or caller.installation is not None:
            raise HTTPError(401 if caller.account is None else 403,
                            "Requires authentication" if caller.account is None else
                            "Resource not accessible by integration")
        a = caller.account
        obj = dict(a.obj(), name=a.name, company=None, blog="", location=None, email=None, hireable=None, bio=None,
                   public_repos=0, public_gists=0, followers=0, following=0, created_at=self.created_at,
                   updated_at=self.created_at)
        return 200, obj, {}

    def _require_app(self, caller: Caller) -> dict:
        if not caller.app:
            raise HTTPError(401, "A JSON web token could not be decoded") from None
        return self.apps[caller.app_id]

    def h_app(self, caller: Caller, params: dict, query: dict, data: Any):
        app = self._require_app(caller)
        return 200, B.integration(app, self.accounts[self.owner_login].obj()), {}

    def h_access_token(self, caller: Caller, params: dict, query: dict, data: Any):
        app = self._require_app(caller)
        inst = int(params["installation_id"]) if params["installation_id"].isdigit() else -1
        if self.installations.get(inst) != app["id"]:
            raise HTTPError(404, "Not Found")
        token = f"ghs_{secrets.token_hex(18)}"
        self.tokens[token] = Caller(self.accounts[app["bot"]], installation=inst)
        expires = (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        perms = B.integration(app, {})["permissions"]
        return 201, {"token": token, "expires_at": expires, "permissions": perms,
                     "repository_selection": "selected"}, {}

    def h_repo_installation(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        app = self._require_app(caller)
        inst = next((i for i, a in self.installations.items() if a == app["id"]), None)
        if inst is None:
            raise HTTPError(404, "Not Found")
        owner = self.accounts[self.owner_login].obj()
        return 200, {
            "id": inst, "app_id": app["id"], "app_slug": app["slug"], "target_id": owner["id"],
            "target_type": "Organization", "account": owner, "single_file_name": None,
            "repository_selection": "selected", "access_tokens_url": f"{B.API}/app/installations/{inst}/access_tokens",
            "html_url": f"{B.WEB}/organizations/{self.owner_login}/settings/installations/{inst}",
            "repositories_url": f"{B.API}/installation/repositories", "events": ["issue_comment", "pull_request"],
            "permissions": B.integration(app, owner)["permissions"], "created_at": app["created_at"],
            "updated_at": app["created_at"], "suspended_by": None, "suspended_at": None,
        }, {}

    def h_team_membership(self, caller: Caller, params: dict, query: dict, data: Any):
        if caller.account is None:
            raise HTTPError(401, "Requires authentication")
        members = self.teams.get((params["org"], params["team_slug"]))
        if members is None or params["username"] not in members:
            raise HTTPError(404, "Not Found")
        state, role = members[params["username"]]
        url = f"{B.API}/orgs/{params['org']}/teams/{params['team_slug']}/memberships/{params['username']}"
        return 200, {"url": url, "role": role, "state": state}, {}

    def h_permission(self, caller: Caller, params: dict, query: dict, data: Any):
        self._require(caller, params, "read")
        login = params["username"]
        acct = self.accounts.get(login)
        if acct is None or acct.kind == "Organization":
            raise HTTPError(404, f"{login} is not a user")
        role = "admin" if login == self.owner_login else self.permissions.get(login, "read")
        collab = dict(acct.obj(), role_name=role)
        return 200, {"permission": LEGACY_PERMISSION[role], "role_name": role, "user": collab}, {}

    # ------------------------------------------------------------------------------------------
    # Repository, refs and git objects
    # ------------------------------------------------------------------------------------------
    def h_repo(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        return 200, self._repo_obj(full=True), {}

    def _ref_obj(self, ref: str, sha: str) -> dict:
        return B.git_ref(self.full_name, ref, sha, self.git.object_type(sha) or "commit")

    def h_get_ref(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        ref = "refs/" + params["ref"]
        sha = self.git.refs(ref).get(ref)
        if sha is None:
            raise HTTPError(404, "Not Found")
        return 200, self._ref_obj(ref, sha), {}

    def h_matching_refs(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        prefix = "refs/" + params["ref"]
        refs = [self._ref_obj(r, s) for r, s in sorted(self.git.refs("refs/").items()) if r.startswith(prefix)]
        return 200, refs, {}

    def h_create_ref(self, caller: Caller, params: dict, query: dict, data: Any):
        self._require(caller, params, "write")
        ref, sha = data.get("ref"), data.get("sha")
        if not isinstance(ref, str) or not ref.startswith("refs/") or ref.count("/") < 2 or ".." in ref:
            raise HTTPError(422, "Reference name is invalid" if isinstance(ref, str) else "Invalid request.")
        if not isinstance(sha, str) or self.git.object_type(sha) is None:
            raise HTTPError(422, "Object does not exist")
        if self.git.ref_sha(ref):
            raise HTTPError(422, "Reference already exists")
        self.git.update_ref(ref, sha, "0" * 40)
        return 201, self._ref_obj(ref, sha), {}

    def h_update_ref(self, caller: Caller, params: dict, query: dict, data: Any):
        self._require(caller, params, "write")
        ref = "refs/" + params["ref"]
        sha, force = data.get("sha"), bool(data.get("force", False))
        current = self.git.refs(ref).get(ref)
        if current is None:
            raise HTTPError(422, "Reference does not exist")
        if not isinstance(sha, str) or self.git.object_type(sha) != "commit":
            raise HTTPError(422, "Object does not exist")
        if not force and not self.git.is_ancestor(current, sha):
            raise HTTPError(422, "Update is not a fast forward")
        self.git.update_ref(ref, sha, current)
        self._touch_pulls_for(ref)
        return 200, self._ref_obj(ref, sha), {}

    def h_delete_ref(self, caller: Caller, params: dict, query: dict, data: Any):
        self._require(caller, params, "write")
        ref = "refs/" + params["ref"]
        if ref not in self.git.refs(ref):
            raise HTTPError(422, "Reference does not exist")
        self.git.delete_ref(ref)
        return 204, None, {}

    def h_create_blob(self, caller: Caller, params: dict, query: dict, data: Any):
        self._require(caller, params, "write")
        content, encoding = data.get("content"), data.get("encoding", "utf-8")
        if not isinstance(content, str):
            raise HTTPError(422, "Invalid request.\n\n\"content\" wasn't supplied.")
        if encoding == "base64":
            try:
                raw = base64.b64decode(content, validate=False)
            except (binascii.Error, ValueError):
                raise HTTPError(422, "Invalid base64 content") from None
        elif encoding in ("utf-8", "utf8"):
            raw = content.encode()
        else:
            raise HTTPError(422, f"encoding must be utf-8 or base64, not {encoding!r}")
        sha = self.git.write_blob(raw)
        return 201, {"url": f"{B.API}/repos/{self.full_name}/git/blobs/{sha}", "sha": sha}, {}

    def h_get_blob(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        sha = params["file_sha"]
        if self.git.object_type(sha) != "blob":
            raise HTTPError(404, "Not Found")
        raw = self.git.read_blob(sha)
        return 200, {"sha": sha, "node_id": B.node_id("B", sha), "size": len(raw),
                     "url": f"{B.API}/repos/{self.full_name}/git/blobs/{sha}",
                     "content": base64.encodebytes(raw).decode(), "encoding": "base64"}, {}

    def _tree_obj(self, sha: str, recursive: bool) -> dict:
        entries = self._ls_rt(sha) if recursive else self.git.ls_tree(sha)
        return {"sha": sha, "url": f"{B.API}/repos/{self.full_name}/git/trees/{sha}", "truncated": False,
                "tree": [B.tree_entry(self.full_name, e.path, e.mode, e.type, e.sha, e.size) for e in entries]}

    def h_create_tree(self, caller: Caller, params: dict, query: dict, data: Any):
        self._require(caller, params, "write")
        base_tree, items = data.get("base_tree"), data.get("tree")
        if not isinstance(items, list):
            raise HTTPError(422, "Invalid request.\n\n\"tree\" wasn't supplied.")
        if base_tree is not None and self.git.object_type(str(base_tree)) != "tree":
            raise HTTPError(422, "base_tree is not a valid tree oid")
        changes: dict[str, TreeEntry | None] = {}
        for item in items:
            path, mode, typ = item.get("path"), item.get("mode"), item.get("type")
            if not isinstance(path, str) or not path or any(
                    part in ("", ".", "..") or part.lower() == ".git" for part in path.split("/")):
                raise HTTPError(422, f"tree.path {path!r} contains a malformed path component")
            if mode not in ("100644", "100755", "040000", "160000", "120000") or typ not in ("blob", "tree", "commit"):
                raise HTTPError(422, f"tree.mode/type invalid for {path}")
            if "content" in item and item["content"] is not None:
                if typ != "blob":
                    raise HTTPError(422, "content is only valid for blobs")
                changes[path] = TreeEntry(mode, "blob", self.git.write_blob(str(item["content"]).encode()), path)
            elif item.get("sha") is None:
                if "sha" not in item:
                    raise HTTPError(422, f"Must supply tree.sha or tree.content for {path}")
                changes[path] = None  # deletion
            else:
                sha = str(item["sha"])
                if typ != "commit" and self.git.object_type(sha) != typ:
                    raise HTTPError(422, f"GitRPC::BadObjectState: {sha} is not a {typ}")
                changes[path] = TreeEntry(mode, typ, sha, path)
        tree = self.git.build_tree(base_tree, changes)
        return 201, self._tree_obj(tree, recursive=False), {}

    def h_get_tree(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        sha = params["tree_sha"]
        if self.git.object_type(sha) == "commit":
            sha = self.git.read_commit(sha).tree
        if self.git.object_type(sha) != "tree":
            raise HTTPError(404, "Not Found")
        recursive = query.get("recursive") not in (None, "", "0", "false")
        return 200, self._tree_obj(sha, recursive), {}

    def _ls_rt(self, sha: str) -> list[TreeEntry]:
        """Recursive listing that, like GitHub's ``recursive=1``, includes the subtrees themselves."""
        out = []
        for rec in self.git.git("ls-tree", "-r", "-t", "-z", "--long", sha).split(b"\0"):
            if rec:
                meta, name = rec.split(b"\t", 1)
                mode, typ, osha, size = meta.decode().split()
                out.append(TreeEntry(mode, typ, osha, name.decode(), None if size == "-" else int(size)))
        return out

    def h_create_commit(self, caller: Caller, params: dict, query: dict, data: Any):
        self._require(caller, params, "write")
        message, tree, parents = data.get("message"), data.get("tree"), data.get("parents", [])
        if not isinstance(message, str) or not isinstance(tree, str):
            raise HTTPError(422, "Invalid request.\n\n\"message\", \"tree\" are required.")
        if self.git.object_type(tree) != "tree":
            raise HTTPError(422, "Tree SHA does not exist")
        if not isinstance(parents, list) or any(self.git.object_type(str(p)) != "commit" for p in parents):
            raise HTTPError(422, "Parent SHA does not exist or is not a commit object")
        when = now_iso()
        author = self._person(data.get("author"), caller, when)
        committer = self._person(data.get("committer"), caller, when) if data.get("committer") else author
        sha = self.git.commit_tree(tree, [str(p) for p in parents], message, author, committer)
        return 201, self._git_commit_obj(sha), {}

    def h_get_git_commit(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        sha = params["commit_sha"]
        if self.git.object_type(sha) != "commit":
            raise HTTPError(404, "Not Found")
        return 200, self._git_commit_obj(sha), {}

    def h_contents(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        ref = query.get("ref") or self.default_branch
        sha = self._commit_sha(ref) if ref else None
        path = params["path"].strip("/")
        entries = {e.path: e for e in self.git.ls_tree(sha, recursive=False)} if "/" not in path else None
        if entries is None:
            parent, _, leaf = path.rpartition("/")
            listing = self.git.git("ls-tree", "-z", "--long", f"{sha}:{parent}", check=False)
            entries = {}
            for rec in listing.split(b"\0"):
                if rec:
                    meta, name = rec.split(b"\t", 1)
                    mode, typ, osha, size = meta.decode().split()
                    entries[f"{parent}/{name.decode()}"] = TreeEntry(mode, typ, osha, f"{parent}/{name.decode()}",
                                                                      None if size == "-" else int(size))
        entry = entries.get(path)
        if entry is None:
            raise HTTPError(404, "Not Found")
        if entry.type == "blob":
            data = self.git.read_blob(entry.sha)
            obj = B.content_file(self.full_name, path, ref, entry.sha, data)
            if len(data) > CONTENTS_INLINE_LIMIT:  # GitHub leaves 1-100 MB files out of this answer
                obj.update(content="", encoding="none")
            return 200, obj, {}
        if entry.type == "tree":
            items = []
            for e in self.git.ls_tree(entry.sha):
                p = f"{path}/{e.path}"
                kind = {"blob": "file", "tree": "dir", "commit": "submodule"}[e.type]
                obj = B.content_file(self.full_name, p, ref, e.sha, b"")
                obj.update(type=kind, size=e.size or 0)
                obj.pop("content"), obj.pop("encoding")
                items.append(obj)
            return 200, items, {}
        raise HTTPError(404, "Not Found")

    def h_branches(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        items = [{"name": r[len("refs/heads/"):],
                  "commit": {"sha": s, "url": f"{B.API}/repos/{self.full_name}/commits/{s}"}, "protected": False}
                 for r, s in sorted(self.git.refs("refs/heads/").items())]
        chunk, headers = self._paginate(items, query, f"/repos/{self.full_name}/branches")
        return 200, chunk, headers

    def h_branch(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        name = params["branch"]
        sha = self.git.refs(f"refs/heads/{name}").get(f"refs/heads/{name}")
        if sha is None:
            raise HTTPError(404, "Branch not found")
        r = f"{B.API}/repos/{self.full_name}"
        return 200, {"name": name, "commit": self._commit_obj(sha),
                     "_links": {"self": f"{r}/branches/{name}", "html": f"{B.WEB}/{self.full_name}/tree/{name}"},
                     "protected": False, "protection": {"enabled": False},
                     "protection_url": f"{r}/branches/{name}/protection"}, {}

    def h_commits(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        head = self._commit_sha(query.get("sha") or self.default_branch)
        shas = self.git.rev_list(head)
        chunk, headers = self._paginate(shas, query, f"/repos/{self.full_name}/commits")
        return 200, [self._commit_obj(s) for s in chunk], headers

    def h_commit(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        return 200, self._commit_obj(self._commit_sha(params["ref"])), {}

    def h_compare(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        base_rev, sep, head_rev = params["basehead"].partition("...")
        if not sep:
            raise HTTPError(404, "Not Found")
        base, head = self._commit_sha(base_rev), self._commit_sha(head_rev)
        mb = self.git.merge_base(base, head)
        if mb is None:
            raise HTTPError(404, f"No common ancestor between {base_rev} and {head_rev}.")
        ahead = self.git.rev_list("--reverse", f"{base}..{head}")
        behind = self.git.rev_list(f"{head}..{base}")
        status = ("identical" if not ahead and not behind else "ahead" if not behind
                  else "behind" if not ahead else "diverged")
        r = f"{B.WEB}/{self.full_name}"
        return 200, {
            "url": f"{B.API}/repos/{self.full_name}/compare/{base_rev}...{head_rev}",
            "html_url": f"{r}/compare/{base_rev}...{head_rev}", "permalink_url": f"{r}/compare/{base}...{head}",
            "diff_url": f"{r}/compare/{base_rev}...{head_rev}.diff", "patch_url": f"{r}/compare/{base_rev}...{head_rev}.patch",
            "base_commit": self._commit_obj(base), "merge_base_commit": self._commit_obj(mb), "status": status,
            "ahead_by": len(ahead), "behind_by": len(behind), "total_commits": len(ahead),
            "commits": [self._commit_obj(s) for s in ahead[:250]], "files": self._diff_entries(mb, head, r),
        }, {}

    def _diff_entries(self, base: str, head: str, web: str) -> list[dict]:
        """GitHub's ``files`` of a compare (three-dot: from the merge base), from the real git diff."""
        codes = {"A": "added", "D": "removed", "M": "modified", "R": "renamed", "C": "copied", "T": "changed"}
        out = []
        numstat = self.git.git("diff", "--numstat", "-M", base, head).decode().splitlines()
        names = self.git.git("diff", "--name-status", "-M", base, head).decode().splitlines()
        for stat, name in zip(numstat, names):
            add, dele, _ = stat.split("\t", 2)
            parts = name.split("\t")
            code, path = parts[0][0], parts[-1]
            blob = self.git.git("rev-parse", f"{head}:{path}", check=False).decode().strip() if code != "D" else "0" * 40
            adds, dels = (int(add), int(dele)) if add.isdigit() and dele.isdigit() else (0, 0)
            entry = {"sha": blob or "0" * 40, "filename": path, "status": codes.get(code, "modified"),
                     "additions": adds, "deletions": dels, "changes": adds + dels,
                     "blob_url": f"{web}/blob/{head}/{path}", "raw_url": f"{web}/raw/{head}/{path}",
                     "contents_url": f"{B.API}/repos/{self.full_name}/contents/{path}?ref={head}"}
            if code == "R" and len(parts) == 3:
                entry["previous_filename"] = parts[1]
            out.append(entry)
        return out[:300]

    # ------------------------------------------------------------------------------------------
    # Pull requests
    # ------------------------------------------------------------------------------------------
    def _pull(self, params: dict) -> dict:
        self._check_repo(params)
        try:
            pr = self.pulls.get(int(params["pull_number"]))
        except ValueError:
            pr = None
        if pr is None:
            raise HTTPError(404, "Not Found")
        return pr

    def _refresh(self, pr: dict, heads: dict[str, str] | None = None) -> None:
        """Head/base shas follow the branches while the PR is open, as on GitHub (a fork PR's head is
        moved by ``push_fork_commit``: no branch of this repository is its head)."""
        if pr["state"] == "open":
            heads = heads if heads is not None else self.git.refs("refs/heads/")
            head = None if pr.get("fork") else heads.get(f"refs/heads/{pr['head_ref']}")
            if head and head != pr["head_sha"]:
                pr["head_sha"] = head
                pr["updated_at"] = now_iso()
                if self.mergeable_lag:
                    self.mergeable_pending_count[pr["number"]] = self.mergeable_lag
            pr["base_sha"] = heads.get(f"refs/heads/{pr['base_ref']}") or pr["base_sha"]

    def _touch_pulls_for(self, ref: str) -> None:
        for pr in self.pulls.values():
            if f"refs/heads/{pr['head_ref']}" == ref and not pr.get("fork"):
                self._refresh(pr)

    def _labels_of(self, number: int) -> list[dict]:
        return [self.labels[n] for n in self.issues[number]["labels"]]

    def _pull_obj(self, pr: dict, full: bool, heads: dict[str, str] | None = None) -> dict:
        self._refresh(pr, heads)
        rec = dict(pr, labels=self._labels_of(pr["number"]),
                   comments=len(self.comments_on(pr["number"])), author_association=self._association(pr["user"]["login"]))
        if full:
            pending = self.mergeable_pending_count.get(pr["number"], 0)
            if pr["state"] != "open":
                rec.update(mergeable=None, mergeable_state="unknown")
            elif pending > 0:
                self.mergeable_pending_count[pr["number"]] = pending - 1
                rec.update(mergeable=None, mergeable_state="unknown")
            else:
                ok = self.git.merge_tree(pr["base_sha"], pr["head_sha"]) is not None
                rec.update(mergeable=ok, mergeable_state="clean" if ok else "dirty")
            base = self.git.merge_base(pr["base_sha"], pr["head_sha"]) or pr["base_sha"]
            rec["commits"] = len(self.git.rev_list(f"{base}..{pr['head_sha']}"))
            adds = dels = files = 0
            for line in self.git.git("diff", "--numstat", base, pr["head_sha"]).decode().splitlines():
                a, d, _ = line.split("\t", 2)
                adds += int(a) if a.isdigit() else 0
                dels += int(d) if d.isdigit() else 0
                files += 1
            rec.update(additions=adds, deletions=dels, changed_files=files)
        if pr.get("fork"):
            head_user = self.accounts[pr["fork"]].obj()
            head_repo = B.repository(head_user, self.name, self.repo_id + 1 + pr["number"], self.default_branch, self.created_at,
                                     now_iso(), full=False)
            head_repo["fork"] = True
            out = B.pull(self.full_name, self._repo_obj(), rec, head_user, full)
            out["head"]["repo"] = head_repo
            return out
        head_user = self.accounts[self.owner_login].obj()
        return B.pull(self.full_name, self._repo_obj(), rec, head_user, full)

    def h_list_pulls(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        state = query.get("state", "open")
        if state not in ("open", "closed", "all"):
            raise HTTPError(422, "Validation Failed", [{"resource": "Search", "field": "state", "code": "invalid"}])
        head = query.get("head")
        if head and ":" in head:
            owner, _, head = head.partition(":")
            if owner.lower() != self.owner_login.lower():
                head = "\0no-such-branch"
        pulls = sorted(self.pulls.values(), key=lambda p: p["number"],
                       reverse=query.get("direction", "desc") == "desc")
        heads = self.git.refs("refs/heads/")
        for p in pulls:
            self._refresh(p, heads)
        pulls = [p for p in pulls if (state == "all" or p["state"] == state)
                 and (not head or p["head_ref"] == head) and (not query.get("base") or p["base_ref"] == query["base"])]
        chunk, headers = self._paginate(pulls, query, f"/repos/{self.full_name}/pulls")
        return 200, [self._pull_obj(p, full=False, heads=heads) for p in chunk], headers

    def h_create_pull(self, caller: Caller, params: dict, query: dict, data: Any):
        self._require(caller, params, "write")
        title, head, base = data.get("title"), data.get("head"), data.get("base")
        if not isinstance(head, str) or not isinstance(base, str) or not isinstance(title, str) or not title:
            raise HTTPError(422, "Validation Failed", [{"resource": "PullRequest", "field": "title/head/base",
                                                        "code": "missing_field"}])
        if ":" in head:
            owner, _, head = head.partition(":")
            if owner.lower() != self.owner_login.lower():
                raise HTTPError(422, "Validation Failed", [{"resource": "PullRequest", "field": "head", "code": "invalid"}])
        head_sha = self.git.ref_sha(f"refs/heads/{head}")
        base_sha = self.git.ref_sha(f"refs/heads/{base}")
        if head_sha is None or base_sha is None:
            raise HTTPError(422, "Validation Failed", [{"resource": "PullRequest", "field": "head" if head_sha is None
                                                        else "base", "code": "invalid"}])
        self._check_body(data.get("body"), "PullRequest")
        for p in self.pulls.values():
            if p["state"] == "open" and p["head_ref"] == head and p["base_ref"] == base:
                raise HTTPError(422, "Validation Failed", [{
                    "resource": "PullRequest", "code": "custom",
                    "message": f"A pull request already exists for {self.owner_login}:{head}."}])
        if head_sha == base_sha or self.git.is_ancestor(head_sha, base_sha):
            raise HTTPError(422, "Validation Failed", [{"resource": "PullRequest", "code": "custom",
                                                        "message": f"No commits between {base} and {head}"}])
        number = self._new_issue(title, data.get("body"), caller.account, is_pull=True)["number"]
        stamp = now_iso()
        pr = {"id": next(self._ids), "number": number, "title": title, "body": data.get("body"),
              "user": caller.account.obj(), "head_ref": head, "head_sha": head_sha, "base_ref": base,
              "base_sha": base_sha, "state": "open", "draft": bool(data.get("draft", False)),
              "created_at": stamp, "updated_at": stamp, "closed_at": None, "merged_at": None,
              "merge_commit_sha": None, "merged": False, "merged_by": None}
        self.pulls[number] = pr
        if self.mergeable_lag:
            self.mergeable_pending_count[number] = self.mergeable_lag
        return 201, self._pull_obj(pr, full=True), {}

    def h_get_pull(self, caller: Caller, params: dict, query: dict, data: Any):
        return 200, self._pull_obj(self._pull(params), full=True), {}

    def h_update_pull(self, caller: Caller, params: dict, query: dict, data: Any):
        pr = self._pull(params)
        self._require(caller, params, "write")
        if "title" in data:
            pr["title"] = self.issues[pr["number"]]["title"] = str(data["title"])
        if "body" in data:
            self._check_body(data["body"], "PullRequest")
            pr["body"] = self.issues[pr["number"]]["body"] = data["body"]
        if "state" in data:
            if data["state"] not in ("open", "closed"):
                raise HTTPError(422, "Validation Failed", [{"resource": "PullRequest", "field": "state", "code": "invalid"}])
            if pr["merged"] and data["state"] == "open":
                raise HTTPError(422, "Validation Failed", [{"resource": "PullRequest", "code": "custom",
                                                            "message": "Cannot reopen a merged pull request"}])
            if data["state"] != pr["state"]:
                pr["state"] = self.issues[pr["number"]]["state"] = data["state"]
                pr["closed_at"] = self.issues[pr["number"]]["closed_at"] = (
                    now_iso() if data["state"] == "closed" else None)
        pr["updated_at"] = now_iso()
        return 200, self._pull_obj(pr, full=True), {}

    def h_update_branch(self, caller: Caller, params: dict, query: dict, data: Any):
        """GitHub's "Update branch": a merge commit of the base's head into the PR head, authored by the
        caller and committed by GitHub (web-flow), as the web button and this API make it. GitHub does
        it asynchronously after its 202; here it has happened when the 202 is sent. ``after_update``
        (a test's hook) runs right after, e.g. a person pushing in the window before the bot looks."""
        pr = self._pull(params)
        if caller.installation is not None:
            # GitHub's description: this endpoint is not enabled for GitHub Apps (enabledForGitHubApps: false).
            raise HTTPError(403, "Resource not accessible by integration")
        self._require(caller, params, "write")
        self._refresh(pr)
        if pr["state"] != "open" or pr.get("fork"):
            raise HTTPError(422, "Validation Failed", [{"resource": "PullRequest", "code": "custom",
                                                        "message": "the pull request is not open"}])
        expected = (data or {}).get("expected_head_sha")
        if expected is not None and expected != pr["head_sha"]:
            raise HTTPError(422, "expected head sha didn't match current head ref.")
        if self.git.is_ancestor(pr["base_sha"], pr["head_sha"]):
            raise HTTPError(422, "There are no new commits on the base branch.")
        tree = self.git.merge_tree(pr["head_sha"], pr["base_sha"])
        if tree is None:
            raise HTTPError(422, "merge conflict between base and head")
        when = now_iso()
        merger = caller.account
        message = f"Merge branch '{pr['base_ref']}' into {pr['head_ref']}\n"
        sha = self.git.commit_tree(tree, [pr["head_sha"], pr["base_sha"]], message,
                                   Person(merger.name, merger.email, when), Person("GitHub", "noreply@github.com", when))
        self.git.update_ref(f"refs/heads/{pr['head_ref']}", sha, pr["head_sha"])
        self._touch_pulls_for(f"refs/heads/{pr['head_ref']}")
        if self.after_update is not None:
            hook, self.after_update = self.after_update, None
            hook(pr["number"], sha)
        return 202, {"message": "Updating pull request branch.",
                     "url": f"https://github.com/{self.full_name}/pull/{pr['number']}"}, {}

    def h_merges(self, caller: Caller, params: dict, query: dict, data: Any):
        """"Merge a branch": ``head`` (a branch or sha) merged into branch ``base``, a merge commit by the
        caller (committed by GitHub); 204 when there is nothing to merge, 409 on a conflict. No
        expected-head guard: the caller checks what it got."""
        self._require(caller, params, "write")
        base, head = (data or {}).get("base"), (data or {}).get("head")
        if not isinstance(base, str) or not isinstance(head, str):
            raise HTTPError(422, "Invalid request.\n\n\"base\", \"head\" are required.")
        ref = f"refs/heads/{base}"
        tip = self.git.ref_sha(ref)
        if tip is None:
            raise HTTPError(404, "Base does not exist")
        other = self._commit_sha(head)
        if self.git.is_ancestor(other, tip):
            return 204, None, {}
        tree = self.git.merge_tree(tip, other)
        if tree is None:
            raise HTTPError(409, "Merge conflict")
        when = now_iso()
        message = (data.get("commit_message") or f"Merge {head} into {base}").rstrip() + "\n"
        sha = self.git.commit_tree(tree, [tip, other], message, Person(caller.account.name, caller.account.email, when),
                                   Person("GitHub", "noreply@github.com", when))
        self.git.update_ref(ref, sha, tip)
        self._touch_pulls_for(ref)
        if self.after_update is not None:
            hook, self.after_update = self.after_update, None
            pr = next((p["number"] for p in self.pulls.values() if p["head_ref"] == base and p["state"] == "open"), None)
            hook(pr, sha)
        return 201, self._commit_obj(sha), {}

    def h_merge(self, caller: Caller, params: dict, query: dict, data: Any):
        pr = self._pull(params)
        self._require(caller, params, "write")
        self._refresh(pr)
        if pr["state"] != "open":
            raise HTTPError(405, "Pull Request is not mergeable")
        if data.get("sha") and data["sha"] != pr["head_sha"]:
            raise HTTPError(409, "Head branch was modified. Review and try the merge again.")
        method = data.get("merge_method", "merge")
        if method not in ("merge", "squash"):
            raise HTTPError(405, f"{method} merges are not allowed on this repository.")
        tree = self.git.merge_tree(pr["base_sha"], pr["head_sha"])
        if tree is None:
            raise HTTPError(405, "Pull Request is not mergeable")
        n = pr["number"]
        when = now_iso()
        web_flow = Person("GitHub", "noreply@github.com", when)
        merger = caller.account
        if method == "squash":
            title = data.get("commit_title") or f"{pr['title']} (#{n})"
            default_msg = "\n\n".join(
                f"* {self.git.read_commit(s).message.strip()}"
                for s in self.git.rev_list("--reverse", f"{pr['base_sha']}..{pr['head_sha']}"))
            message = f"{title}\n\n{data.get('commit_message', default_msg)}".rstrip() + "\n"
            author_acct = self.accounts[pr["user"]["login"]]
            author = Person(author_acct.name, author_acct.email, when)
            parents = [pr["base_sha"]]
        else:
            title = data.get("commit_title") or f"Merge pull request #{n} from {self.owner_login}/{pr['head_ref']}"
            message = f"{title}\n\n{data.get('commit_message', pr['title'])}".rstrip() + "\n"
            author = Person(merger.name, merger.email, when)
            parents = [pr["base_sha"], pr["head_sha"]]
        sha = self.git.commit_tree(tree, parents, message, author, web_flow)
        self.git.update_ref(f"refs/heads/{pr['base_ref']}", sha, pr["base_sha"])
        pr.update(state="closed", merged=True, merged_at=when, closed_at=when, merge_commit_sha=sha,
                  merged_by=merger.obj(), updated_at=when)
        self.issues[n].update(state="closed", closed_at=when, updated_at=when)
        return 200, {"sha": sha, "merged": True, "message": "Pull Request successfully merged"}, {}

    # ------------------------------------------------------------------------------------------
    # Reviews, comments, reactions, labels
    # ------------------------------------------------------------------------------------------
    def h_list_reviews(self, caller: Caller, params: dict, query: dict, data: Any):
        pr = self._pull(params)
        items = [B.review(self.full_name, r) for r in sorted(self.reviews_on(pr["number"]), key=lambda r: r["id"])]
        chunk, headers = self._paginate(items, query, f"/repos/{self.full_name}/pulls/{pr['number']}/reviews")
        return 200, chunk, headers

    def add_review(self, number: int, body: str, *, author: str, state: str = "COMMENTED") -> dict:
        """Record a submitted review (used by the POST handler and by tests reviewing as a person)."""
        with self.lock:
            pr = self.pulls[number]
            self._refresh(pr)
            acct = self.add_account(author)
            rv = {"id": next(self._ids), "pull": number, "user": acct.obj(), "body": body, "state": state,
                  "commit_id": pr["head_sha"], "submitted_at": now_iso(),
                  "author_association": self._association(acct.login)}
            self.reviews[rv["id"]] = rv
            return rv

    def h_create_review(self, caller: Caller, params: dict, query: dict, data: Any):
        pr = self._pull(params)
        self._require(caller, params, "read")
        event = data.get("event")
        body = data.get("body") or ""
        states = {"COMMENT": "COMMENTED", "APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", None: "PENDING"}
        if event not in states:
            raise HTTPError(422, "Unprocessable Entity", ["event is not valid"])
        self._check_body(body, "PullRequestReview")
        if event in ("COMMENT", "REQUEST_CHANGES") and not body:
            raise HTTPError(422, "Unprocessable Entity", ["Review body is required for this event"])
        if event in ("APPROVE", "REQUEST_CHANGES") and caller.account.login == pr["user"]["login"]:
            raise HTTPError(422, "Unprocessable Entity", ["Can not approve/request changes on your own pull request"])
        commit_id = data.get("commit_id")
        if commit_id is not None and self.git.object_type(str(commit_id)) != "commit":
            raise HTTPError(422, "Unprocessable Entity", ["commit_id is not part of the pull request"])
        rv = self.add_review(pr["number"], body, author=caller.account.login, state=states[event])
        if commit_id:
            rv["commit_id"] = commit_id
        return 200, B.review(self.full_name, rv), {}

    def h_update_review(self, caller: Caller, params: dict, query: dict, data: Any):
        pr = self._pull(params)
        self._require(caller, params, "read")
        rv = self.reviews.get(int(params["review_id"])) if params["review_id"].isdigit() else None
        if rv is None or rv["pull"] != pr["number"]:
            raise HTTPError(404, "Not Found")
        if rv["user"]["login"] != caller.account.login:
            raise HTTPError(403, "Resource not accessible by integration")
        if not isinstance(data.get("body"), str):
            raise HTTPError(422, "Unprocessable Entity", ["body is required"])
        self._check_body(data["body"], "PullRequestReview")
        rv["body"] = data["body"]
        return 200, B.review(self.full_name, rv), {}

    def _issue(self, params: dict) -> dict:
        self._check_repo(params)
        try:
            issue = self.issues.get(int(params["issue_number"]))
        except ValueError:
            issue = None
        if issue is None:
            raise HTTPError(404, "Not Found")
        return issue

    def h_get_issue(self, caller: Caller, params: dict, query: dict, data: Any):
        i = self._issue(params)
        author = self.accounts[i["user"]]
        rec = dict(i, user_obj=author.obj(), author_association=self._association(author.login))
        return 200, B.issue(self.full_name, rec, self._labels_of(i["number"]), len(self.comments_on(i["number"])),
                            self.pulls.get(i["number"])), {}

    def _comment(self, params: dict) -> dict:
        self._check_repo(params)
        c = self.comments.get(int(params["comment_id"])) if params["comment_id"].isdigit() else None
        if c is None:
            raise HTTPError(404, "Not Found")
        return c

    def h_list_comments(self, caller: Caller, params: dict, query: dict, data: Any):
        issue = self._issue(params)
        items = [B.issue_comment(self.full_name, c) for c in sorted(self.comments_on(issue["number"]), key=lambda c: c["id"])]
        chunk, headers = self._paginate(items, query, f"/repos/{self.full_name}/issues/{issue['number']}/comments")
        return 200, chunk, headers

    def add_comment(self, number: int, body: str, *, author: str) -> dict:
        """Record a comment (used by the POST handler and by tests posting as a person)."""
        with self.lock:
            acct = self.add_account(author)
            stamp = now_iso()
            c = {"id": next(self._ids), "issue": number, "body": body, "user": acct.obj(), "created_at": stamp,
                 "updated_at": stamp, "author_association": self._association(acct.login), "reactions": []}
            self.comments[c["id"]] = c
            return c

    def h_create_comment(self, caller: Caller, params: dict, query: dict, data: Any):
        issue = self._issue(params)
        self._require(caller, params, "read")
        body = data.get("body")
        if not isinstance(body, str) or not body:
            raise HTTPError(422, "Validation Failed", [{"resource": "IssueComment", "field": "body", "code": "missing_field"}])
        self._check_body(body, "IssueComment")
        c = self.add_comment(issue["number"], body, author=caller.account.login)
        return 201, B.issue_comment(self.full_name, c), {}

    def h_get_comment(self, caller: Caller, params: dict, query: dict, data: Any):
        return 200, B.issue_comment(self.full_name, self._comment(params)), {}

    def _may_edit(self, caller: Caller, params: dict, c: dict) -> None:
        self._require(caller, params, "read")
        if c["user"]["login"] != caller.account.login and PERMISSIONS.index(self._perm(caller)) < PERMISSIONS.index("write"):
            raise HTTPError(403, "Resource not accessible by integration")

    def h_update_comment(self, caller: Caller, params: dict, query: dict, data: Any):
        c = self._comment(params)
        self._may_edit(caller, params, c)
        if not isinstance(data.get("body"), str) or not data["body"]:
            raise HTTPError(422, "Validation Failed", [{"resource": "IssueComment", "field": "body", "code": "missing_field"}])
        self._check_body(data["body"], "IssueComment")
        c["body"], c["updated_at"] = data["body"], now_iso()
        return 200, B.issue_comment(self.full_name, c), {}

    def h_delete_comment(self, caller: Caller, params: dict, query: dict, data: Any):
        c = self._comment(params)
        self._may_edit(caller, params, c)
        del self.comments[c["id"]]
        return 204, None, {}

    def h_create_reaction(self, caller: Caller, params: dict, query: dict, data: Any):
        c = self._comment(params)
        self._require(caller, params, "read")
        content = data.get("content")
        if content not in REACTIONS:
            raise HTTPError(422, "Validation Failed", [{"resource": "Reaction", "field": "content", "code": "invalid"}])
        existing = next((r for r in c["reactions"] if r["content"] == content
                         and r["user"]["login"] == caller.account.login), None)
        if existing:
            return 200, B.reaction(existing), {}
        r = {"id": next(self._ids), "user": caller.account.obj(), "content": content, "created_at": now_iso()}
        c["reactions"].append(r)
        return 201, B.reaction(r), {}

    def h_list_labels(self, caller: Caller, params: dict, query: dict, data: Any):
        issue = self._issue(params)
        chunk, headers = self._paginate(self._labels_of(issue["number"]), query,
                                        f"/repos/{self.full_name}/issues/{issue['number']}/labels")
        return 200, chunk, headers

    def h_add_labels(self, caller: Caller, params: dict, query: dict, data: Any):
        issue = self._issue(params)
        self._require(caller, params, "triage")
        names = data.get("labels") if isinstance(data, dict) else data
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise HTTPError(422, "Invalid request.\n\n\"labels\" must be a list of names.")
        for name in names:
            if name not in self.labels:  # GitHub creates unknown labels on the fly
                self.labels[name] = B.label(self.full_name, next(self._ids), name, "ededed", "")
            if name not in issue["labels"]:
                issue["labels"].append(name)
        return 200, self._labels_of(issue["number"]), {}

    def h_remove_label(self, caller: Caller, params: dict, query: dict, data: Any):
        issue = self._issue(params)
        self._require(caller, params, "triage")
        if params["name"] not in issue["labels"]:
            raise HTTPError(404, "Label does not exist")
        issue["labels"].remove(params["name"])
        return 200, self._labels_of(issue["number"]), {}

    # ------------------------------------------------------------------------------------------
    # Statuses and check runs
    # ------------------------------------------------------------------------------------------
    def h_create_status(self, caller: Caller, params: dict, query: dict, data: Any):
        self._require(caller, params, "write")
        sha = params["sha"]
        if self.git.object_type(sha) != "commit":
            raise HTTPError(422, f"No commit found for SHA: {sha}")
        state = data.get("state")
        if state not in ("error", "failure", "pending", "success"):
            raise HTTPError(422, "Validation Failed", [{"resource": "Status", "field": "state", "code": "invalid"}])
        s = {"id": next(self._ids), "sha": sha, "state": state, "description": data.get("description"),
             "target_url": data.get("target_url"), "context": data.get("context") or "default",
             "created_at": now_iso(), "creator": caller.account.obj()}
        self.statuses.setdefault(sha, []).append(s)
        return 201, B.status(self.full_name, s), {}

    def h_combined_status(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        sha = self._commit_sha(params["ref"])
        latest: dict[str, dict] = {}
        for s in self.statuses.get(sha, []):
            latest[s["context"]] = s
        states = [s["state"] for s in latest.values()]
        state = ("failure" if any(x in ("failure", "error") for x in states) else
                 "pending" if not states or "pending" in states else "success")
        r = f"{B.API}/repos/{self.full_name}"
        minimal = {k: v for k, v in self._repo_obj().items()}
        return 200, {"state": state, "sha": sha, "total_count": len(latest),
                     "statuses": [B.simple_status(self.full_name, s) for s in latest.values()],
                     "repository": minimal, "commit_url": f"{r}/commits/{sha}", "url": f"{r}/commits/{sha}/status"}, {}

    # ------------------------------------------------------------------------------------------
    # Workflows (a workflow is a file under .github/workflows/ on the default branch)
    # ------------------------------------------------------------------------------------------
    @staticmethod
    def _workflow_id(path: str) -> int:
        return 1_000_000 + int.from_bytes(path.encode()[-6:], "big") % 1_000_000

    def _workflow_file(self, params: dict) -> tuple[str, bytes]:
        """The workflow named by file name or by id (GitHub takes either), from the default branch."""
        self._check_repo(params)
        wid = params["workflow_id"]
        head = self.git.ref_sha(f"refs/heads/{self.default_branch}")
        if wid.isdigit() and head:
            listing = self.git.run("ls-tree", "--name-only", f"{head}:.github/workflows")
            names = listing.stdout.decode().split() if listing.returncode == 0 else []
            wid = next((n for n in names if self._workflow_id(f".github/workflows/{n}") == int(wid)), "")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+\.ya?ml", wid):
            raise HTTPError(404, "Not Found")
        path = f".github/workflows/{wid}"
        found = self.git.run("show", f"{head}:{path}") if head else None
        if found is None or found.returncode != 0:
            raise HTTPError(404, "Not Found")
        return path, found.stdout

    def h_workflow(self, caller: Caller, params: dict, query: dict, data: Any):
        path, _ = self._workflow_file(params)
        wid = self._workflow_id(path)
        r = f"{B.API}/repos/{self.full_name}/actions/workflows/{wid}"
        return 200, {"id": wid, "node_id": B.node_id("W", wid), "name": Path(path).stem, "path": path, "state": "active",
                     "created_at": self.created_at, "updated_at": self.created_at, "url": r,
                     "html_url": f"{B.WEB}/{self.full_name}/blob/{self.default_branch}/{path}",
                     "badge_url": f"{B.WEB}/{self.full_name}/workflows/{Path(path).stem}/badge.svg"}, {}

    def h_dispatch(self, caller: Caller, params: dict, query: dict, data: Any):
        self._require(caller, params, "write")  # GitHub: write access (actions: write for an App)
        path, text = self._workflow_file(params)
        if b"workflow_dispatch" not in text:
            raise HTTPError(422, "Workflow does not have 'workflow_dispatch' trigger")
        ref, inputs = data.get("ref"), data.get("inputs") or {}
        if not isinstance(ref, str) or self.git.ref_sha(f"refs/heads/{ref}") is None:
            raise HTTPError(422, f"No ref found for: {ref}")
        if not isinstance(inputs, dict) or len(inputs) > 25 or not all(isinstance(v, str) for v in inputs.values()):
            raise HTTPError(422, "inputs must be an object of at most 25 strings")
        self.dispatches.append({"workflow": path, "ref": ref, "inputs": dict(inputs), "by": caller.account.login,
                                "sha": self.git.ref_sha(f"refs/heads/{ref}")})
        return 204, None, {}

    def _check_app(self, caller: Caller) -> dict:
        if caller.installation is None:
            raise HTTPError(403, "You must authenticate via a GitHub App.")
        app_id = self.installations[caller.installation]
        return self.apps[app_id]

    def _check_obj(self, c: dict) -> dict:
        app = self.apps[c["app_id"]]
        return B.check_run(self.full_name, c, B.integration(app, self.accounts[self.owner_login].obj()))

    def _apply_check_fields(self, c: dict, data: dict) -> None:
        for key in ("name", "details_url", "external_id", "status", "conclusion", "started_at", "completed_at"):
            if key in data:
                c[key] = data[key]
        out = data.get("output") or {}
        for key in ("title", "summary", "text"):
            if key in out:
                c[key] = out[key]
        if c["status"] not in ("queued", "in_progress", "completed", "waiting", "requested", "pending"):
            raise HTTPError(422, "Invalid request.\n\nstatus is not a valid value.")
        if c["conclusion"] is not None:
            c["status"] = "completed"
            c["completed_at"] = c["completed_at"] or now_iso()
        if c["status"] == "completed" and c["conclusion"] is None:
            raise HTTPError(422, "Invalid request.\n\n\"conclusion\" is required when status is completed.")
        if out and ("title" not in out or "summary" not in out) and c["title"] is None:
            raise HTTPError(422, "Invalid request.\n\n\"title\", \"summary\" are required in output.")

    def h_create_check_run(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        if caller.account is None:
            raise HTTPError(401, "Requires authentication")
        app = self._check_app(caller)
        if not data.get("name") or not isinstance(data.get("head_sha"), str):
            raise HTTPError(422, "Invalid request.\n\n\"name\", \"head_sha\" are required.")
        if self.git.object_type(data["head_sha"]) != "commit":
            raise HTTPError(422, "No commit found for SHA: " + data["head_sha"])
        c = {"id": next(self._ids), "app_id": app["id"], "head_sha": data["head_sha"], "name": data["name"],
             "external_id": None, "details_url": None, "status": "queued", "conclusion": None,
             "started_at": now_iso(), "completed_at": None, "title": None, "summary": None, "text": None,
             "suite_id": 1}
        self._apply_check_fields(c, data)
        self.check_runs[c["id"]] = c
        return 201, self._check_obj(c), {}

    def h_update_check_run(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        app = self._check_app(caller)
        c = self.check_runs.get(int(params["check_run_id"])) if params["check_run_id"].isdigit() else None
        if c is None or c["app_id"] != app["id"]:
            raise HTTPError(404, "Not Found")
        self._apply_check_fields(c, data)
        return 200, self._check_obj(c), {}

    def h_get_check_run(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        c = self.check_runs.get(int(params["check_run_id"])) if params["check_run_id"].isdigit() else None
        if c is None:
            raise HTTPError(404, "Not Found")
        return 200, self._check_obj(c), {}

    def h_list_check_runs(self, caller: Caller, params: dict, query: dict, data: Any):
        self._check_repo(params)
        sha = self._commit_sha(params["ref"])
        runs = [c for c in self.check_runs.values() if c["head_sha"] == sha
                and (not query.get("check_name") or c["name"] == query["check_name"])]
        chunk, headers = self._paginate(runs, query, f"/repos/{self.full_name}/commits/{params['ref']}/check-runs")
        return 200, {"total_count": len(runs), "check_runs": [self._check_obj(c) for c in chunk]}, headers
