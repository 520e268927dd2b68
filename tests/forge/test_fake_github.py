"""The fake GitHub, driven only through PyGithub: behaviour the bot relies on, and its faults.

Every test here also passes the fixture's teardown check that all responses validated against
GitHub's OpenAPI description.
"""

from __future__ import annotations

import subprocess

import github
import pytest
from fakes.github.openapi import load_spec
from fakes.github_server import spec_path
from forge_helpers import make_client


def _repo(server, token=None, **kwargs):
    return make_client(server, token or server.bot_token, **kwargs).get_repo(server.full_name)


def _branch_with_file(repo, branch: str, path: str, text: str) -> str:
    base = repo.get_git_commit(repo.get_git_ref("heads/main").object.sha)
    blob = repo.create_git_blob(text, "utf-8")
    tree = repo.create_git_tree([github.InputGitTreeElement(path, "100644", "blob", sha=blob.sha)], base_tree=base.tree)
    commit = repo.create_git_commit(f"add {path}", tree, [base])
    repo.create_git_ref(f"refs/heads/{branch}", commit.sha)
    return commit.sha


def test_urls_point_at_the_fake_and_rate_limit_headers(github_server):
    gh = make_client(github_server, github_server.bot_token)
    repo = gh.get_repo(github_server.full_name)
    assert repo.url.startswith(github_server.base_url)
    assert repo.default_branch == "main"
    remaining, limit = gh.rate_limiting
    assert limit == 5000 and remaining < 5000


def test_git_data_objects_are_real_git(github_server, tmp_path):
    repo = _repo(github_server)
    sha = _branch_with_file(repo, "feature", "src/a.txt", "hello\n")
    assert repo.get_contents("src/a.txt", ref="feature").decoded_content == b"hello\n"
    assert repo.get_git_commit(sha).message == "add src/a.txt"
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "-b", "feature", str(github_server.repo_path), str(clone)], check=True)
    assert (clone / "src/a.txt").read_text() == "hello\n"
    tree = repo.get_git_tree(sha, recursive=True)
    assert {e.path for e in tree.tree} == {"README.md", "src", "src/a.txt"}


def test_ref_update_refuses_non_fast_forward(github_server):
    repo = _repo(github_server)
    first = _branch_with_file(repo, "b1", "x.txt", "1")
    main = repo.get_git_commit(repo.get_git_ref("heads/main").object.sha)
    other = repo.create_git_commit("sideways", main.tree, [main])
    ref = repo.get_git_ref("heads/b1")
    with pytest.raises(github.GithubException) as err:
        ref.edit(other.sha, force=False)
    assert err.value.status == 422 and "fast forward" in err.value.data["message"]
    assert repo.get_git_ref("heads/b1").object.sha == first
    ref.edit(other.sha, force=True)
    assert repo.get_git_ref("heads/b1").object.sha == other.sha
    with pytest.raises(github.GithubException) as err:
        repo.create_git_ref("refs/heads/b1", first)
    assert err.value.status == 422


def test_pulls_duplicate_filters_and_pagination(github_server):
    repo = _repo(github_server, per_page=5)
    for i in range(12):
        github_server.push_commit(f"kbot/d/n{i}", {f"f{i}.txt": str(i)}, author="kbot-bot")
        repo.create_pull(title=f"n{i}", body="", head=f"kbot/d/n{i}", base="main")
    with pytest.raises(github.GithubException) as err:
        repo.create_pull(title="again", body="", head="kbot/d/n0", base="main")
    assert err.value.status == 422 and "already exists" in str(err.value.data)
    pulls = list(repo.get_pulls(state="open"))
    assert len(pulls) == 12
    page_requests = [p for m, p, s in github_server.requests if m == "GET" and p.endswith("/pulls")]
    assert len(page_requests) == 3  # 5 + 5 + 2, following Link headers
    only = list(repo.get_pulls(state="open", head=f"{github_server.owner}:kbot/d/n3"))
    assert [p.title for p in only] == ["n3"]
    only[0].edit(state="closed")
    assert [p.number for p in repo.get_pulls(state="closed")] == [only[0].number]


