"""Memory that lasts and calls that are kept, locally: campaign 2 of a definition starts with what
campaign 1 tried, failed at and learned (the workspace's memory/<definition>.json), and its prompt says
so; every model call of campaign 2 is in its calls.jsonl, and replaying that log in a copy of the
workspace gives the same candidates without a model."""

from __future__ import annotations

import json
import shutil

from bot.campaign.local_loop import OptimizeOptions, Workspace, optimize
from bot.controller.memory import SearchMemory
from bot.forge.markers import decode_meta
from tests.controller.synthetic import make_report
from tests.fakes.llm_servers import FakeAnthropic
from tests.local.test_local_loop_synthetic import WORKLOADS, SyntheticHarness

SMEM = "out of resource: shared memory, Required: 262144, Hardware limit: 232448"
KERNEL = ("A plain copy, to see the harness run.\n"
          '<file path="main.py">\nimport torch\n\ndef run(hidden_states, weight, output):\n'
          "    output.copy_(hidden_states)\n    return output\n</file>\n")


class FirstCandidateFails(SyntheticHarness):
    """The first candidate measured against a champion fails to launch, with a message that states a
    fact about the hardware; everything else as SyntheticHarness."""

    failed: str | None = None

    def evaluate(self, solution, baseline):
        if baseline is not None and (self.failed is None or self.failed == solution.content_hash()):
            self.failed = solution.content_hash()
            self.runs += 1
            rep = make_report(solution, [{"axes": dict(w.axes), "status": "RUNTIME_ERROR", "message": SMEM}
                                         for w in self.workloads], baseline)
            self.cache[(solution.content_hash(), baseline.content_hash())] = rep
            return rep
        return super().evaluate(solution, baseline)


def _opts(ws, **kw):
    return OptimizeOptions(**{"definition": "rmsnorm_h4096", "device": "cpu", "workspace": ws, "workloads": WORKLOADS,
                              "rounds": 1, "candidates": 1, **kw})


def test_campaign_two_starts_with_campaign_ones_memory_and_its_calls_replay(tmp_path, monkeypatch):
    ws_dir = tmp_path / "ws"
    one = optimize(_opts(ws_dir, agent="offline", rounds=2, candidates=2), harness=FirstCandidateFails({}))
    assert one["campaign"].endswith("/001")
    mem = SearchMemory.load("rmsnorm_h4096", ws_dir / "memory" / "rmsnorm_h4096.json")
    assert {a["session"] for a in mem.attempts} == {"001"}
    assert any(a["status"] == "RUNTIME_ERROR" for a in mem.attempts)
    fact = "shared memory per block is limited to 232448 bytes"
    assert any(fact in f for f in mem.facts), mem.facts
    tried_before = set(mem.tried)
    shutil.copytree(ws_dir, tmp_path / "ws-copy")  # the workspace as campaign 2 finds it

    # campaign 2: a model agent through the local Anthropic-speaking server, settings from the options
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-secret-0001")
    with FakeAnthropic() as srv:
        srv.push(KERNEL)
        two = optimize(_opts(ws_dir, agent="anthropic",
                             agent_settings={"model": "claude-haiku-4-5", "base_url": srv.url, "temperature": 0.3,
                                             "max_tokens": 2048}),
                       harness=SyntheticHarness({}))
        (req,) = srv.requests
    assert two["campaign"].endswith("/002")
    assert req.body["model"] == "claude-haiku-4-5" and req.body["temperature"] == 0.3 and req.body["max_tokens"] == 2048
    prompt = "\n".join(m["content"] for m in req.body["messages"])
    assert "earlier campaign(s) of this definition" in prompt and fact in prompt
    assert "RUNTIME_ERROR" in prompt and SMEM in prompt  # the failed attempt and its error, not to be repeated
    after = SearchMemory.load("rmsnorm_h4096", ws_dir / "memory" / "rmsnorm_h4096.json")
    assert tried_before <= set(after.tried) and {a["session"] for a in after.attempts} == {"001", "002"}

    # every call kept: the prompt as sent and the answer
    calls = ws_dir / "campaigns" / "rmsnorm_h4096" / "002" / "calls.jsonl"
    (rec,) = [json.loads(line) for line in calls.read_text().splitlines()]
    assert rec["response"] == KERNEL and rec["messages"] == req.body["messages"] and rec["model"] == "claude-haiku-4-5"
    assert "sk-test-secret" not in calls.read_text()

    # replayed in the copy of the workspace: no model, the same candidate (same kernel, same branch)
    (tmp_path / "replay.yaml").write_text(f"agent:\n  name: replay\n  log: {calls}\n")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    again = optimize(_opts(tmp_path / "ws-copy", agent_config=tmp_path / "replay.yaml"), harness=SyntheticHarness({}))
    assert again["campaign"].endswith("/002")

    def candidates(ws):
        prs = [p for p in Workspace(ws).forge.list_prs(state="all")]
        return sorted((p.head_branch, decode_meta(p.body)["solution_hash"]) for p in prs
                      if decode_meta(p.body).get("campaign", "").endswith("/002"))

    assert candidates(ws_dir) == candidates(tmp_path / "ws-copy") and len(candidates(ws_dir)) == 1
