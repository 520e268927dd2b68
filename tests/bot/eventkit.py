"""Webhook payloads built from GitHub's own examples (../shared/github/webhook-examples.json), read in
place and adjusted per test; never copied into the repository."""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=2)
def _examples(path: str) -> dict:
    return {e["name"]: e for e in json.loads(Path(path).read_text())}


def example(shared: Path, event: str, action: str | None = None, index: int = 0) -> dict:
    exs = [x for x in _examples(str(shared / "github" / "webhook-examples.json"))[event]["examples"]
           if action is None or x.get("action") == action]
    return copy.deepcopy(exs[index])


def comment_event(shared: Path, *, body: str, login: str = "alice", number: int = 1, comment_id: int = 555,
                  repo: str = "octo/kernels", is_pr: bool = False, user_type: str = "User",
                  association: str = "OWNER", labels: tuple[str, ...] = (), action: str = "created") -> dict:
    p = example(shared, "issue_comment", "created")
    p["action"] = action
    p["comment"]["body"] = body
    p["comment"]["id"] = comment_id
    p["comment"]["author_association"] = association
    for who in (p["comment"]["user"], p["sender"]):
        who["login"] = login
        who["type"] = user_type
    p["issue"]["number"] = number
    p["issue"]["labels"] = [{"name": n} for n in labels]
    if is_pr:
        p["issue"]["pull_request"] = {"url": f"https://api.github.com/repos/{repo}/pulls/{number}"}
    else:
        p["issue"].pop("pull_request", None)
    p["repository"]["full_name"] = repo
    owner, name = repo.split("/")
    p["repository"]["name"] = name
    p["repository"]["owner"]["login"] = owner
    return p