def test_squash_merge_is_sha_guarded_and_real(github_server, tmp_path):
    repo = _repo(github_server)
    head = _branch_with_file(repo, "kbot/d/n1", "k.py", "v1\n")
    pr = repo.create_pull(title="cand", body="", head="kbot/d/n1", base="main")
    assert repo.get_pull(pr.number).mergeable is True
    old_main = repo.get_git_ref("heads/main").object.sha
    # A person pushes after the benchmark: the guarded merge must not go through.
    github_server.push_commit("kbot/d/n1", {"k.py": "v2\n"}, author="mallory")
    with pytest.raises(github.GithubException) as err:
        pr.merge(merge_method="squash", sha=head)
    assert err.value.status == 409 and "Head branch was modified" in err.value.data["message"]
    assert repo.get_git_ref("heads/main").object.sha == old_main
    new_head = repo.get_pull(pr.number).head.sha
    status = pr.merge(merge_method="squash", sha=new_head)
    assert status.merged
    main = repo.get_git_commit(repo.get_git_ref("heads/main").object.sha)
    assert main.sha == status.sha and [p.sha for p in main.parents] == [old_main]
    assert repo.get_contents("k.py").decoded_content == b"v2\n"
    merged = repo.get_pull(pr.number)
    assert merged.merged and merged.merge_commit_sha == status.sha and merged.state == "closed"
    with pytest.raises(github.GithubException) as err:
        pr.merge(merge_method="squash", sha=new_head)
    assert err.value.status == 405


def test_mergeable_pending_then_known(github_server):
    repo = _repo(github_server)
    _branch_with_file(repo, "b", "x", "1")
    number = repo.create_pull(title="t", body="", head="b", base="main").number
    github_server.mergeable_pending(number, n=2)
    assert repo.get_pull(number).mergeable is None
    assert repo.get_pull(number).mergeable is None
    assert repo.get_pull(number).mergeable is True


def test_comments_paginate_past_100_and_edit_delete(github_server):
    repo = _repo(github_server)
    number = github_server.create_issue("cmds", author="maint")
    for i in range(130):
        github_server.add_comment(number, f"c{i}", author="alice")
    issue = repo.get_issue(number)
    bodies = [c.body for c in issue.get_comments()]
    assert bodies == [f"c{i}" for i in range(130)]
    mine = issue.create_comment("bot says hi")
    mine.edit("bot says bye")
    assert repo.get_issue(number).get_comment(mine.id).body == "bot says bye"
    mine.delete()
    with pytest.raises(github.GithubException) as err:
        repo.get_issue(number).get_comment(mine.id)
    assert err.value.status == 404


def test_outsider_cannot_edit_others_comment_or_push(github_server):
    number = github_server.create_issue("x", author="maint")
    comment = github_server.add_comment(number, "/optimize", author="maint")
    outsider = _repo(github_server, github_server.outsider_token)
    with pytest.raises(github.GithubException) as err:
        outsider.get_issue(number).get_comment(comment["id"]).edit("/stop")
    assert err.value.status == 403
    with pytest.raises(github.GithubException) as err:
        outsider.create_git_blob("x", "utf-8")
    assert err.value.status == 403


def test_reactions_are_idempotent(github_server):
    repo = _repo(github_server)
    number = github_server.create_issue("x", author="maint")
    cid = github_server.add_comment(number, "/optimize", author="maint")["id"]
    comment = repo.get_issue(number).get_comment(cid)
    comment.create_reaction("eyes")
    comment.create_reaction("eyes")
    assert [s for m, p, s in github_server.requests if p.endswith("/reactions")] == [201, 200]
    assert repo.get_issue(number).get_comment(cid).raw_data["reactions"]["eyes"] == 1


