"""GitHubForge against the fake GitHub, checked with git in the bare repository."""

from __future__ import annotations

import subprocess

import pytest
from forge_helpers import make_client, make_forge

from bot.forge.base import (
    BranchMovedError,
    BranchTouchedByHumansError,
    FileChange,
    Forge,
    ForgeError,
    ForgePermissionError,
    HeadMovedError,
    NotMergeableError,
    Permission,
    RateLimitedError,
    UnsupportedError,
)
from bot.forge.markers import REVIEW_MARKER, decode_meta, encode_meta, sticky_marker


def git(server, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(server.repo_path), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def candidate(forge, branch="kbot/gemm/n1", files=None):
    _, head = forge.default_head()
    files = files or {"kernels/gemm/n1/solution.json": '{"name": "n1"}\n', "kernels/gemm/n1/kernel.py": "K = 1\n"}
    return forge.commit_files(branch, head, files, f"candidate {branch}")


def test_is_a_forge(forge):
    assert isinstance(forge, Forge)
    assert forge.info.kind == "github" and forge.info.bot_login == "kbot-bot"
    assert not forge.info.supports_check_runs


def test_commit_files_is_one_atomic_commit(github_server, forge):
    _, main = forge.default_head()
    files = {
        "kernels/gemm/n1/solution.json": '{"name": "n1"}\n',
        "kernels/gemm/n1/kernel.py": "def run():\n    pass\n",
        "kernels/gemm/n1/bin.dat": bytes(range(256)),
        "README.md": None,  # deleted in the same commit
    }
    sha = forge.commit_files("kbot/gemm/n1", main, files, "gemm n1: tiled kernel")
    assert git(github_server, "rev-parse", "refs/heads/kbot/gemm/n1") == sha
    assert git(github_server, "rev-list", "--count", f"{main}..{sha}") == "1"
    assert git(github_server, "rev-parse", f"{sha}^") == main
    changed = git(github_server, "diff", "--name-status", main, sha).splitlines()
    assert sorted(changed) == sorted(["D\tREADME.md", "A\tkernels/gemm/n1/bin.dat",
                                      "A\tkernels/gemm/n1/kernel.py", "A\tkernels/gemm/n1/solution.json"])
    blob = subprocess.run(["git", "--git-dir", str(github_server.repo_path), "cat-file", "blob",
                           f"{sha}:kernels/gemm/n1/bin.dat"], check=True, capture_output=True).stdout
    assert blob == bytes(range(256))
    assert git(github_server, "log", "-1", "--format=%an <%ae>|%s", sha).startswith("kbot-bot <")
    assert forge.read_file("kernels/gemm/n1/kernel.py", ref="kbot/gemm/n1") == b"def run():\n    pass\n"
    assert forge.read_file("README.md", ref="kbot/gemm/n1") is None
    assert forge.read_file("README.md") is not None  # default branch untouched

    # A second commit fast-forwards the branch; a stale base is refused and changes nothing.
    sha2 = forge.commit_files("kbot/gemm/n1", sha, [FileChange("kernels/gemm/n1/kernel.py", b"K = 2\n")], "tune")
    assert git(github_server, "rev-parse", f"{sha2}^") == sha
    with pytest.raises(BranchMovedError):
        forge.commit_files("kbot/gemm/n1", sha, {"x.txt": "x"}, "stale")
    assert forge.branch_head("kbot/gemm/n1") == sha2


def test_commit_files_rejects_bad_input(forge):
    _, main = forge.default_head()
    for bad in ({"../x": "1"}, {"/abs": "1"}, {".git/config": "1"}, {"a//b": "1"}, {}):
        with pytest.raises(ForgeError):
            forge.commit_files("kbot/x/n1", main, bad, "bad")
    assert forge.branch_head("kbot/x/n1") is None


def test_branch_pushed_to_by_a_person_is_never_rewritten(github_server, forge):
    sha = candidate(forge)
    assert forge.branch_touched_by_humans("kbot/gemm/n1") == []
    human = github_server.push_commit("kbot/gemm/n1", {"kernels/gemm/n1/kernel.py": "K = 99\n"}, author="alice",
                                      message="my fix")
    touched = forge.branch_touched_by_humans("kbot/gemm/n1")
    assert [c.sha for c in touched] == [human] and touched[0].author_login == "alice"
    with pytest.raises(BranchTouchedByHumansError) as err:
        forge.commit_files("kbot/gemm/n1", human, {"kernels/gemm/n1/kernel.py": "K = 3\n"}, "bot again")
    assert "alice" in str(err.value)
    assert forge.branch_head("kbot/gemm/n1") == human
    assert [c.sha for c in forge.branch_commits("kbot/gemm/n1")] == [human, sha]


def test_commit_by_unknown_email_counts_as_human(github_server, forge):
    candidate(forge)
    github_server.push_commit("kbot/gemm/n1", {"a": "b"}, author="kbot-bot-impostor")
    github_server.accounts["kbot-bot-impostor"].email = "someone@example.com"  # email not linked to an account
    assert len(forge.branch_touched_by_humans("kbot/gemm/n1")) == 1


def test_open_pr_is_idempotent_with_labels_and_meta(github_server, forge):
    candidate(forge)
    meta = {"definition": "gemm", "parent": "n0", "campaign": "c1"}
    body = f"Tiled GEMM candidate.\n\n{encode_meta(meta)}\n"
    pr = forge.open_pr("kbot/gemm/n1", "gemm: n1", body, labels=["kbot", "candidate"])
    again = forge.open_pr("kbot/gemm/n1", "gemm: n1", body, labels=["kbot", "candidate"])
    assert again.number == pr.number
    assert len(github_server.pulls) == 1
    assert set(pr.labels) == {"kbot", "candidate"} and pr.is_open and pr.author == "kbot-bot"
    assert decode_meta(forge.get_pr(pr.number).body) == meta
    assert forge.find_open_pr("kbot/gemm/n1").number == pr.number
    assert forge.find_open_pr("kbot/gemm/n2") is None


def test_open_pr_survives_5xx_after_the_pr_was_created(github_server, forge):
    candidate(forge)
    github_server.fail_next("POST", r"/pulls$", status=502, after=True)
    pr = forge.open_pr("kbot/gemm/n1", "gemm: n1", "body")
    assert len(github_server.pulls) == 1 and pr.number in github_server.pulls


def test_commit_files_survives_5xx_on_every_step(github_server, forge):
    for route in (r"/git/blobs$", r"/git/trees$", r"/git/commits$", r"/git/refs$"):
        github_server.fail_next("POST", route, status=502, after=True)
    sha = candidate(forge)
    assert forge.branch_head("kbot/gemm/n1") == sha
    github_server.fail_next("PATCH", r"/git/refs/heads/kbot/gemm/n1$", status=500, after=True)
    sha2 = forge.commit_files("kbot/gemm/n1", sha, {"b.txt": "2"}, "second")
    assert forge.branch_head("kbot/gemm/n1") == sha2
    assert git(github_server, "rev-list", "--count", f"{sha}..{sha2}") == "1"


def test_list_prs_paginates_and_filters(github_server):
    forge = make_forge(github_server, per_page=4)
    for i in range(10):
        branch = f"kbot/{'gemm' if i % 2 else 'norm'}/n{i}"
        github_server.push_commit(branch, {f"f{i}": str(i)}, author="kbot-bot")
        forge.open_pr(branch, f"n{i}", "", labels=["kbot"] + (["winner"] if i in (3, 4) else []))
    forge.close_pr(1)
    assert len(list(forge.list_prs())) == 9
    assert len(list(forge.list_prs(state="all"))) == 10
    assert sorted(p.title for p in forge.list_prs(label="winner")) == ["n3", "n4"]
    assert sorted(p.title for p in forge.list_prs(head_prefix="kbot/gemm/")) == ["n1", "n3", "n5", "n7", "n9"]
    assert [p.title for p in forge.list_prs(state="closed")] == ["n0"]
    with pytest.raises(ForgeError):
        list(forge.list_prs(state="merged"))


def test_sticky_comment_found_across_pages_and_edited(github_server, forge):
    number = github_server.create_issue("campaign", author="maint")
    marker = sticky_marker("status")
    first = forge.upsert_comment(number, marker, f"{marker}\nround 1")
    for i in range(120):
        github_server.add_comment(number, f"chatter {i}", author="alice")
    # A person quoting the marker does not hijack the sticky comment.
    github_server.add_comment(number, f"{marker}\nfake status", author="mallory")
    second = forge.upsert_comment(number, marker, f"{marker}\nround 2")
    assert second.id == first.id and second.body.endswith("round 2")
    bots = [c for c in github_server.comments_on(number) if c["user"]["login"] == "kbot-bot"]
    assert len(bots) == 1 and bots[0]["body"].endswith("round 2")
    gets = [p for m, p, s in github_server.requests if m == "GET" and p.endswith(f"/issues/{number}/comments")]
    assert len(gets) >= 2  # 122 comments: two pages of 100
    with pytest.raises(ForgeError):
        forge.upsert_comment(number, marker, "body without the marker")


def test_sticky_comment_not_duplicated_by_5xx_after_post(github_server, forge):
    number = github_server.create_issue("campaign", author="maint")
    marker = sticky_marker("ack")
    github_server.fail_next("POST", r"/issues/\d+/comments$", status=502, n=2, after=True)
    forge.upsert_comment(number, marker, f"{marker}\nworking on it")
    assert len(github_server.comments_on(number)) == 1
    post_statuses = [s for m, p, s in github_server.requests if m == "POST" and p.endswith("/comments")]
    assert post_statuses == [502]  # the forge looked, found it, and did not post again


def test_rate_limited_write_waits_and_posts_once(github_server):
    waits = []
    forge = make_forge(github_server, sleep=waits.append)
    number = github_server.create_issue("x", author="maint")
    github_server.rate_limit_next(1, status=429, retry_after=7, method="POST", path_regex=r"/comments$")
    forge.upsert_comment(number, sticky_marker("ack"), f"{sticky_marker('ack')}\nok")
    assert len(github_server.comments_on(number)) == 1 and waits == [7.0]


def test_sticky_review_across_pages_and_edited(github_server, forge):
    sha = candidate(forge)
    pr = forge.open_pr("kbot/gemm/n1", "gemm: n1", "")
    alice = make_client(github_server, github_server.add_user("alice", permission="write"))
    pull = alice.get_repo(github_server.full_name).get_pull(pr.number)
    for i in range(3):
        pull.create_review(body=f"looks fine {i}", event="COMMENT")
    review = forge.upsert_review(pr.number, REVIEW_MARKER, f"{REVIEW_MARKER}\n## Report v1", commit_sha=sha)
    for i in range(105):  # people's reviews, quoting the marker: none of them is the bot's
        github_server.add_review(pr.number, f"{REVIEW_MARKER}\nnot the bot {i}", author="alice")
    again = forge.upsert_review(pr.number, REVIEW_MARKER, f"{REVIEW_MARKER}\n## Report v2", commit_sha=sha)
    assert again.id == review.id and again.body.endswith("Report v2") and again.commit_sha == sha
    bot_reviews = [r for r in github_server.reviews_on(pr.number) if r["user"]["login"] == "kbot-bot"]
    assert len(bot_reviews) == 1
    assert sum(1 for _ in forge.list_reviews(pr.number)) == 109


def test_reactions_labels_and_comments(github_server, forge):
    number = github_server.create_issue("x", author="maint")
    cid = github_server.add_comment(number, "/optimize", author="maint")["id"]
    forge.add_reaction(cid, "eyes")
    forge.add_reaction(cid, "eyes")
    assert [r["content"] for r in github_server.comments[cid]["reactions"]] == ["eyes"]
    forge.add_labels(number, ["kbot", "busy"])
    forge.remove_label(number, "busy")
    forge.remove_label(number, "busy")  # absent: no error
    assert forge.labels(number) == ["kbot"]
    c = forge.create_comment(number, "hello")
    assert forge.get_comment(c.id).body == "hello" and not c.author_is_bot
    assert [x.body for x in forge.list_comments(number)] == ["/optimize", "hello"]
    forge.delete_comment(c.id)
    forge.delete_comment(c.id)  # already gone: no error
    assert [x.id for x in forge.list_comments(number)] == [cid]


def test_statuses_and_check_runs_unsupported_with_token(github_server, forge):
    sha = candidate(forge)
    forge.set_status(sha, "pending", description="queued on gpu-h200")
    forge.set_status(sha, "success", description="1.8x", target_url="https://example.invalid/run/1")
    combined = forge.combined_status("kbot/gemm/n1")
    assert combined.state == "success" and combined.get("kbot/harness").description == "1.8x"
    with pytest.raises(ForgeError):
        forge.set_status(sha, "great")
    with pytest.raises(UnsupportedError):
        forge.create_check_run(sha, "kbot/harness")


def test_merge_is_sha_guarded(github_server, forge):
    sha = candidate(forge)
    pr = forge.open_pr("kbot/gemm/n1", "gemm: n1", "")
    old_main = forge.branch_head("main")
    github_server.mergeable_pending(pr.number, n=2)
    assert forge.wait_mergeable(pr.number, timeout=5).mergeable is True
    result = forge.merge(pr.number, sha, method="squash")
    assert forge.branch_head("main") == result.sha
    assert git(github_server, "rev-parse", f"{result.sha}^") == old_main
    assert git(github_server, "rev-list", "--count", f"{old_main}..{result.sha}") == "1"  # squashed
    assert git(github_server, "show", f"{result.sha}:kernels/gemm/n1/kernel.py") == "K = 1"
    assert forge.get_pr(pr.number).merged
    assert forge.merge(pr.number, sha).sha == result.sha  # re-running is harmless

    # Second candidate: its head moves after the benchmark.
    sha2 = candidate(forge, "kbot/gemm/n2", {"kernels/gemm/n2/kernel.py": "K = 2\n"})
    pr2 = forge.open_pr("kbot/gemm/n2", "gemm: n2", "")
    github_server.push_commit("kbot/gemm/n2", {"kernels/gemm/n2/kernel.py": "K = 22\n"}, author="alice")
    with pytest.raises(HeadMovedError):
        forge.merge(pr2.number, sha2)
    assert forge.branch_head("main") == result.sha


def test_merge_409_from_server_is_head_moved(github_server, forge, monkeypatch):
    """The head moves between the forge's check and the PUT: GitHub's 409 becomes HeadMovedError."""
    sha = candidate(forge)
    pr = forge.open_pr("kbot/gemm/n1", "gemm: n1", "")
    stale = forge.get_pr(pr.number)
    github_server.push_commit("kbot/gemm/n1", {"z": "1"}, author="alice")
    monkeypatch.setattr(forge, "get_pr", lambda number: stale)
    with pytest.raises(HeadMovedError):
        forge.merge(pr.number, sha)
    assert [s for m, p, s in github_server.requests if m == "PUT"] == [409]


def test_merge_survives_5xx_after_merge(github_server, forge):
    sha = candidate(forge)
    pr = forge.open_pr("kbot/gemm/n1", "gemm: n1", "")
    github_server.fail_next("PUT", r"/merge$", status=502, after=True)
    result = forge.merge(pr.number, sha)
    assert result.merged and forge.branch_head("main") == result.sha
    assert [s for m, p, s in github_server.requests if m == "PUT"] == [502]


def test_merge_conflict_is_not_mergeable(github_server, forge):
    sha = candidate(forge, files={"README.md": "bot version\n"})
    pr = forge.open_pr("kbot/gemm/n1", "gemm: n1", "")
    github_server.push_commit("main", {"README.md": "human version\n"}, author="maint")
    assert forge.wait_mergeable(pr.number, timeout=1).mergeable is False
    with pytest.raises(NotMergeableError):
        forge.merge(pr.number, sha)


def test_close_pr_with_comment_is_idempotent(github_server, forge):
    candidate(forge)
    pr = forge.open_pr("kbot/gemm/n1", "gemm: n1", "")
    forge.close_pr(pr.number, "Slower than the champion (0.93x); kept in the search tree.")
    closed = forge.close_pr(pr.number, "Slower than the champion (0.93x); kept in the search tree.")
    assert closed.state == "closed" and not closed.merged
    assert len(github_server.comments_on(pr.number)) == 1
    forge.delete_branch("kbot/gemm/n1")
    forge.delete_branch("kbot/gemm/n1")
    assert forge.branch_head("kbot/gemm/n1") is None


def test_permissions_and_teams(github_server, forge):
    github_server.set_permission("alice", "maintain")
    github_server.set_permission("tri", "triage")
    github_server.add_team_member("kbot-org", "kernels", "bob")
    github_server.add_team_member("kbot-org", "kernels", "carol", state="pending")
    assert forge.permission("alice") == Permission.MAINTAIN
    assert forge.permission("tri") == Permission.TRIAGE
    assert forge.permission("maint") == Permission.ADMIN
    assert forge.permission("stranger") == Permission.READ
    assert forge.permission("ghost") == Permission.NONE
    assert forge.permission("alice").at_least("write") and not forge.permission("tri").at_least(Permission.WRITE)
    assert forge.is_team_member("kbot-org", "kernels", "bob")
    assert not forge.is_team_member("kbot-org", "kernels", "carol")
    assert not forge.is_team_member("kbot-org", "kernels", "alice")
    assert not forge.is_team_member("kbot-org", "nope", "bob")


def test_read_file_and_errors(github_server, forge):
    assert forge.read_file("README.md") == b"# kernels\n"
    assert forge.read_file("nope.txt") is None
    candidate(forge)
    with pytest.raises(ForgeError, match="directory"):
        forge.read_file("kernels/gemm", ref="kbot/gemm/n1")
    outsider = make_forge(github_server, token=github_server.outsider_token)
    with pytest.raises(ForgePermissionError):
        outsider.commit_files("kbot/x/n1", forge.branch_head("main"), {"a": "b"}, "nope")


def test_primary_rate_limit_is_reported_not_slept_through(github_server):
    waits = []
    forge = make_forge(github_server, sleep=waits.append, max_wait=60)
    number = github_server.create_issue("x", author="maint")
    forge.default_branch()
    github_server.set_rate_limit(0, reset_in=3600)
    with pytest.raises(RateLimitedError) as err:
        forge.create_comment(number, "hello")
    assert err.value.retry_after > 3000 and waits == []
    with pytest.raises(RateLimitedError):
        forge.read_file("README.md")
    assert github_server.comments_on(number) == []


def test_merge_of_closed_pr_is_not_mergeable(github_server, forge):
    sha = candidate(forge)
    pr = forge.open_pr("kbot/gemm/n1", "gemm: n1", "")
    forge.close_pr(pr.number)
    with pytest.raises(NotMergeableError):
        forge.merge(pr.number, sha)
    assert [s for m, p, s in github_server.requests if m == "PUT"] == [405]


def test_bodies_over_githubs_limit_are_refused_before_writing(github_server, forge):
    number = github_server.create_issue("x", author="maint")
    huge = sticky_marker("status") + "\n" + "x" * 70_000
    with pytest.raises(ForgeError, match="65536"):
        forge.upsert_comment(number, sticky_marker("status"), huge)
    assert not [r for r in github_server.requests if r[0] == "POST"]
    # The fake refuses them too, as GitHub does.
    client = make_client(github_server, github_server.bot_token)
    import github as gh_lib

    with pytest.raises(gh_lib.GithubException) as err:
        client.get_repo(github_server.full_name).get_issue(number).create_comment("y" * 70_000)
    assert err.value.status == 422


def test_read_file_over_one_megabyte_goes_through_the_blob_api(github_server, forge):
    big = bytes(range(256)) * 5000  # 1.28 MB: the contents API answers without the content
    github_server.push_commit("main", {"data/big.bin": big}, author="maint")
    assert forge.read_file("data/big.bin") == big
    assert any(p.endswith("/git/blobs/" + git(github_server, "rev-parse", "main:data/big.bin"))
               for m, p, s in github_server.requests)


def test_enterprise_style_base_url_with_api_prefix(tmp_path, shared):  # the fake validates against ../shared
    from fakes.github_server import make_server

    server = make_server(tmp_path / "ghe", path_prefix="/api/v3").start()
    try:
        assert server.base_url.endswith("/api/v3")
        forge = make_forge(server)
        sha = candidate(forge)
        pr = forge.open_pr("kbot/gemm/n1", "gemm: n1", "")
        assert forge.merge(pr.number, sha).merged
        assert all(p.startswith("/repos/") or p == "/user" for m, p, s in server.requests)  # all under /api/v3
    finally:
        server.stop()
    assert server.validation_errors == []


def test_changed_files_come_from_the_real_diff(forge):
    """The promotion gate lists a PR's files through the compare API: the fake answers from git."""
    base = forge.branch_head(forge.default_branch())
    forge.commit_files("kbot/x/n1", base, {"kernels/x/a/solution.json": "{}", "kernels/x/a/k.py": "x = 1\n"}, "candidate")
    assert sorted(forge.changed_files("kbot/x/n1")) == ["kernels/x/a/k.py", "kernels/x/a/solution.json"]
    head = forge.commit_files("kbot/x/n1", forge.branch_head("kbot/x/n1"), {"README.md": "changed\n"}, "outside the folder")
    assert "README.md" in forge.changed_files(head)
