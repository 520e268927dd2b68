"""Builders for GitHub REST response objects, with every field the OpenAPI schemas mark required.

URLs are written as on github.com (``https://api.github.com``); the server rewrites them to its own
base URL when it serializes a response, exactly like a GitHub Enterprise host would answer.
"""

from __future__ import annotations

import base64
from typing import Any

API = "https://api.github.com"
WEB = "https://github.com"


def node_id(kind: str, ident: int | str) -> str:
    return base64.b64encode(f"{kind}:{ident}".encode()).decode().rstrip("=")


def user(login: str, uid: int, kind: str = "User") -> dict[str, Any]:
    u = f"{API}/users/{login}"
    return {
        "login": login, "id": uid, "node_id": node_id("U", uid), "type": kind, "site_admin": False,
        "avatar_url": f"https://avatars.githubusercontent.com/u/{uid}?v=4", "gravatar_id": "",
        "url": u, "html_url": f"{WEB}/{login}", "followers_url": f"{u}/followers",
        "following_url": f"{u}/following{{/other_user}}", "gists_url": f"{u}/gists{{/gist_id}}",
        "starred_url": f"{u}/starred{{/owner}}{{/repo}}", "subscriptions_url": f"{u}/subscriptions",
        "organizations_url": f"{u}/orgs", "repos_url": f"{u}/repos", "events_url": f"{u}/events{{/privacy}}",
        "received_events_url": f"{u}/received_events",
    }


def repository(owner: dict, name: str, rid: int, default_branch: str, created: str, pushed: str,
               full: bool = True) -> dict[str, Any]:
    full_name = f"{owner['login']}/{name}"
    r = f"{API}/repos/{full_name}"
    out: dict[str, Any] = {
        "id": rid, "node_id": node_id("R", rid), "name": name, "full_name": full_name, "owner": owner,
        "private": False, "html_url": f"{WEB}/{full_name}", "description": "kbot test repository",
        "fork": False, "url": r, "archive_url": f"{r}/{{archive_format}}{{/ref}}",
        "assignees_url": f"{r}/assignees{{/user}}", "blobs_url": f"{r}/git/blobs{{/sha}}",
        "branches_url": f"{r}/branches{{/branch}}", "collaborators_url": f"{r}/collaborators{{/collaborator}}",
        "comments_url": f"{r}/comments{{/number}}", "commits_url": f"{r}/commits{{/sha}}",
        "compare_url": f"{r}/compare/{{base}}...{{head}}", "contents_url": f"{r}/contents/{{+path}}",
        "contributors_url": f"{r}/contributors", "deployments_url": f"{r}/deployments",
        "downloads_url": f"{r}/downloads", "events_url": f"{r}/events", "forks_url": f"{r}/forks",
        "git_commits_url": f"{r}/git/commits{{/sha}}", "git_refs_url": f"{r}/git/refs{{/sha}}",
        "git_tags_url": f"{r}/git/tags{{/sha}}", "hooks_url": f"{r}/hooks",
        "issue_comment_url": f"{r}/issues/comments{{/number}}", "issue_events_url": f"{r}/issues/events{{/number}}",
        "issues_url": f"{r}/issues{{/number}}", "keys_url": f"{r}/keys{{/key_id}}", "labels_url": f"{r}/labels{{/name}}",
        "languages_url": f"{r}/languages", "merges_url": f"{r}/merges",
        "milestones_url": f"{r}/milestones{{/number}}", "notifications_url": f"{r}/notifications{{?since,all,participating}}",
        "pulls_url": f"{r}/pulls{{/number}}", "releases_url": f"{r}/releases{{/id}}",
        "stargazers_url": f"{r}/stargazers", "statuses_url": f"{r}/statuses/{{sha}}",
        "subscribers_url": f"{r}/subscribers", "subscription_url": f"{r}/subscription", "tags_url": f"{r}/tags",
        "teams_url": f"{r}/teams", "trees_url": f"{r}/git/trees{{/sha}}",
        "clone_url": f"{WEB}/{full_name}.git", "git_url": f"git://github.com/{full_name}.git",
        "ssh_url": f"git@github.com:{full_name}.git", "svn_url": f"{WEB}/{full_name}", "mirror_url": None,
        "homepage": None, "language": "Python", "forks": 0, "forks_count": 0, "stargazers_count": 0,
        "watchers": 0, "watchers_count": 0, "size": 0, "default_branch": default_branch,
        "open_issues": 0, "open_issues_count": 0, "has_issues": True, "has_projects": False,
        "has_wiki": False, "has_pages": False, "has_downloads": True, "has_discussions": False,
        "archived": False, "disabled": False, "license": None, "pushed_at": pushed, "created_at": created,
        "updated_at": pushed, "visibility": "public", "allow_squash_merge": True, "allow_merge_commit": True,
        "allow_rebase_merge": True, "delete_branch_on_merge": False,
    }
    if full:
        out.update({"network_count": 0, "subscribers_count": 0})
    return out