def test_labels_auto_created_and_removed(github_server):
    repo = _repo(github_server)
    number = github_server.create_issue("x", author="maint")
    issue = repo.get_issue(number)
    issue.add_to_labels("kbot", "candidate")
    assert sorted(lb.name for lb in issue.get_labels()) == ["candidate", "kbot"]
    issue.remove_from_labels("kbot")
    assert [lb.name for lb in issue.get_labels()] == ["candidate"]
    with pytest.raises(github.GithubException) as err:
        issue.remove_from_labels("kbot")
    assert err.value.status == 404


def test_statuses_combined_and_check_runs_need_an_app(github_server):
    repo = _repo(github_server)
    sha = repo.get_git_ref("heads/main").object.sha
    commit = repo.get_commit(sha)
    commit.create_status("pending", context="kbot/harness", description="queued")
    commit.create_status("success", context="kbot/harness", description="done")
    commit.create_status("success", context="lint")
    combined = commit.get_combined_status()
    assert combined.state == "success" and combined.total_count == 2
    commit.create_status("failure", context="lint")
    assert repo.get_commit(sha).get_combined_status().state == "failure"
    with pytest.raises(github.GithubException) as err:
        repo.create_check_run(name="kbot/harness", head_sha=sha)
    assert err.value.status == 403


def test_permissions_and_team_membership(github_server):
    github_server.set_permission("alice", "maintain")
    github_server.add_team_member("kbot-org", "kernel-owners", "bob")
    github_server.add_team_member("kbot-org", "kernel-owners", "carol", state="pending")
    gh = make_client(github_server, github_server.bot_token)
    repo = gh.get_repo(github_server.full_name)
    assert repo.get_collaborator_permission("alice") == "write"        # legacy field folds maintain
    assert repo.get_collaborator_role_name("alice") == "maintain"
    assert repo.get_collaborator_role_name("maint") == "admin"
    with pytest.raises(github.GithubException) as err:
        repo.get_collaborator_permission("nobody-here")
    assert err.value.status == 404
    _, data = gh.requester.requestJsonAndCheck("GET", "/orgs/kbot-org/teams/kernel-owners/memberships/carol")
    assert data["state"] == "pending"
    with pytest.raises(github.GithubException):
        gh.requester.requestJsonAndCheck("GET", "/orgs/kbot-org/teams/kernel-owners/memberships/alice")


def test_injected_5xx_after_effect_duplicates_naive_retries(github_server):
    """The fault the forge must survive: PyGithub's default retry re-POSTs after a 5xx that took effect."""
    repo = _repo(github_server, retry=github.GithubRetry(total=3, backoff_factor=0))
    number = github_server.create_issue("x", author="maint")
    github_server.fail_next("POST", r"/issues/\d+/comments$", status=502, after=True)
    repo.get_issue(number).create_comment("hello")
    assert [c["body"] for c in github_server.comments_on(number)] == ["hello", "hello"]


def test_injected_5xx_before_effect_changes_nothing(github_server):
    repo = _repo(github_server, retry=None)
    number = github_server.create_issue("x", author="maint")
    github_server.fail_next("POST", r"/issues/\d+/comments$", status=503, n=1)
    with pytest.raises(github.GithubException) as err:
        repo.get_issue(number).create_comment("hello")
    assert err.value.status == 503
    assert github_server.comments_on(number) == []


def test_secondary_rate_limit_is_retried_by_pygithub(github_server):
    gh = make_client(github_server, github_server.bot_token,
                     retry=github.GithubRetry(total=3, backoff_factor=0, secondary_rate_wait=0))
    github_server.rate_limit_next(1, status=403, retry_after=0, path_regex=r"/repos/[^/]+/[^/]+$")
    assert gh.get_repo(github_server.full_name).full_name == github_server.full_name
    statuses = [s for m, p, s in github_server.requests if p == f"/repos/{github_server.full_name}"]
    assert statuses == [403, 200]


def test_bad_credentials(github_server):
    with pytest.raises(github.BadCredentialsException):
        make_client(github_server, "ghp_not_a_token").get_repo(github_server.full_name)


