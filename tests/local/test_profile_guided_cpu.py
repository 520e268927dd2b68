"""A local campaign on this CPU, profiled by default: every candidate's report has feedback items (the
roofline rules and the kernel's ahead-of-time sm_90 compile statistics, with what they cost), and the
prompt the LLM agent gets (through the local Anthropic-speaking server) lists its parent's items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.campaign.local_loop import OptimizeOptions, optimize, weak_start
from harness.report import load_report
from tests.fakes.llm_servers import FakeAnthropic

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
DEF = "rmsnorm_h4096"


def reply_with(source: str, why: str) -> str:
    return f'Here is the kernel.\n<file path="main.py">\n{source}</file>\n<rationale>{why}</rationale>\n'


def test_every_report_has_feedback_and_the_prompt_carries_it(tmp_path, monkeypatch):
    wl = tmp_path / "workloads.jsonl"
    wl.write_text("\n".join((REPO / "definitions" / DEF / "workloads.small.jsonl").read_text().splitlines()[:2]) + "\n")
    start = weak_start(DEF).sources[0].content
    assert "BLOCK = 256 " in start
    with FakeAnthropic() as srv:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-secret-0004")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.url)
        srv.push(reply_with(start.replace("BLOCK = 256 ", "BLOCK = 512 ", 1), "half the loop trips"))
        summary = optimize(OptimizeOptions(definition=DEF, agent="anthropic", device="cpu", rounds=1, candidates=1,
                                           workspace=tmp_path / "ws", workloads=wl, budget_s=0.05))
        assert len(srv.requests) == 1
    rows = summary["candidates"]
    assert [r["status"] for r in rows] == ["PASSED", "PASSED"]  # the starting champion, the model's kernel

    store = tmp_path / "ws" / "campaigns" / DEF / "001"
    reports = {p.stem: load_report(p) for p in sorted((store / "reports").glob("*.json"))}
    assert set(reports) == {r["node"] for r in rows}
    for node, rep in reports.items():
        assert rep.workloads and all(w.feedback for w in rep.workloads), f"{node}: a workload without feedback items"
        prof = rep.profiling
        assert prof is not None and prof["static"] == "ok" and prof["items"] >= len(rep.workloads)
        assert prof["profile"] is False and prof["profiled"] == []  # no ncu on a CPU: the static part only
        assert prof["spent_s"] >= 0 and "budget_s" in prof
        for w in rep.workloads:
            # the kernel's compile statistics joined the evidence, and the plan came from the roofline class
            assert w.profile["evidence"]["triton"]["triton_registers"] > 0
            assert w.profile["plan"]["classes"] and w.profile["plan"]["rules"]

    start_node = rows[0]["node"]
    prompt = json.dumps(srv.requests[0].body["messages"])
    assert "Profiler feedback (most severe first)" in prompt
    assert "No profiler feedback for this kernel" not in prompt
    titles = {f.title for w in reports[start_node].workloads for f in w.feedback}
    assert any(json.dumps(t)[1:-1] in prompt for t in titles)