def git_person(name: str, email: str, date: str) -> dict[str, str]:
    return {"name": name, "email": email, "date": date}


def verification() -> dict[str, Any]:
    return {"verified": False, "reason": "unsigned", "signature": None, "payload": None, "verified_at": None}


def git_commit(repo_full: str, sha: str, tree: str, parents: list[str], author: dict, committer: dict,
               message: str) -> dict[str, Any]:
    r = f"{API}/repos/{repo_full}"
    return {
        "sha": sha, "node_id": node_id("C", sha), "url": f"{r}/git/commits/{sha}",
        "html_url": f"{WEB}/{repo_full}/commit/{sha}", "author": author, "committer": committer,
        "message": message, "tree": {"sha": tree, "url": f"{r}/git/trees/{tree}"},
        "parents": [{"sha": p, "url": f"{r}/git/commits/{p}", "html_url": f"{WEB}/{repo_full}/commit/{p}"}
                    for p in parents],
        "verification": verification(),
    }


def commit(repo_full: str, sha: str, tree: str, parents: list[str], author: dict, committer: dict,
           message: str, author_user: dict | None, committer_user: dict | None) -> dict[str, Any]:
    """The ``commit`` schema (commits list / get / compare): git data plus linked accounts."""
    r = f"{API}/repos/{repo_full}"
    return {
        "url": f"{r}/commits/{sha}", "sha": sha, "node_id": node_id("C", sha),
        "html_url": f"{WEB}/{repo_full}/commit/{sha}", "comments_url": f"{r}/commits/{sha}/comments",
        "commit": {
            "url": f"{r}/git/commits/{sha}", "author": author, "committer": committer, "message": message,
            "comment_count": 0, "tree": {"sha": tree, "url": f"{r}/git/trees/{tree}"},
            "verification": verification(),
        },
        "author": author_user, "committer": committer_user,
        "parents": [{"sha": p, "url": f"{r}/commits/{p}", "html_url": f"{WEB}/{repo_full}/commit/{p}"} for p in parents],
    }


def git_ref(repo_full: str, ref: str, sha: str, obj_type: str = "commit") -> dict[str, Any]:
    r = f"{API}/repos/{repo_full}"
    return {"ref": ref, "node_id": node_id("REF", ref), "url": f"{r}/git/{ref}",
            "object": {"type": obj_type, "sha": sha, "url": f"{r}/git/{obj_type}s/{sha}"}}


def tree_entry(repo_full: str, path: str, mode: str, typ: str, sha: str, size: int | None) -> dict[str, Any]:
    kind = {"blob": "blobs", "tree": "trees", "commit": "commits"}[typ]
    out = {"path": path, "mode": mode, "type": typ, "sha": sha, "url": f"{API}/repos/{repo_full}/git/{kind}/{sha}"}
    if typ == "blob" and size is not None:
        out["size"] = size
    return out


def content_file(repo_full: str, path: str, ref: str, sha: str, data: bytes) -> dict[str, Any]:
    r = f"{API}/repos/{repo_full}"
    encoded = base64.encodebytes(data).decode()  # GitHub wraps base64 at 60 columns; PyGithub accepts it
    return {
        "type": "file", "encoding": "base64", "size": len(data), "name": path.rsplit("/", 1)[-1], "path": path,
        "content": encoded, "sha": sha, "url": f"{r}/contents/{path}?ref={ref}",
        "git_url": f"{r}/git/blobs/{sha}", "html_url": f"{WEB}/{repo_full}/blob/{ref}/{path}",
        "download_url": f"https://raw.githubusercontent.com/{repo_full}/{ref}/{path}",
        "_links": {"self": f"{r}/contents/{path}?ref={ref}", "git": f"{r}/git/blobs/{sha}",
                   "html": f"{WEB}/{repo_full}/blob/{ref}/{path}"},
    }


def label(repo_full: str, lid: int, name: str, color: str, description: str | None) -> dict[str, Any]:
    return {"id": lid, "node_id": node_id("L", lid), "url": f"{API}/repos/{repo_full}/labels/{name}",
            "name": name, "description": description, "color": color, "default": False}