def test_validator_rejects_what_github_would_not_send(shared):
    spec = load_spec(str(spec_path()))
    assert spec.match("GET", "/repos/o/r/git/ref/heads/kbot/a/b") == "/repos/{owner}/{repo}/git/ref/{ref}"
    assert spec.match("GET", "/repos/o/r/pulls/7") == "/repos/{owner}/{repo}/pulls/{pull_number}"
    assert spec.match("GET", "/nothing/like/this") is None
    problems = spec.validate("GET", "/repos/o/r/pulls/7", 200, {"number": 7})
    assert any("'head' is a required property" in p for p in problems)
    problems = spec.validate("PUT", "/repos/o/r/pulls/7/merge", 200, {"merged": "yes", "sha": "x", "message": "m"})
    assert any("is not of type 'boolean'" in p for p in problems)
    assert spec.validate("PUT", "/repos/o/r/pulls/7/merge", 200, {"merged": True, "sha": "x", "message": "m"}) == []
    assert spec.validate("DELETE", "/repos/o/r/issues/comments/1", 204, None) == []
    assert spec.validate("GET", "/repos/o/r/pulls/7", 299, {})  # undocumented status


def test_malformed_requests_get_github_errors(github_server):
    gh = make_client(github_server, github_server.bot_token, retry=None)
    with pytest.raises(github.GithubException) as err:
        gh.requester.requestJsonAndCheck("POST", f"/repos/{github_server.full_name}/git/refs", input=["not", "an", "object"])
    assert err.value.status == 422
    with pytest.raises(github.GithubException) as err:
        gh.requester.requestJsonAndCheck("POST", f"/repos/{github_server.full_name}/git/trees",
                                         input={"tree": [{"path": "../x", "mode": "100644", "type": "blob",
                                                          "content": "x"}]})
    assert err.value.status == 422
    with pytest.raises(github.GithubException) as err:
        gh.requester.requestJsonAndCheck("GET", f"/repos/{github_server.owner}/other-repo")
    assert err.value.status == 404
    with pytest.raises(github.GithubException) as err:
        gh.requester.requestJsonAndCheck("GET", "/not/a/github/route")
    assert err.value.status == 404


def test_request_bodies_are_checked_against_the_description(github_server):
    gh = make_client(github_server, github_server.bot_token, retry=None)
    sha = gh.get_repo(github_server.full_name).get_git_ref("heads/main").object.sha
    with pytest.raises(github.GithubException) as err:
        gh.requester.requestJsonAndCheck("POST", f"/repos/{github_server.full_name}/statuses/{sha}",
                                         input={"state": "great", "context": "kbot/harness"})
    assert err.value.status == 422 and "Invalid request" in err.value.data["message"]
    with pytest.raises(github.GithubException) as err:
        gh.requester.requestJsonAndCheck("PATCH", f"/repos/{github_server.full_name}/git/refs/heads/main",
                                         input={"sha": 1234})
    assert err.value.status == 422
    assert len(github_server.request_errors) == 2
    assert github_server.statuses == {}


def test_every_route_of_the_fake_is_a_github_operation(github_server):
    spec = load_spec(str(spec_path()))
    for route in github_server.routes:
        assert route.method.lower() in spec.paths.get(route.template, {}), (route.method, route.template)


def test_mergeable_lag_after_push(github_server):
    github_server.mergeable_lag = 1
    repo = _repo(github_server)
    github_server.push_commit("b", {"x": "1"}, author="kbot-bot")
    created = repo.create_pull(title="t", body="", head="b", base="main")
    assert created.mergeable is None  # the create answer itself, as on GitHub
    number = created.number
    assert repo.get_pull(number).mergeable is True
    github_server.push_commit("b", {"x": "2"}, author="kbot-bot")
    assert repo.get_pull(number).mergeable is None
    assert repo.get_pull(number).mergeable is True
    with pytest.raises(ValueError):
        github_server.fail_next("GET", ".*", status=200)
