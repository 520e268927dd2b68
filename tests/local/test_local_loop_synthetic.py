"""The local loop end to end with a synthetic harness (latencies from the kernel's tunables): fast
checks of PRs per candidate, reviews, promotion merges, closed losers, and resume after a crash.
The real harness on CPU is exercised in test_local_loop_cpu.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bot.agents.tunables import configuration, solution_tunables
from bot.campaign.local_loop import OptimizeOptions, Workspace, optimize
from bot.forge.markers import decode_meta
from bot.promotion.champion import read_champion
from bot.review.evidence import find_evidence
from harness.schema import load_workloads
from tests.controller.synthetic import make_report

REPO = Path(__file__).resolve().parents[2]

WORKLOADS = REPO / "definitions" / "rmsnorm_h4096" / "workloads.small.jsonl"


class Crash(RuntimeError):
    pass


class SyntheticHarness:
    """Stands in for HarnessEvaluator: latency = 4096/BLOCK + 1 ms per workload; results cached by
    (solution, baseline) in a dict that outlives the object, like run folders outlive a process."""

    device = "cpu"

    def __init__(self, cache: dict, crash_after: int | None = None):
        self.cache, self.crash_after = cache, crash_after
        self.runs = self.cache_hits = 0
        self.workloads = load_workloads(WORKLOADS)

    def _ws(self, sol):
        cfg = configuration(solution_tunables(sol))
        ms = 4096 / cfg.get("BLOCK", 4096) + 1.0
        return [{"uuid": w.uuid, "axes": dict(w.axes), "latency_ms": ms * (1 + i), "reference_ms": 2.0 * (1 + i)}
                for i, w in enumerate(self.workloads)]

    def evaluate(self, solution, baseline):
        key = (solution.content_hash(), baseline.content_hash() if baseline else None)
        if key in self.cache:
            self.cache_hits += 1
            return self.cache[key]
        if self.crash_after is not None and self.runs >= self.crash_after:
            raise Crash("simulated crash before an evaluation")
        self.runs += 1
        ws = self._ws(solution)
        if baseline is not None:
            for w, b in zip(ws, self._ws(baseline)):
                w["baseline_ms"] = b["latency_ms"]
        self.cache[key] = make_report(solution, ws, baseline)
        return self.cache[key]

    def latest_report(self, solution_hash, same_inputs=False):  # one set of inputs here
        found = [r for (h, _), r in self.cache.items() if h == solution_hash]
        return found[-1] if found else None


def _opts(tmp_path, **kw):
    return OptimizeOptions(agent="offline", device="cpu", workspace=tmp_path / "ws",
                           **{"definition": "rmsnorm_h4096", "rounds": 2, "candidates": 2, "workloads": WORKLOADS, **kw})


def test_loop_opens_one_pr_per_candidate_and_merges_winners(tmp_path):
    harness = SyntheticHarness({})
    s = optimize(_opts(tmp_path), harness=harness)
    ws = Workspace(tmp_path / "ws")
    f = ws.forge
    prs = list(f.list_prs(state="all"))
    cands = [r for r in s["candidates"] if r["pr"] is not None]
    # at most rounds x candidates (the agent may offer fewer where it has nothing new)
    assert 3 <= len(prs) == len(cands) <= 4
    assert len({p.head_branch for p in prs}) == len(prs)
    assert all(p.head_branch == f"kbot/rmsnorm_h4096/{decode_meta(p.body)['node']}" for p in prs)
    assert all(not p.is_open for p in prs)  # every candidate decided: merged or closed with a summary
    merged = [p for p in prs if p.merged]
    assert merged, s
    champ = read_champion(f, "rmsnorm_h4096")
    assert champ["pr"] == merged[-1].number and champ["solution"] == s["champion"]["solution"]
    assert champ["history"][-1]["summary"]["origin"] == "start"
    # the champion's files are on main, the pointer names them, the promoted PR was a squash merge
    assert f.read_file(champ["solution_path"]) is not None
    log = subprocess.run(["git", "--git-dir", str(f.git_dir), "log", "--format=%s", "main"], capture_output=True, text=True).stdout
    assert f"kbot: promote {champ['solution']} for rmsnorm_h4096 (#{champ['pr']})" in log
    for p in prs:
        ev = find_evidence(f, p.number)
        assert ev is not None and ev["head_sha"] == p.head_sha
        st = f.combined_status(p.head_sha).get("kbot/harness")
        assert st is not None and st.state == ("success" if p.merged else "failure")  # no green check on a reject
        if not p.merged:
            assert any("Closed by kbot" in c.body for c in f.list_comments(p.number))
    decisions = {r["node"]: r["decision"] for r in s["candidates"]}
    assert sorted(set(decisions.values())) <= ["champion", "promote", "reject"]
    assert list(decisions.values()).count("promote") == len(merged)
    # the best candidate's speedups in the summary come from the records
    best = max((r for r in s["candidates"] if r["speedup_vs_start"]), key=lambda r: r["speedup_vs_start"])
    assert best["decision"] == "promote" and best["speedup_vs_start"] > 1.03


@pytest.mark.parametrize("rounds", [2, 1])  # rounds=1: the crash is in the last round, budget already spent
def test_resume_after_a_crash_repeats_nothing(tmp_path, rounds):
    cache: dict = {}
    with pytest.raises(Crash):
        optimize(_opts(tmp_path, rounds=rounds), harness=SyntheticHarness(cache, crash_after=2))
    before = {(p.number, p.head_branch) for p in Workspace(tmp_path / "ws").forge.list_prs(state="all")}
    assert before  # the crash came after at least one PR was opened
    done_before = set(cache)
    again = SyntheticHarness(cache)
    s = optimize(_opts(tmp_path), harness=again)
    assert s["campaign"].endswith("/001")  # resumed, not a new campaign
    prs = list(Workspace(tmp_path / "ws").forge.list_prs(state="all"))
    assert len({p.head_branch for p in prs}) == len(prs) >= (3 if rounds == 2 else 2)
    assert all(not p.is_open for p in prs)  # the candidate left pending by the crash was decided too
    assert all(r["decision"] for r in s["candidates"])
    assert before <= {(p.number, p.head_branch) for p in prs}
    assert not (set(cache) - done_before) & done_before
    assert again.runs == len(set(cache) - done_before)  # only new evaluations ran


def test_finished_campaign_is_not_resumed_and_bad_input_is_refused(tmp_path):
    optimize(_opts(tmp_path, rounds=1, candidates=1), harness=SyntheticHarness({}))
    s = optimize(_opts(tmp_path, rounds=1, candidates=1), harness=SyntheticHarness({}))
    assert s["campaign"].endswith("/002")
    from bot.campaign.local_loop import LoopError

    with pytest.raises(LoopError, match="no definition"):
        optimize(OptimizeOptions(definition="nope", workspace=tmp_path / "ws", device="cpu"), harness=SyntheticHarness({}))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"definition": "gemm_n4096_k4096", "solution": None, "evaluation": None,
                               "workload": {"uuid": "u", "axes": {"M": 1}, "inputs": {}}}) + "\n")
    with pytest.raises(LoopError):
        optimize(_opts(tmp_path, workloads=bad), harness=SyntheticHarness({}))


def test_default_agent_follows_the_keys_in_the_environment():
    from bot.campaign.local_loop import default_agent

    assert default_agent({}) == "offline"
    assert default_agent({"OPENAI_API_KEY": "k"}) == "openai"
    assert default_agent({"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"}) == "anthropic"


def test_site_shows_the_records_and_escapes_text(tmp_path):
    from bot.site.build import _x, build_site

    s = optimize(_opts(tmp_path, rounds=1, candidates=2), harness=SyntheticHarness({}))
    ws = Workspace(tmp_path / "ws")
    # a hostile title (model-written text ends up in titles and rationales)
    ws.forge.update_pr(1, title='<script>alert(1)</script> & "x"')
    files = build_site(ws, tmp_path / "site")
    names = sorted(p.name for p in files)
    assert names == ["index.html"] + sorted(f"pr-{r['pr']}.html" for r in s["candidates"] if r["pr"])
    index = (tmp_path / "site" / "index.html").read_text()
    assert "<script>" not in index and "&lt;script&gt;" in index
    # one dot per attempt (the legend's circles carry no class)
    assert index.count('<circle class="promoted"') + index.count('<circle class="attempt"') == len(s["candidates"])
    for r in s["candidates"]:
        assert _x(r["speedup_vs_start"]) in index and r["node"] in index
    assert "http://" not in index.replace('xmlns="http://www.w3.org/2000/svg"', "")  # nothing fetched


class HarnessWithBaselines(SyntheticHarness):
    """Each evaluation also carries two declared baselines: one ran (1 ms per workload, paired), one could
    not run here."""

    def evaluate(self, solution, baseline):
        from harness.report import BaselineResult, BaselineRun, LatencyStats, PairedRatio
        from harness.schema import Status

        rep = super().evaluate(solution, baseline)
        rep.baselines = [BaselineRun(name="torch_compile", solution="tc", solution_hash="e" * 64, state="ran"),
                         BaselineRun(name="fla_chunk", solution="fla", solution_hash="f" * 64, dependencies=["fla-core==0.6.0"],
                                     state="could not run", reason="fla-core is not installed (the baseline needs fla-core==0.6.0)")]
        for w in rep.workloads:
            if w.latency_ms is not None:
                r = 1.0 / w.latency_ms.median
                w.baselines = {"torch_compile": BaselineResult(
                    status=Status.PASSED, latency_ms=LatencyStats(median=1.0, mean=1.0, ci95=(0.99, 1.01), stdev=0.01, sem=0.001, n=50, min=0.9, max=1.1),
                    speedup=PairedRatio(median=r, ci95=(r * 0.99, r * 1.01), n=50))}
        return rep


def test_campaign_summary_and_reviews_show_the_best_baseline(tmp_path):
    s = optimize(_opts(tmp_path, rounds=1), harness=HarnessWithBaselines({}))
    rows = [r for r in s["candidates"] if r["pr"] is not None]
    assert rows and all(r["speedup_vs_best_baseline"] is not None and r["speedup_vs_best_baseline"] > 0 for r in rows)
    assert s["baselines"] == {"ran": ["torch_compile"], "could_not_run": {"fla_chunk": "fla-core is not installed (the baseline needs fla-core==0.6.0)"}}
    from bot.review.evidence import find_bot_review

    body = find_bot_review(Workspace(tmp_path / "ws").forge, rows[0]["pr"]).body
    assert "geomean vs the best baseline that ran" in body and "**could not run here**: fla-core is not installed" in body


def test_optimize_takes_an_official_definition_path_and_says_which_workloads(tmp_path, shared):
    """`kbot optimize <official path>` used to say "no definition"; now it is the dataset's definition
    with the dataset's workloads, and the campaign says so."""
    events = []
    path = shared / "flashinfer-trace" / "definitions" / "rmsnorm" / "rmsnorm_h4096.json"
    optimize(_opts(tmp_path, rounds=1, definition=str(path), workloads=None), harness=SyntheticHarness({}),
             event=lambda kind, d: events.append((kind, d)))
    camp = next(d for kind, d in events if kind == "campaign")
    assert camp["n_workloads"] == 14 and "the official dataset's" in camp["inputs"]
    assert camp["workloads"].endswith("workloads/rmsnorm/rmsnorm_h4096.jsonl")


def test_an_official_definition_without_seeds_starts_from_its_reference(shared):
    from bot.campaign.local_loop import starting_point
    from harness.dataset import resolve

    r = resolve("rmsnorm_h128", dataset=shared / "flashinfer-trace")
    sol = starting_point(r.definition, r.path)
    assert sol.definition == "rmsnorm_h128" and sol.source("reference.py") == r.definition.reference
    assert not sol.spec.destination_passing_style and sol.spec.language.value == "python"