def link(href: str) -> dict[str, str]:
    return {"href": href}


def pull(repo_full: str, repo_obj: dict, p: dict, head_user: dict, full: bool) -> dict[str, Any]:
    """``pull-request`` (full) or ``pull-request-simple``. ``p`` is the server's record."""
    r = f"{API}/repos/{repo_full}"
    n = p["number"]
    out: dict[str, Any] = {
        "url": f"{r}/pulls/{n}", "id": p["id"], "node_id": node_id("PR", p["id"]),
        "html_url": f"{WEB}/{repo_full}/pull/{n}", "diff_url": f"{WEB}/{repo_full}/pull/{n}.diff",
        "patch_url": f"{WEB}/{repo_full}/pull/{n}.patch", "issue_url": f"{r}/issues/{n}",
        "commits_url": f"{r}/pulls/{n}/commits", "review_comments_url": f"{r}/pulls/{n}/comments",
        "review_comment_url": f"{r}/pulls/comments{{/number}}", "comments_url": f"{r}/issues/{n}/comments",
        "statuses_url": f"{r}/statuses/{p['head_sha']}", "number": n, "state": p["state"], "locked": False,
        "title": p["title"], "user": p["user"], "body": p["body"], "labels": p["labels"], "milestone": None,
        "active_lock_reason": None, "created_at": p["created_at"], "updated_at": p["updated_at"],
        "closed_at": p["closed_at"], "merged_at": p["merged_at"], "merge_commit_sha": p["merge_commit_sha"],
        "assignee": None, "assignees": [], "requested_reviewers": [], "requested_teams": [],
        "head": {"label": f"{head_user['login']}:{p['head_ref']}", "ref": p["head_ref"], "sha": p["head_sha"],
                 "user": head_user, "repo": repo_obj},
        "base": {"label": f"{repo_obj['owner']['login']}:{p['base_ref']}", "ref": p["base_ref"],
                 "sha": p["base_sha"], "user": repo_obj["owner"], "repo": repo_obj},
        "_links": {
            "self": link(f"{r}/pulls/{n}"), "html": link(f"{WEB}/{repo_full}/pull/{n}"),
            "issue": link(f"{r}/issues/{n}"), "comments": link(f"{r}/issues/{n}/comments"),
            "review_comments": link(f"{r}/pulls/{n}/comments"),
            "review_comment": link(f"{r}/pulls/comments{{/number}}"), "commits": link(f"{r}/pulls/{n}/commits"),
            "statuses": link(f"{r}/statuses/{p['head_sha']}"),
        },
        "author_association": p["author_association"], "auto_merge": None, "draft": p["draft"],
    }
    if full:
        out.update({
            "merged": p["merged"], "mergeable": p["mergeable"], "rebaseable": p["mergeable"],
            "mergeable_state": p["mergeable_state"], "merged_by": p["merged_by"], "comments": p["comments"],
            "review_comments": 0, "maintainer_can_modify": False, "commits": p["commits"],
            "additions": p["additions"], "deletions": p["deletions"], "changed_files": p["changed_files"],
        })
    return out


def issue_comment(repo_full: str, c: dict) -> dict[str, Any]:
    r = f"{API}/repos/{repo_full}"
    return {
        "id": c["id"], "node_id": node_id("IC", c["id"]), "url": f"{r}/issues/comments/{c['id']}",
        "html_url": f"{WEB}/{repo_full}/pull/{c['issue']}#issuecomment-{c['id']}", "body": c["body"],
        "user": c["user"], "created_at": c["created_at"], "updated_at": c["updated_at"],
        "issue_url": f"{r}/issues/{c['issue']}", "author_association": c["author_association"],
        "reactions": reaction_rollup(f"{r}/issues/comments/{c['id']}/reactions", c["reactions"]),
    }


def reaction_rollup(url: str, reactions: list[dict]) -> dict[str, Any]:
    counts = {k: 0 for k in ("+1", "-1", "laugh", "confused", "heart", "hooray", "eyes", "rocket")}
    for r in reactions:
        counts[r["content"]] += 1
    return {"url": url, "total_count": len(reactions), **counts}


def reaction(r: dict) -> dict[str, Any]:
    return {"id": r["id"], "node_id": node_id("REA", r["id"]), "user": r["user"], "content": r["content"],
            "created_at": r["created_at"]}


