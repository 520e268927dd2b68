"""Up to date before judged, on the fake GitHub REST server (through GitHubForge / PyGithub, answers
validated against GitHub's OpenAPI description):

two candidates measured against the same champion; the first is promoted, so the second falls behind
`main` and was paired with a champion that is no longer current. Its report does not merge it and does
not just say "rebenchmark": the bot brings the branch up to date (PUT /pulls/{n}/update-branch with the
expected head), checks the merge commit by content, records it in the signed meta block, marks the new
head pending, and only the bench of the NEW head can promote it (the sha-guarded merge of that head).

And the identity the signed head carries must survive the update without letting a person's commits
in: a push right after the update, or a hand-made "merge" with the right parents and an extra file,
is not recorded, and such a head is never merged."""

from __future__ import annotations

import json

import pytest
from e2ekit import CHAMP_HASH, CHAMPION, DEF, Env
from reportkit import bench_for_pr, good, stand_in

from bot.campaign.attempts import ensure_attempt, update_attempt
from bot.forge.github import GitHubForge
from bot.forge.markers import REVIEW_MARKER, decode_meta
from bot.forge.trusted_meta import bot_merges, pushed_head
from tests.fakes.github.gitstore import TreeEntry
from tests.fakes.github.server import Person, now_iso


@pytest.fixture
def env(github_server, shared, tmp_path, repo):
    champion = {f"kernels/{DEF}/champion.json": json.dumps(
        {"definition": DEF, "solution": "champ_v1", "solution_hash": CHAMP_HASH, "pr": None, "history": []})}
    holder: list[Env] = []
    known = {CHAMP_HASH: CHAMPION}

    def fetch(forge, run, dest):
        """bench.yml's artifact for the run's head: the report the test chose, paired with the champion
        it names (any solution the test registered)."""
        from harness.schema import Solution

        e = holder[0]
        pr, rep = forge.find_open_pr(run["head_branch"]), e.results.get(run["head_sha"])
        if pr is None or rep is None:
            return False
        meta = decode_meta(pr.body)
        sol = Solution.model_validate_json(forge.read_file(meta["solution_path"], ref=run["head_sha"]))
        known[sol.content_hash()] = sol
        bench_for_pr(dest, forge, pr, rep, solution=sol, baseline=known.get(rep.baseline_hash))
        return True

    e = Env(github_server, shared, tmp_path, repo, files=champion, fetch=fetch)
    holder.append(e)
    return e


def two_candidates(env):
    issue = env.server.create_issue("go", author="alice")
    _, p = env.comment(issue, f"/optimize {DEF} --candidates 2")
    env.deliver("issue_comment", p)
    a, b = env.pulls()
    meta = {n: decode_meta(env.forge.get_pr(n).body) for n in (a, b)}
    return a, b, meta


def rep(meta, ratio, baseline_meta=None):
    base = baseline_meta or {"solution": "champ_v1", "solution_hash": CHAMP_HASH}
    return good(ratio=(ratio, ratio * 0.98, ratio * 1.02), solution=meta["solution"], solution_hash=meta["solution_hash"],
                baseline=base["solution"], baseline_hash=base["solution_hash"], definition=DEF)


def review_of(env, number):
    (r,) = [r for r in env.server.reviews_on(number) if REVIEW_MARKER in r["body"]]
    return r["body"]


def test_a_stale_pr_is_updated_and_measured_again_before_it_is_merged(env):
    a, b, meta = two_candidates(env)
    old_b = env.forge.get_pr(b).head_sha
    env.bench_done(a, rep(meta[a], 1.10))
    assert env.forge.get_pr(a).merged  # main moved: a squash merge and the pointer commit
    main_after_a = env.forge.branch_head("main")

    # B was measured against the old champion, at a head behind main: not merged, brought up to date
    env.bench_done(b, rep(meta[b], 1.20))
    pr = env.forge.get_pr(b)
    assert not pr.merged and pr.is_open and pr.head_sha != old_b
    assert ("PUT", f"/repos/{env.server.full_name}/pulls/{b}/update-branch", 202) in env.server.requests
    (merge,) = env.forge.branch_commits(pr.head_sha, base=old_b)[:1]
    assert merge.parents == (old_b, main_after_a) and merge.committer_email == "noreply@github.com"
    m = decode_meta(pr.body)
    assert pushed_head(m) == pr.head_sha and bot_merges(m) == [pr.head_sha]
    assert env.forge.combined_status(pr.head_sha).get("kbot/harness").state == "pending"
    body = review_of(env, b)
    assert "Decision: REBENCHMARK" in body and "Brought up to date with the default branch" in body

    # the bench of the new head, against the new champion: now judged, and merged at exactly that head
    new_head = pr.head_sha
    env.bench_done(b, rep(meta[b], 1.08, baseline_meta=meta[a]))
    assert "Decision: PROMOTE" in review_of(env, b)
    merged = env.forge.get_pr(b)
    assert merged.merged
    champ = json.loads(env.forge.read_file(f"kernels/{DEF}/champion.json"))
    assert champ["pr"] == b and champ["sha"] == new_head and champ["history"][0]["pr"] == a
    # the update-branch merge changed nothing outside B's kernel folder: main = main_after_a + the kernel
    changed = env.forge.changed_files(merged.merge_commit_sha, main_after_a)
    folder = meta[b]["solution_path"].rsplit("/", 1)[0]
    assert changed and all(p.startswith(folder + "/") for p in changed)


