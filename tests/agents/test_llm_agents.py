"""The Anthropic and OpenAI agents against local servers that speak those APIs, through the official
SDKs: streaming and not, 429 (retry-after) and 500 with retries, accounting, the repair turn, the failed
node record, the call log and its replay."""

from __future__ import annotations

import hashlib
import json

import pytest
from fakes.llm_servers import Fail, FakeAnthropic, FakeOpenAI, Reply

from bot.agents.base import AgentContext, AgentError, Mode
from bot.agents.calllog import CallLog, prompt_hash
from bot.agents.catalog import create_agent
from bot.controller.campaign import Campaign
from tests.controller.synthetic import FunctionEvaluator

GOOD = (
    "Here is the kernel.\n"
    '<file path="main.py">\n'
    "import torch\n\n"
    "def run(hidden_states, weight, output):\n"
    "    output.copy_(hidden_states)\n"
    "    return output\n"
    "</file>\n"
    "<rationale>copy as a placeholder</rationale>\n"
)
MALFORMED = "I would use a bigger block size, but I will not show code."

PROVIDERS = {
    "anthropic": (FakeAnthropic, "claude-haiku-4-5", "", "ANTHROPIC_API_KEY"),
    "openai": (FakeOpenAI, "gpt-5", "/v1", "OPENAI_API_KEY"),
}
PRICES = {"claude-haiku-4-5": (1.0, 5.0), "gpt-5": (1.25, 10.0)}


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-secret-0001")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-0002")


def make(provider: str, srv, stream: bool, waits: list[float] | None = None, **cfg):
    _, model, suffix, _ = PROVIDERS[provider]
    waits = [] if waits is None else waits
    config = {"model": model, "base_url": srv.url + suffix, "stream": stream, "backoff_base_s": 0.25,
              "backoff_max_s": 4.0, "max_attempts": 4, **cfg}
    return create_agent(provider, config, sleep=waits.append)


def ctx_for(defn, tmp_path, mode=Mode.INITIAL):
    return AgentContext(definition=defn, mode=mode, call_log=CallLog(tmp_path / "calls.jsonl"))


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_retries_on_429_and_500_then_accounts_tokens_and_cost(provider, stream, rmsnorm_def, tmp_path):
    Fake = PROVIDERS[provider][0]
    waits: list[float] = []
    with Fake() as srv:
        srv.push(Fail(429, retry_after="3"), Fail(500), Reply(GOOD, tokens_in=1234, tokens_out=567))
        agent = make(provider, srv, stream, waits)
        ctx = ctx_for(rmsnorm_def, tmp_path)
        [p] = agent.propose(ctx, 1)
        assert len(srv.requests) == 3  # two failures retried, then the answer
        assert all(r.body.get("stream", False) is stream for r in srv.requests)
    assert waits[0] == 3.0  # retry-after respected
    assert 0.125 <= waits[1] <= 0.5  # exponential backoff (base 0.25 * 2**1, jittered 50-100%)
    assert p.ok and p.solution.definition == "rmsnorm_h4096"
    assert p.rationale == "copy as a placeholder"
    [call] = p.calls
    assert call.attempts == 3 and call.purpose == "propose"
    assert (call.tokens_in, call.tokens_out) == (1234, 567)
    pin, pout = PRICES[call.model]
    assert call.cost_usd == pytest.approx((1234 * pin + 567 * pout) / 1e6)
    assert call.response == GOOD
    assert call.prompt_hash == prompt_hash(call.system, call.messages)
    recs = list(CallLog(tmp_path / "calls.jsonl"))
    assert len(recs) == 1 and recs[0].response_hash == hashlib.sha256(GOOD.encode()).hexdigest()


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_default_token_counts_come_from_the_server(provider, rmsnorm_def, tmp_path):
    Fake = PROVIDERS[provider][0]
    with Fake() as srv:
        srv.push(GOOD)
        agent = make(provider, srv, stream=True)
        [p] = agent.propose(ctx_for(rmsnorm_def, tmp_path), 1)
        body = srv.requests[0].body
    words = sum(len(m["content"].split()) for m in body["messages"])
    if provider == "anthropic":
        words += len(body["system"].split())
        assert body["max_tokens"] == 8192
    else:
        assert body["messages"][0]["role"] == "system"
        assert body["stream_options"] == {"include_usage": True}
    assert p.calls[0].tokens_in == words
    assert p.calls[0].tokens_out == len(GOOD.split())


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_malformed_output_gets_one_repair_turn(provider, stream, rmsnorm_def, tmp_path):
    Fake = PROVIDERS[provider][0]
    with Fake() as srv:
        srv.push(MALFORMED, GOOD)
        agent = make(provider, srv, stream)
        [p] = agent.propose(ctx_for(rmsnorm_def, tmp_path), 1)
        assert len(srv.requests) == 2
        repair_msgs = srv.requests[1].body["messages"]
    assert p.ok
    assert [c.purpose for c in p.calls] == ["propose", "repair"]
    # The repair turn carries the model's own reply and says what was wrong.
    assert any(m["role"] == "assistant" and m["content"] == MALFORMED for m in repair_msgs)
    assert "no files found" in repair_msgs[-1]["content"]
    assert repair_msgs[-1]["role"] == "user"


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_malformed_twice_is_a_failed_proposal_with_reason(provider, rmsnorm_def, tmp_path):
    Fake = PROVIDERS[provider][0]
    bad_python = '<file path="main.py">\ndef run(hidden_states, weight, output:\n    pass\n</file>'
    with Fake() as srv:
        srv.push(MALFORMED, bad_python)
        agent = make(provider, srv, stream=False)
        [p] = agent.propose(ctx_for(rmsnorm_def, tmp_path), 1)
        assert len(srv.requests) == 2  # exactly one repair turn, never a second
    assert not p.ok
    assert "after one repair turn" in p.failure and "not valid Python" in p.failure
    assert len(p.calls) == 2


