"""Event routing (pull_request, workflow_run) and reading bench artifacts strictly as data."""

from __future__ import annotations

import json

import pytest
from candkit import bot_candidate
from eventkit import example
from memforge import MemForge
from reportkit import bench_for_pr, good

from bot.commands.services import ForgeServices
from bot.intake.events import EventRouter
from bot.review.publish import publish_results
from bot.review.results import ResultsError

DEF = "gdn_decode_qk4_v8_d128_k_last"


@pytest.fixture
def forge():
    return MemForge()


def router(forge, fetch=None):
    return EventRouter(lambda p: forge, lambda f: ForgeServices(f), None, fetch)


def pr_event(shared, forge, branch, *, fork=False, action="opened", author=None):
    p = example(shared, "pull_request", action)
    pr = p["pull_request"]
    pr["user"]["login"] = author or forge.info.bot_login
    pr["head"]["ref"] = branch
    pr["head"]["sha"] = "c" * 40
    pr["base"]["repo"]["full_name"] = forge.info.repo
    pr["head"]["repo"]["full_name"] = "evil/fork" if fork else forge.info.repo
    return p


def test_pull_request_on_bot_branch_sets_pending(shared, forge):
    assert router(forge).handle("pull_request", pr_event(shared, forge, f"kbot/{DEF}/n1")) == "done"
    assert forge.combined_status("c" * 40).get("kbot/harness").state == "pending"
    assert router(forge).handle("pull_request", pr_event(shared, forge, "kbot/x", action="synchronize")) == "done"


@pytest.mark.parametrize("branch,fork", [("feature/x", False), (f"kbot/{DEF}/n1", True)])
def test_pull_request_elsewhere_is_ignored(shared, forge, branch, fork):
    assert router(forge).handle("pull_request", pr_event(shared, forge, branch, fork=fork)) == "ignored"
    assert not forge.statuses


def run_event(shared, forge, branch, sha, **over):
    p = example(shared, "workflow_run", "completed")
    p["workflow_run"].update(event="pull_request", path=".github/workflows/bench.yml", head_branch=branch,
                             head_sha=sha, conclusion="success", html_url="https://github.com/o/r/actions/runs/1")
    p["workflow_run"]["head_repository"]["full_name"] = forge.info.repo
    p["repository"]["full_name"] = forge.info.repo
    p["workflow_run"].update(over)
    return p


def candidate(forge, n=1):
    return bot_candidate(forge, DEF, f"n{n}")


def test_workflow_run_publishes_review(shared, forge):
    pr = candidate(forge)

    def fetch(f, run, dest):
        bench_for_pr(dest, forge, f.find_open_pr(run["head_branch"]), good(baseline=None, baseline_hash=None, definition=DEF))
        return True

    r = router(forge, fetch)
    assert r.handle("workflow_run", run_event(shared, forge, pr.head_branch, pr.head_sha)) == "done"
    assert len(forge.reviews[pr.number]) == 1
    # first champion: promoted (no champion.json yet) -> merged and pointer written
    assert forge.get_pr(pr.number).merged
    assert json.loads(forge.read_file(f"kernels/{DEF}/champion.json"))["pr"] == pr.number


@pytest.mark.parametrize("over", [{"path": ".github/workflows/ci.yml"}, {"event": "push"},
                                  {"head_branch": "main"}, {"head_sha": "not-a-sha"}])
def test_workflow_run_filters(shared, forge, over):
    pr = candidate(forge)
    calls = []
    r = router(forge, lambda *a: calls.append(a) or False)
    assert r.handle("workflow_run", run_event(shared, forge, pr.head_branch, pr.head_sha, **over)) == "ignored"
    assert calls == []


def test_workflow_run_from_a_fork_is_ignored(shared, forge):
    pr = candidate(forge)
    p = run_event(shared, forge, pr.head_branch, pr.head_sha)
    p["workflow_run"]["head_repository"]["full_name"] = "evil/fork"
    assert router(forge, lambda *a: True).handle("workflow_run", p) == "ignored"


