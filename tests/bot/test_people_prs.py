"""Kernels from people on (the fake) GitHub: a person's PR, from a fork or a branch, is benchmarked only
after a maintainer's `/evaluate` (permission by API), through a dispatch of the bench workflow from the
default branch; its result is reviewed like an agent's, and it is merged only by the same rules, the
sha guard and a maintainer's approving review of the measured head. `/evaluate` on a PR that will not
be benchmarked leaves no pending status behind."""

from __future__ import annotations

import json

import pytest
from e2ekit import CHAMP_HASH, DEF, Env
from eventkit import example
from reportkit import good

from bot.campaign.submission import SUBMISSION_MARKER, dispatch_title, read_record
from bot.forge.markers import REVIEW_MARKER
from harness.schema import parse_solution

MAINTAINER = "maria"


def person_solution(name: str = "ada_fused", tweak: str = ""):
    return parse_solution({
        "name": name, "definition": DEF, "author": "Ada Lovelace",
        "spec": {"language": "triton", "target_hardware": ["NVIDIA_H200"], "entry_point": "main.py::run", "destination_passing_style": True},
        "sources": [{"path": "main.py", "content": f"# Ada's GDN decode kernel{tweak}\nimport triton\n\n\ndef run(q):\n    pass\n"}]})


def person_files(sol, extra: dict | None = None) -> dict:
    folder = f"kernels/{DEF}/{sol.name}"
    return {f"{folder}/solution.json": sol.to_json(indent=2), f"{folder}/main.py": sol.sources[0].content, **(extra or {})}


@pytest.fixture
def env(github_server, shared, tmp_path, repo):
    files = {
        f"kernels/{DEF}/champion.json": json.dumps({"definition": DEF, "solution": "champ_v1", "solution_hash": CHAMP_HASH,
                                                    "pr": None, "history": []}),
        f"definitions/{DEF}/definition.json": (repo / "definitions" / DEF / "definition.json").read_text(),
        ".github/workflows/bench.yml": (repo / ".github" / "workflows" / "bench.yml").read_text(),
    }
    e = Env(github_server, shared, tmp_path, repo, files=files)
    github_server.set_permission(MAINTAINER, "maintain")
    github_server.add_user("ada")  # no role on the repository: an outside contributor
    return e


def reply(env, number, comment):
    return [c for c in env.bot_comments(number) if f"kbot:reply:{comment['id']}" in c["body"]][0]["body"]


def dispatched_bench_done(env, rep, dispatch: dict):
    """The bench run GitHub starts for a dispatch: event workflow_dispatch on the default branch, titled
    by bench.yml's run-name from the dispatch's inputs."""
    p = example(env.shared, "workflow_run", "completed")
    run = p["workflow_run"]
    main = env.forge.branch_head("main")
    run.update(event="workflow_dispatch", path=".github/workflows/bench.yml", head_branch="main", head_sha=main,
               conclusion="success", display_title=dispatch_title(int(dispatch["inputs"]["pr"]), dispatch["inputs"]["sha"]),
               html_url=f"https://github.com/{env.server.full_name}/actions/runs/2")
    run["head_repository"]["full_name"] = env.server.full_name
    p["repository"]["full_name"] = env.server.full_name
    env.results[main] = rep
    return env.deliver("workflow_run", p)


