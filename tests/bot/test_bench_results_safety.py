"""Cancelled or skipped bench runs publish nothing; a run without results never erases an evaluation."""

from __future__ import annotations

import pytest
from candkit import bot_candidate
from memforge import MemForge
from reportkit import bench_for_pr, good
from test_bot_events import DEF, router, run_event

from bot.review.evidence import find_evidence
from bot.review.publish import publish_results


@pytest.fixture
def forge():
    return MemForge()


@pytest.mark.parametrize("conclusion", ["cancelled", "skipped", "timed_out", "action_required", None])
def test_unfinished_runs_are_ignored(shared, forge, conclusion):
    pr = bot_candidate(forge, DEF)
    calls = []
    r = router(forge, lambda *a: calls.append(a) or False)
    assert r.handle("workflow_run", run_event(shared, forge, pr.head_branch, pr.head_sha, conclusion=conclusion)) == "ignored"
    assert calls == [] and not forge.statuses and pr.number not in forge.reviews


def test_failed_runs_are_still_published(shared, forge):
    pr = bot_candidate(forge, DEF)
    r = router(forge, lambda *a: False)
    assert r.handle("workflow_run", run_event(shared, forge, pr.head_branch, pr.head_sha, conclusion="failure")) == "failed"
    assert forge.combined_status(pr.head_sha).get("kbot/harness").state == "error"


def test_no_usable_report_keeps_the_last_evaluation(forge, tmp_path):
    pr = bot_candidate(forge, DEF)
    publish_results(forge, pr.number, pr.head_sha, report=good(definition=DEF), promote=False)
    before = find_evidence(forge, pr.number)
    assert before is not None
    out = publish_results(forge, pr.number, pr.head_sha, results_dir=tmp_path)
    assert out.state == "error"
    assert forge.combined_status(pr.head_sha).get("kbot/harness").state == "error"
    assert find_evidence(forge, pr.number) == before  # the sticky review was not overwritten
    assert len(forge.reviews[pr.number]) == 1
    notes = [c.body for c in forge.comments.get(pr.number, []) if "bench run without results" in c.body]
    assert len(notes) == 1
    publish_results(forge, pr.number, pr.head_sha, results_dir=tmp_path)  # again: the note is sticky, not repeated
    assert len([c for c in forge.comments[pr.number] if "bench run without results" in c.body]) == 1


def test_no_usable_report_without_earlier_evaluation_writes_the_review(forge, tmp_path):
    pr = bot_candidate(forge, DEF)
    out = publish_results(forge, pr.number, pr.head_sha, results_dir=tmp_path)
    assert out.review_id is not None and "no usable report" in forge.combined_status(pr.head_sha).get("kbot/harness").description


@pytest.mark.parametrize("content", ['["kernels/d/x.json"]', '"text"', "42", "null",
                                     '{"solution": "cand_v2", "solution_path": 5}', '{"solution": ["cand_v2"]}'])
def test_bench_sidecar_of_the_wrong_shape_refuses_the_results(tmp_path, forge, content):
    pr = bot_candidate(forge, DEF)
    results = bench_for_pr(tmp_path, forge, pr, good(baseline=None, baseline_hash=None, definition=DEF))
    (sidecar,) = results.glob("*/*/kbot-bench.json")
    sidecar.write_text(content)
    out = publish_results(forge, pr.number, pr.head_sha, results_dir=results)
    assert out.state == "error" and any("kbot-bench.json" in p for p in out.problems)


def test_champion_path_comes_from_the_meta_not_the_artifact(tmp_path, forge):
    import json

    from candkit import candidate_meta

    pr = bot_candidate(forge, DEF)
    results = bench_for_pr(tmp_path, forge, pr, good(baseline=None, baseline_hash=None, definition=DEF))
    publish_results(forge, pr.number, pr.head_sha, results_dir=results)
    champ = json.loads(forge.read_file(f"kernels/{DEF}/champion.json"))
    assert champ["solution_path"] == candidate_meta(DEF, "n1")["solution_path"]