def review(repo_full: str, rv: dict) -> dict[str, Any]:
    r = f"{API}/repos/{repo_full}"
    n = rv["pull"]
    return {
        "id": rv["id"], "node_id": node_id("PRR", rv["id"]), "user": rv["user"], "body": rv["body"],
        "state": rv["state"], "commit_id": rv["commit_id"],
        "html_url": f"{WEB}/{repo_full}/pull/{n}#pullrequestreview-{rv['id']}",
        "pull_request_url": f"{r}/pulls/{n}", "submitted_at": rv["submitted_at"],
        "_links": {"html": link(f"{WEB}/{repo_full}/pull/{n}#pullrequestreview-{rv['id']}"),
                   "pull_request": link(f"{r}/pulls/{n}")},
        "author_association": rv["author_association"],
    }


def status(repo_full: str, s: dict) -> dict[str, Any]:
    return {
        "url": f"{API}/repos/{repo_full}/statuses/{s['sha']}", "avatar_url": None, "id": s["id"],
        "node_id": node_id("SC", s["id"]), "state": s["state"], "description": s["description"],
        "target_url": s["target_url"], "context": s["context"], "created_at": s["created_at"],
        "updated_at": s["created_at"], "creator": s["creator"],
    }


def simple_status(repo_full: str, s: dict) -> dict[str, Any]:
    """The ``simple-commit-status`` items of a combined status (required fields differ a little)."""
    out = status(repo_full, s)
    out["required"] = False
    return out


def integration(app: dict, owner: dict) -> dict[str, Any]:
    return {
        "id": app["id"], "slug": app["slug"], "node_id": node_id("A", app["id"]), "owner": owner,
        "name": app["name"], "description": "kbot test app", "external_url": "https://example.invalid/kbot",
        "html_url": f"{WEB}/apps/{app['slug']}", "created_at": app["created_at"], "updated_at": app["created_at"],
        "permissions": {"contents": "write", "pull_requests": "write", "issues": "write", "checks": "write",
                        "statuses": "write", "metadata": "read", "members": "read"},
        "events": ["issue_comment", "pull_request", "workflow_run"],
    }


def check_run(repo_full: str, c: dict, app_obj: dict) -> dict[str, Any]:
    r = f"{API}/repos/{repo_full}"
    return {
        "id": c["id"], "node_id": node_id("CR", c["id"]), "head_sha": c["head_sha"], "name": c["name"],
        "external_id": c["external_id"], "url": f"{r}/check-runs/{c['id']}",
        "html_url": f"{WEB}/{repo_full}/runs/{c['id']}", "details_url": c["details_url"],
        "status": c["status"], "conclusion": c["conclusion"], "started_at": c["started_at"],
        "completed_at": c["completed_at"],
        "output": {"title": c["title"], "summary": c["summary"], "text": c["text"], "annotations_count": 0,
                   "annotations_url": f"{r}/check-runs/{c['id']}/annotations"},
        "check_suite": {"id": c["suite_id"]}, "app": app_obj, "pull_requests": [],
    }


def error(message: str, status: int, errors: list | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"message": message,
                           "documentation_url": "https://docs.github.com/rest", "status": str(status)}
    if errors is not None:
        out["errors"] = errors
    return out


def issue(repo_full: str, i: dict, labels: list[dict], comments: int, pull: dict | None) -> dict[str, Any]:
    """The ``issue`` schema; PRs are issues too (then ``pull_request`` links to the PR)."""
    r = f"{API}/repos/{repo_full}"
    n = i["number"]
    out: dict[str, Any] = {
        "id": i["id"], "node_id": node_id("I", i["id"]), "url": f"{r}/issues/{n}", "repository_url": r,
        "labels_url": f"{r}/issues/{n}/labels{{/name}}", "comments_url": f"{r}/issues/{n}/comments",
        "events_url": f"{r}/issues/{n}/events", "html_url": f"{WEB}/{repo_full}/{'pull' if pull else 'issues'}/{n}",
        "number": n, "state": i["state"], "title": i["title"], "body": i["body"], "user": i["user_obj"],
        "labels": labels, "assignee": None, "assignees": [], "milestone": None, "locked": False,
        "comments": comments, "created_at": i["created_at"], "updated_at": i["updated_at"],
        "closed_at": i["closed_at"], "author_association": i["author_association"],
    }
    if pull is not None:
        out["pull_request"] = {"url": f"{r}/pulls/{n}", "html_url": f"{WEB}/{repo_full}/pull/{n}",
                               "diff_url": f"{WEB}/{repo_full}/pull/{n}.diff",
                               "patch_url": f"{WEB}/{repo_full}/pull/{n}.patch", "merged_at": pull["merged_at"]}
    return out