def test_a_fork_pr_is_benchmarked_only_after_a_maintainer_s_evaluate_then_reviewed_approved_and_merged(env):
    sol = person_solution()
    n = env.server.open_fork_pr("ada", "my-gdn-kernel", person_files(sol), author="ada", title="A faster GDN decode")
    pr = env.forge.get_pr(n)
    assert pr.from_fork and pr.author == "ada"
    head = pr.head_sha

    # The PR's own opened event: nothing is started and no status is set (bench.yml's gate skips it too).
    opened = example(env.shared, "pull_request", "opened")
    opened["pull_request"].update(number=n, user={"login": "ada", "type": "User"})
    opened["pull_request"]["head"].update(ref="my-gdn-kernel", sha=head, repo={"full_name": "ada/kernels"})
    opened["repository"]["full_name"] = env.server.full_name
    env.deliver("pull_request", opened)
    assert env.forge.combined_status(head).get("kbot/harness") is None and env.server.dispatches == []

    # The author cannot start it (no role here; whatever the payload's association says).
    c, p = env.comment(n, "/evaluate", author="ada", association="OWNER")
    env.deliver("issue_comment", p)
    assert env.reactions(c) == ["eyes", "confused"] and env.server.dispatches == []
    assert env.forge.combined_status(head).get("kbot/harness") is None

    # A maintainer's /evaluate: the record for this head, one dispatch of bench.yml on main, pending.
    c, p = env.comment(n, "/evaluate", author=MAINTAINER)
    env.deliver("issue_comment", p)
    assert env.reactions(c) == ["eyes", "rocket"], reply(env, n, c)
    (d,) = env.server.dispatches
    assert d["workflow"] == ".github/workflows/bench.yml" and d["ref"] == "main" and d["by"] == env.server.bot_login
    assert d["inputs"] == {"pr": str(n), "sha": head, "profile": "false"}
    sub = read_record(env.forge, env.forge.get_pr(n))
    assert sub is not None and sub.head_sha == head and sub.authorized_by == MAINTAINER and sub.solution_hash == sol.content_hash()
    assert env.forge.combined_status(head).get("kbot/harness").state == "pending"

    # The bench's result: the same review as an agent's; the rules hold, the approval is missing.
    rep = good(ratio=(1.10, 1.08, 1.12), solution=sol.name, solution_hash=sol.content_hash(), baseline_hash=CHAMP_HASH, definition=DEF)
    assert dispatched_bench_done(env, rep, d).status == 202
    reviews = [r for r in env.server.reviews_on(n) if REVIEW_MARKER in r["body"]]
    assert len(reviews) == 1 and "Decision: REJECT" in reviews[0]["body"]
    assert "waiting for an approving review of the measured head" in reviews[0]["body"]
    # waiting for a maintainer, not rejected on its figures: pending, not a green check
    assert env.forge.combined_status(head).get("kbot/harness").state == "pending"
    assert env.forge.get_pr(n).is_open and not env.forge.get_pr(n).merged

    # /promote before an approval: still waiting. A writer's approval is not enough (policy: maintain).
    env.server.set_permission("walt", "write")
    env.server.add_review(n, "looks fine", author="walt", state="APPROVED")
    c, p = env.comment(n, "/promote", author=MAINTAINER)
    env.deliver("issue_comment", p)
    assert "waiting for an approving review" in reply(env, n, c) and not env.forge.get_pr(n).merged

    # The maintainer approves the measured head, then /promote: the sha-guarded merge and the pointer.
    env.server.add_review(n, "I read it: lgtm", author=MAINTAINER, state="APPROVED")
    c, p = env.comment(n, "/promote", author=MAINTAINER)
    env.deliver("issue_comment", p)
    assert "Decision: **promote**" in reply(env, n, c), reply(env, n, c)
    merged = env.forge.get_pr(n)
    assert merged.merged
    champ = json.loads(env.forge.read_file(f"kernels/{DEF}/champion.json"))
    assert champ["pr"] == n and champ["sha"] == head and champ["solution_path"] == f"kernels/{DEF}/{sol.name}/solution.json"
    assert env.forge.read_file(champ["solution_path"]) is not None  # the person's files are on main


