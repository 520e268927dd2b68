"""Memory that lasts and calls that are kept, on GitHub (the fake REST server, through GitHubForge):

round 1 (offline agent) opens a PR; its bench fails with a launch error that states a hardware fact;
the report step keeps the outcome in the PR's signed meta block. A later `/optimize` with a model
agent (the local Anthropic-speaking server, chosen by `agent=anthropic endpoint=local` within the
policy) rebuilds the tree AND the memory from GitHub alone: its prompt names the failed attempt, its
error and the fact. Its model call is kept in $KBOT_CALLS_DIR, the PR's meta block says where, and
replaying that file on a second repository in the same state opens the very same candidate."""

from __future__ import annotations

import json

import pytest
import yaml
from e2ekit import Env
from reportkit import report, workload
from test_github_campaign import DEF, seed_files

from bot.agents.providers.offline import OfflineAgent
from bot.agents.providers.replay import ReplayAgent
from bot.campaign.github_campaign import CALLS_DIR_ENV, bind, campaign, read_snapshot
from bot.campaign.request import OptimizeRequest
from bot.commands.bot_policy import POLICY_PATH
from bot.controller.campaign import Campaign
from bot.forge.markers import decode_meta
from bot.review.publish import publish_results
from harness.schema import Status, load_definition
from tests.fakes.github_server import make_server
from tests.fakes.llm_servers import FakeAnthropic

SMEM = "out of resource: shared memory, Required: 262144, Hardware limit: 232448"
FACT = "shared memory per block is limited to 232448 bytes"
KERNEL = ("A plain copy first.\n"
          '<file path="main.py">\nimport torch\n\ndef run(hidden_states, weight, output):\n'
          "    output.copy_(hidden_states)\n    return output\n</file>\n")


def policy_with_endpoint(repo, url):
    doc = yaml.safe_load((repo / POLICY_PATH).read_text())
    doc["optimize"]["agent_settings"] = {"anthropic": {"model": "claude-haiku-4-5", "endpoints": {"local": url},
                                                       "temperature_range": [0.0, 0.5]}}
    return yaml.safe_dump(doc)


def round_one(env, start):
    """/optimize with the offline agent, then a bench that failed to launch, published."""
    issue = env.server.create_issue("rmsnorm", author="alice")
    _, p = env.comment(issue, f"/optimize {DEF} --candidates 1")
    env.deliver("issue_comment", p)
    (pr1,) = env.pulls()
    m = decode_meta(env.forge.get_pr(pr1).body)
    rep = report([workload(i, ratio=None, status=Status.RUNTIME_ERROR, message=SMEM) for i in range(2)],
                 solution=m["solution"], solution_hash=m["solution_hash"], baseline_hash=start.content_hash(),
                 definition=DEF)
    publish_results(env.forge, pr1, env.forge.get_pr(pr1).head_sha, report=rep)
    return issue, pr1


@pytest.mark.slow
def test_memory_rebuilt_from_github_reaches_the_prompt_and_calls_are_kept_and_replay(
        github_server, shared, tmp_path, repo, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-secret-0001")
    monkeypatch.setenv(CALLS_DIR_ENV, str(tmp_path / "calls"))
    files, start = seed_files(repo)
    with FakeAnthropic() as srv:
        srv.push(KERNEL)
        env = Env(github_server, shared, tmp_path / "one", repo, files={**files, POLICY_PATH: policy_with_endpoint(repo, srv.url)},
                  generator=bind)
        issue, pr1 = round_one(env, start)
        meta1 = decode_meta(env.forge.get_pr(pr1).body)
        assert meta1["outcome"]["status"] == "RUNTIME_ERROR" and SMEM in meta1["outcome"]["error"], meta1["outcome"]

        # the memory, rebuilt from the PRs alone, holds the failure, its error and the fact it states
        snap = read_snapshot(env.forge, DEF)
        definition = load_definition(repo / "definitions" / DEF / "definition.json")
        mem = Campaign.from_records(snap.records, definition, OfflineAgent(), None, {"fsync": False}).memory
        assert any(FACT in f for f in mem.facts), mem.facts
        assert any(a["status"] == "RUNTIME_ERROR" and SMEM in (a["error"] or "") for a in mem.attempts)

        # a model agent, its endpoint and sampling chosen in the comment within the policy
        c2, p2 = env.comment(issue, f"/optimize {DEF} --candidates 1 agent=anthropic endpoint=local temperature=0.4")
        env.deliver("issue_comment", p2)
        assert env.reactions(c2) == ["eyes", "rocket"], env.bot_comments(issue)[-1]["body"]
        (req,) = srv.requests
    assert req.body["model"] == "claude-haiku-4-5" and req.body["temperature"] == 0.4
    prompt = "\n".join(m["content"] for m in req.body["messages"])
    assert FACT in prompt and SMEM in prompt and "RUNTIME_ERROR" in prompt
    (pr2,) = [n for n in env.pulls() if n != pr1]
    meta2 = decode_meta(env.forge.get_pr(pr2).body)
    assert meta2["agent"] == "anthropic" and meta2["requested_settings"] == {"endpoint": "local", "temperature": 0.4}
    assert "127.0.0.1" not in json.dumps(meta2)  # the endpoint by name; its URL stays in the policy

    # the call is kept where the PR record says, with the prompt as sent and the answer
    kept = tmp_path / "calls" / meta2["calls"]["file"]
    (rec,) = [json.loads(line) for line in kept.read_text().splitlines()]
    assert rec["response"] == KERNEL and rec["messages"] == req.body["messages"] and rec["prompt_hash"] == meta2["prompt_hash"]
    assert "sk-test-secret" not in kept.read_text()

    # replayed on a second repository in the same state: no model, the same candidate
    other = make_server(tmp_path / "gh2")
    other.start()
    try:
        env2 = Env(other, shared, tmp_path / "two", repo, files={**files, POLICY_PATH: policy_with_endpoint(repo, srv.url)},
                   generator=bind)
        issue2, _ = round_one(env2, start)
        assert issue2 == issue
        request = OptimizeRequest(definition=DEF, candidates=1, agent="anthropic", rounds=1, requested_by="alice",
                                  thread=issue, comment_id=c2["id"], agent_choice={"endpoint": "local", "temperature": 0.4})
        (replayed,) = campaign(request, forge=env2.forge, agent=ReplayAgent({"log": str(kept)}), calls_dir=tmp_path / "calls2")
        m = decode_meta(replayed.body)
        assert (replayed.head_branch, m["solution_hash"]) == (env.forge.get_pr(pr2).head_branch, meta2["solution_hash"])
    finally:
        other.stop()
    assert not other.validation_errors