def test_failed_node_is_recorded_by_the_campaign(rmsnorm_def, tmp_path):
    from bot.agents.providers.offline import load_seeds

    seed = load_seeds("rmsnorm_h4096")[0]
    ev = FunctionEvaluator(lambda s: [{"axes": {"batch_size": 8}, "latency_ms": 1.0, "reference_ms": 2.0}])
    with FakeAnthropic() as srv:
        srv.push(MALFORMED, "still no code")
        agent = make("anthropic", srv, stream=True)
        camp = Campaign.start(rmsnorm_def, [seed], agent, ev, {"budget": {"max_candidates": 5}}, tmp_path / "c")
        camp.step()  # evaluates the seed
        r = camp.step()  # asks the model, which fails twice
        assert len(srv.requests) == 2
    [nid] = r.new_nodes
    rec = json.loads((tmp_path / "c" / "nodes" / f"{nid}.json").read_text())
    assert rec["status"] == "failed" and rec["solution"] is None
    assert "after one repair turn" in rec["failure"]
    assert rec["parent_id"] == camp.tree.baseline.id
    assert rec["agent"] == "anthropic" and rec["model"] == "claude-haiku-4-5"
    assert rec["prompt_hash"] == json.loads((tmp_path / "c" / "calls.jsonl").read_text().splitlines()[0])["prompt_hash"]
    assert len(ev.calls) == 1  # a failed proposal is never sent to the evaluator
    assert camp.usage.cost_usd > 0 and camp.usage.model_calls == 2


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_gives_up_after_max_attempts_and_logs_the_error(provider, rmsnorm_def, tmp_path):
    Fake = PROVIDERS[provider][0]
    with Fake() as srv:
        srv.push(*[Fail(500)] * 10)
        agent = make(provider, srv, stream=False, max_attempts=3)
        with pytest.raises(AgentError, match="after 3 attempt"):
            agent.propose(ctx_for(rmsnorm_def, tmp_path), 1)
        assert len(srv.requests) == 3
    [rec] = list(CallLog(tmp_path / "calls.jsonl"))
    assert rec.response is None and "500" in rec.error and rec.attempts == 3


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_client_errors_are_not_retried(provider, rmsnorm_def, tmp_path):
    Fake = PROVIDERS[provider][0]
    with Fake() as srv:
        srv.push(Fail(400, "bad request"))
        agent = make(provider, srv, stream=False)
        with pytest.raises(AgentError, match="400"):
            agent.propose(ctx_for(rmsnorm_def, tmp_path), 1)
        assert len(srv.requests) == 1


def test_retry_after_ms_header(rmsnorm_def, tmp_path):
    waits: list[float] = []
    with FakeOpenAI() as srv:
        srv.push(Fail(429, retry_after_ms="1500"), GOOD)
        agent = make("openai", srv, stream=False, waits=waits)
        agent.propose(ctx_for(rmsnorm_def, tmp_path), 1)
    assert waits == [1.5]


def test_keys_come_from_the_environment_only_and_are_never_logged(rmsnorm_def, tmp_path, monkeypatch):
    with FakeAnthropic() as srv:
        with pytest.raises(AgentError, match="environment"):
            make("anthropic", srv, stream=False, api_key="sk-inline")
        srv.push(GOOD)
        agent = make("anthropic", srv, stream=False)
        agent.propose(ctx_for(rmsnorm_def, tmp_path), 1)
        assert "authorization" not in srv.requests[0].headers  # the fake drops it; it was sent
    text = (tmp_path / "calls.jsonl").read_text()
    assert "sk-test-secret" not in text
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    agent = create_agent("anthropic", {"model": "claude-haiku-4-5", "base_url": "http://127.0.0.1:9"})
    with pytest.raises(AgentError, match="ANTHROPIC_API_KEY"):
        agent.propose(ctx_for(rmsnorm_def, tmp_path), 1)