def test_a_push_after_evaluate_needs_a_new_evaluate_and_the_sha_guard_holds(env):
    sol = person_solution()
    n = env.server.open_fork_pr("ada", "k", person_files(sol), author="ada", title="GDN")
    c, p = env.comment(n, "/evaluate", author=MAINTAINER)
    env.deliver("issue_comment", p)
    (d,) = env.server.dispatches
    first = d["inputs"]["sha"]
    # Ada pushes again before the result lands; the maintainer had approved the first head.
    env.server.add_review(n, "lgtm", author=MAINTAINER, state="APPROVED")
    second = env.server.push_fork_commit(n, person_files(sol, {f"kernels/{DEF}/{sol.name}/NOTES.md": "more"}), author="ada")
    rep = good(ratio=(1.2, 1.15, 1.25), solution=sol.name, solution_hash=sol.content_hash(), baseline_hash=CHAMP_HASH, definition=DEF)
    dispatched_bench_done(env, rep, d)
    assert not env.forge.get_pr(n).merged  # measured head is not the PR head: rebenchmark, never a merge
    body = [r for r in env.server.reviews_on(n) if REVIEW_MARKER in r["body"]][0]["body"]
    assert "Decision: REBENCHMARK" in body
    # A run titled for a sha nobody authorized (the new head, or any sha) is ignored.
    forged = dict(d, inputs={"pr": str(n), "sha": second})
    env.results.clear()
    before = len(env.server.reviews_on(n))
    dispatched_bench_done(env, rep, forged)
    assert env.server.reviews_on(n)[-1]["body"] == body and len(env.server.reviews_on(n)) == before
    assert env.forge.combined_status(second).get("kbot/harness") is None
    assert first != second


@pytest.mark.parametrize("case", ["outside kernels", "two folders", "not a solution", "unknown definition"])
def test_evaluate_on_a_pr_that_will_not_be_benchmarked_leaves_no_pending_status(env, case):
    sol = person_solution()
    files = {
        "outside kernels": person_files(sol, {".github/workflows/bench.yml": "on: push\n"}),
        "two folders": {**person_files(sol), **person_files(person_solution("other"))},
        "not a solution": {f"kernels/{DEF}/x/solution.json": "{\"name\": 1}"},
        "unknown definition": {f"kernels/nope/{sol.name}/solution.json": sol.model_copy(update={"definition": "nope"}).to_json()},
    }[case]
    n = env.server.open_fork_pr("ada", "k", files, author="ada", title="t")
    head = env.forge.get_pr(n).head_sha
    c, p = env.comment(n, "/evaluate", author=MAINTAINER)
    env.deliver("issue_comment", p)
    assert env.reactions(c) == ["eyes", "confused"]
    assert "not benchmarked" in reply(env, n, c)
    assert env.forge.combined_status(head).get("kbot/harness") is None  # the bug: a pending status left forever
    assert env.server.dispatches == [] and not any(SUBMISSION_MARKER in x["body"] for x in env.bot_comments(n))


def test_a_kbot_branch_opened_by_a_person_is_a_person_s_pr_not_a_labelled_bench(env):
    """The security probe's case: a `kbot/...` branch of this repository opened by a person. The label
    path would have set pending for a bench that bench.yml never runs (it wants the bot's PRs)."""
    sol = person_solution()
    env.server.set_permission("bob", "write")
    env.server.push_commit("kbot/x/y", {**person_files(sol), "README.md": "changed"}, author="bob")
    pr = env.forge.open_pr("kbot/x/y", "kbot: not really", "by a person")  # opened through the API ...
    env.server.pulls[pr.number]["user"] = env.server.accounts["bob"].obj()  # ... as bob
    head = env.forge.get_pr(pr.number).head_sha
    c, p = env.comment(pr.number, "/evaluate", author=MAINTAINER)
    env.deliver("issue_comment", p)
    assert env.reactions(c) == ["eyes", "confused"] and "README.md" in reply(env, pr.number, c)
    assert "kbot:bench" not in env.forge.get_pr(pr.number).labels
    assert env.forge.combined_status(head).get("kbot/harness") is None and env.server.dispatches == []


def test_evaluate_on_a_closed_person_pr_sets_nothing(env):
    sol = person_solution()
    n = env.server.open_fork_pr("ada", "k", person_files(sol), author="ada", title="t")
    env.server.pulls[n]["state"] = "closed"
    env.server.issues[n]["state"] = "closed"
    head = env.forge.get_pr(n).head_sha
    c, p = env.comment(n, "/evaluate", author=MAINTAINER)
    env.deliver("issue_comment", p)
    assert env.reactions(c) == ["eyes", "confused"]
    assert env.forge.combined_status(head).get("kbot/harness") is None and env.server.dispatches == []