def evil_merge(server, number, files):
    """What a person with push access can do right after the update: their own commit with the merge's
    parents and a tree of their choosing, forced onto the branch."""
    pr = server.pulls[number]
    head = server.git.ref_sha(f"refs/heads/{pr['head_ref']}")
    first, second = server.git.read_commit(head).parents
    tree = server.git.build_tree(server.git.read_commit(head).tree,
                                 {p: TreeEntry("100644", "blob", server.git.write_blob(c.encode()), p) for p, c in files.items()})
    who = Person("alice", "alice@example.com", now_iso())
    sha = server.git.commit_tree(tree, [first, second], "Merge branch 'main'\n", who, who)
    server.git.update_ref(f"refs/heads/{pr['head_ref']}", sha)
    return sha


@pytest.mark.parametrize("attack", ["push after the update", "hand-made merge with an extra file",
                                    "hand-made merge changing the kernel"])
def test_a_persons_commits_cannot_ride_in_on_the_update(env, attack):
    a, b, meta = two_candidates(env)
    old_b = env.forge.get_pr(b).head_sha
    env.bench_done(a, rep(meta[a], 1.10))
    folder = meta[b]["solution_path"].rsplit("/", 1)[0]
    branch = env.forge.get_pr(b).head_branch
    if attack == "push after the update":
        env.server.after_update = lambda n, sha: env.server.push_commit(branch, {"kernels/x.txt": "mine"}, author="alice")
    elif attack == "hand-made merge with an extra file":
        env.server.after_update = lambda n, sha: evil_merge(env.server, n, {"harness/timing.py": "FAST = True\n"})
    else:
        env.server.after_update = lambda n, sha: evil_merge(env.server, n, {f"{folder}/main.py": "def run(x):\n    return 0\n"})

    env.bench_done(b, rep(meta[b], 1.20))
    pr = env.forge.get_pr(b)
    assert pr.head_sha != old_b and not pr.merged
    m = decode_meta(pr.body)
    assert pushed_head(m) == old_b and bot_merges(m) == []  # the person's head was not recorded
    assert "It was not brought up to date" in review_of(env, b) and "not the bot's merge" in review_of(env, b)

    # benched anyway at the person's head, with a winning report: never merged
    env.bench_done(b, rep(meta[b], 1.5, baseline_meta=meta[a]))
    body = review_of(env, b)
    assert "Decision: REJECT" in body and "not the commit the bot pushed" in body
    assert not env.forge.get_pr(b).merged
    assert json.loads(env.forge.read_file(f"kernels/{DEF}/champion.json"))["pr"] == a


def test_promote_on_a_stale_candidate_brings_it_up_to_date(env):
    env.server.set_permission("maint2", "maintain")
    a, b, meta = two_candidates(env)
    env.bench_done(a, rep(meta[a], 1.10))
    from bot.review.publish import publish_results

    old_b = env.forge.get_pr(b).head_sha
    publish_results(env.forge, b, old_b, report=rep(meta[b], 1.2), promote=False)  # a review, no decision acted on
    assert env.forge.get_pr(b).head_sha == old_b
    c, p = env.comment(b, "/promote", author="maint2")
    env.deliver("issue_comment", p)
    reply = [x for x in env.bot_comments(b) if f"kbot:reply:{c['id']}" in x["body"]][0]["body"]
    pr = env.forge.get_pr(b)
    assert "rebenchmark" in reply and "Brought up to date" in reply and not pr.merged
    assert pr.head_sha != old_b and bot_merges(decode_meta(pr.body)) == [pr.head_sha]


def test_update_branch_refuses_a_moved_head_and_a_conflict(env):
    from bot.forge.base import BranchMovedError, NotMergeableError

    a, b, meta = two_candidates(env)
    pr = env.forge.get_pr(b)
    with pytest.raises(BranchMovedError):
        env.forge.update_branch(b, expected_head="0" * 40)
    assert env.forge.update_branch(b, expected_head=pr.head_sha) == pr.head_sha  # nothing new on main
    folder = meta[b]["solution_path"].rsplit("/", 1)[0]
    env.server.push_commit("main", {f"{folder}/solution.json": "{}"}, author=env.server.maintainer)
    with pytest.raises(NotMergeableError):
        env.forge.update_branch(b, expected_head=pr.head_sha)
    assert env.forge.get_pr(b).head_sha == pr.head_sha


def test_as_an_app_the_update_goes_through_merge_a_branch(env, github_app_key):
    """GitHub's description says update-branch is not enabled for Apps; as an App installation the bot
    gets 403 there and merges through POST /merges, checked by content all the same."""
    private, public = github_app_key
    bot = env.server.register_app(4711, public, slug="kbot", installation_id=99)
    app = GitHubForge(env.server.full_name, app_id=4711, private_key=private, base_url=env.server.base_url,
                      seconds_between_requests=None, seconds_between_writes=None, backoff=0.0, sleep=lambda s: None)
    assert app.info.bot_login == bot.login
    sol = stand_in("cand_app", DEF, variant="app")
    att = ensure_attempt(app, sol, node="napp", meta={"definition": DEF, "node": "napp", "solution": sol.name,
                                                      "solution_hash": sol.content_hash()}, body="x", labels=())
    old = att.pr.head_sha
    env.server.push_commit("main", {"README.md": "main moved"}, author=env.server.maintainer)
    head = update_attempt(app, att.pr.number)
    assert head != old and app.get_pr(att.pr.number).head_sha == head
    paths = [(m, path, st) for m, path, st in env.server.requests if "update-branch" in path or path.endswith("/merges")]
    assert [st for _, _, st in paths] == [403, 201]
    m = decode_meta(app.get_pr(att.pr.number).body)
    assert pushed_head(m) == head and bot_merges(m) == [head]