def test_unknown_model_needs_a_price(rmsnorm_def):
    with pytest.raises(AgentError, match="no price"):
        create_agent("openai", {"model": "my-gateway-model"})
    a = create_agent("openai", {"model": "my-gateway-model", "prices": {"my-gateway-model": {"input": 1, "output": 2}}})
    assert a.cost(1_000_000, 1_000_000) == 3.0
    assert create_agent("anthropic", {"model": "claude-sonnet-4-5-20250929"}).cost(1_000_000, 0) == 3.0


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_n_candidates_have_distinct_prompts(provider, rmsnorm_def, tmp_path):
    Fake = PROVIDERS[provider][0]
    other = GOOD.replace("output.copy_(hidden_states)", "output.copy_(hidden_states * 1)").replace("placeholder", "second")
    with Fake() as srv:
        srv.push(GOOD, other)
        agent = make(provider, srv, stream=False)
        ps = agent.propose(ctx_for(rmsnorm_def, tmp_path), 2)
    assert len({p.prompt_hash for p in ps}) == 2
    assert "candidate 2 of 2" in ps[1].calls[0].messages[0]["content"]
    assert "copy as a placeholder" in ps[1].calls[0].messages[0]["content"]  # told what the first did


def test_replay_reproduces_a_run_without_network(rmsnorm_def, tmp_path):
    with FakeOpenAI() as srv:
        srv.push(MALFORMED, GOOD, GOOD.replace("placeholder", "again"))
        agent = make("openai", srv, stream=True)
        first = agent.propose(ctx_for(rmsnorm_def, tmp_path / "a"), 2)
    replay = create_agent("replay", {"log": str(tmp_path / "a" / "calls.jsonl")})
    again = replay.propose(ctx_for(rmsnorm_def, tmp_path / "b"), 2)
    assert [p.solution.content_hash() for p in again] == [p.solution.content_hash() for p in first]
    assert [len(p.calls) for p in again] == [2, 1]  # the repair turn replays too
    assert [c.prompt_hash for p in again for c in p.calls] == [c.prompt_hash for p in first for c in p.calls]
    assert sum(p.cost_usd for p in again) == pytest.approx(sum(p.cost_usd for p in first))
    # A context the log never saw is a divergence, reported as such.
    with pytest.raises(AgentError, match="diverged"):
        replay.propose(ctx_for(rmsnorm_def, tmp_path / "c", mode=Mode.INITIAL), 3)


def test_a_whole_campaign_replays_offline_from_its_call_log(rmsnorm_def, tmp_path):
    """Run a campaign against the fake server, then again from calls.jsonl alone: same nodes, same order."""
    from bot.agents.providers.offline import load_seeds

    seed = load_seeds("rmsnorm_h4096")[0]

    def latency(sol):
        # deterministic: the kernel's text decides its "speed"
        return [{"axes": {"batch_size": 8}, "latency_ms": 1.0 + (len(sol.source("main.py")) % 7) / 10, "reference_ms": 3.0}]

    replies = [GOOD.replace("placeholder", f"variant {i}").replace("hidden_states)", "hidden_states" + " * 1" * i + ")")
               for i in range(1, 6)]
    cfg = {"fsync": False, "budget": {"max_candidates": 5, "patience": None}, "proposals_per_step": 2}
    with FakeOpenAI() as srv:
        srv.push(replies[0], MALFORMED, replies[1], *replies[2:])
        agent = make("openai", srv, stream=True)
        first = Campaign.start(rmsnorm_def, [seed], agent, FunctionEvaluator(latency), cfg, tmp_path / "live")
        first.run()
    replay = create_agent("replay", {"log": str(tmp_path / "live" / "calls.jsonl")})
    second = Campaign.start(rmsnorm_def, [seed], replay, FunctionEvaluator(latency), cfg, tmp_path / "replayed")
    second.run()
    strip = lambda recs: [(r["node_id"], r["parent_id"], r["status"], r["prompt_hash"]) for r in recs]  # noqa: E731
    assert strip(second.records()) == strip(first.records())
    assert len(first.records()) == 5
    assert second.usage.cost_usd == pytest.approx(first.usage.cost_usd) and first.usage.cost_usd > 0


def test_call_log_tolerates_a_torn_last_line_only(tmp_path):
    from bot.agents.calllog import CallLog, CallRecord

    log = CallLog(tmp_path / "calls.jsonl", fsync=False)
    rec = CallRecord(provider="p", model="m", prompt_hash="h", system="s", messages=[], response="r", response_hash="x")
    log.append(rec)
    log.append(rec)
    with open(log.path, "a") as f:
        f.write('{"provider": "p", "mod')  # the process died mid-write
    assert len(list(log)) == 2
    lines = log.path.read_text().splitlines()
    log.path.write_text("\n".join([lines[0], "garbage", lines[1]]) + "\n")
    with pytest.raises(ValueError, match=":2: not a call record"):
        list(log)