def test_missing_results_mark_error(shared, forge):
    pr = candidate(forge)
    assert router(forge, lambda *a: False).handle("workflow_run", run_event(shared, forge, pr.head_branch, pr.head_sha)) == "failed"
    assert forge.combined_status(pr.head_sha).get("kbot/harness").state == "error"
    assert router(forge).handle("workflow_run", run_event(shared, forge, pr.head_branch, pr.head_sha)) == "skipped"


def test_publish_refuses_non_candidate_pr(forge):
    forge.commit_files("feature/x", forge.branches["main"], {"a": "b"}, "x")
    pr = forge.open_pr("feature/x", "t", "b")
    with pytest.raises(ResultsError):
        publish_results(forge, pr.number, pr.head_sha, report=good())


def test_publish_without_usable_report(forge, tmp_path):
    pr = candidate(forge)
    out = publish_results(forge, pr.number, pr.head_sha, results_dir=tmp_path)
    assert out.state == "error" and forge.combined_status(pr.head_sha).get("kbot/harness").state == "error"


def _zip(members: dict[str, bytes], *, symlink: str | None = None) -> bytes:
    import io
    import stat
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo(symlink)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, "/etc/passwd")
    return buf.getvalue()


def test_safe_extract_zip(tmp_path):
    from bot.intake.artifacts import ArtifactError, safe_extract_zip

    good_zip = _zip({"run/report.json": b"{}", "kbot-bench.json": b"{}"})
    assert sorted(safe_extract_zip(good_zip, tmp_path / "a")) == ["kbot-bench.json", "run/report.json"]
    for bad in (_zip({"../escape.json": b"x"}), _zip({"/abs.json": b"x"}), _zip({"a/../../b": b"x"}),
                _zip({"ok.json": b"x"}, symlink="link.json"), b"not a zip"):
        with pytest.raises(ArtifactError):
            safe_extract_zip(bad, tmp_path / "b")
    assert not (tmp_path / "escape.json").exists()
    bomb = _zip({"big.json": b"\0" * (2 << 20)})
    with pytest.raises(ArtifactError, match="size limit"):
        safe_extract_zip(bomb, tmp_path / "c", budget=[1 << 20])


def test_publish_leaves_closed_prs_alone(forge):
    pr = candidate(forge)
    forge.close_pr(pr.number)
    out = publish_results(forge, pr.number, pr.head_sha, report=good())
    assert out.state == "skipped" and pr.number not in forge.reviews


def test_workflow_run_opens_the_next_round_after_publishing(shared, forge):
    """App mode: once a result is published, the campaign's next round is asked for; a failure there
    does not undo the published review."""
    pr = candidate(forge)

    def fetch(f, run, dest):
        bench_for_pr(dest, forge, f.find_open_pr(run["head_branch"]), good(baseline=None, baseline_hash=None, definition=DEF))
        return True

    calls = []
    r = EventRouter(lambda p: forge, lambda f: ForgeServices(f), None, fetch, after_results=lambda f, n: calls.append(n))
    assert r.handle("workflow_run", run_event(shared, forge, pr.head_branch, pr.head_sha)) == "done"
    assert calls == [pr.number]

    pr2 = candidate(forge, 2)

    def boom(f, n):
        raise RuntimeError("agent unavailable")

    r = EventRouter(lambda p: forge, lambda f: ForgeServices(f), None, fetch, after_results=boom)
    assert r.handle("workflow_run", run_event(shared, forge, pr2.head_branch, pr2.head_sha)) == "done"
    assert len(forge.reviews[pr2.number]) == 1


@pytest.mark.parametrize("author", ["alice", "kbot", "evil[bot]"])
def test_pull_request_not_opened_by_the_bot_gets_no_status(shared, forge, author):
    p = pr_event(shared, forge, f"kbot/{DEF}/n1", author=author)
    assert router(forge).handle("pull_request", p) == "ignored"
    assert not forge.statuses
