"""A bench artifact is hostile: the trusted side reads exactly one report, at the place the PR's meta
names, checked against its traces, its solution files and the meta; anything else refuses the results.

The first test is the forged-evaluation attack: an incorrect candidate writes an extra JSON file with
a ``kbot_report`` key and invented results into its run folder (a file of its build folder inside
``--out``); a reader that collects every report-shaped JSON and keeps the last one whose hash matches
promotes it.
"""

from __future__ import annotations

import json
import os

import pytest
from candkit import bot_candidate, candidate_meta
from memforge import MemForge
from reportkit import bench_dir, good, stand_in, workload, write_run

from bot.review.publish import publish_results
from bot.review.results import ResultsError, read_bench_results, results_slot, write_bench_results
from harness.schema import Status

DEF = "gdn_decode_qk4_v8_d128_k_last"
SOL = stand_in("cand_v2", DEF)
HASH = SOL.content_hash()
PATH = candidate_meta(DEF, "n1")["solution_path"]
SLOT = results_slot(PATH)


@pytest.fixture
def forge():
    return MemForge()


def candidate(forge):
    return bot_candidate(forge, DEF, solution_hash=HASH)


def incorrect():
    """What the harness measured: every workload numerically wrong (a first champion needs all passed)."""
    return good(baseline=None, baseline_hash=None, definition=DEF, solution_hash=HASH).model_copy(update={
        "workloads": [workload(i, ratio=None, status=Status.INCORRECT_NUMERICAL) for i in range(4)]})


def forged():
    """What the candidate claims: everything passed, 3.0x over the reference."""
    return good(baseline=None, baseline_hash=None, definition=DEF, solution_hash=HASH, ratio=None).model_copy(update={
        "workloads": [workload(i, ratio=None, vs_ref=3.0) for i in range(4)]})


def meta_of(forge, pr):
    from bot.forge.trusted_meta import read_meta

    return read_meta(forge.get_pr(pr.number), forge)


def assert_refused(forge, pr, out, why):
    assert out.decision is None and out.state == "error", out
    assert not forge.get_pr(pr.number).merged and forge.read_file(f"kernels/{DEF}/champion.json") is None
    assert forge.combined_status(pr.head_sha).get("kbot/harness").state == "error"
    assert any(why in p for p in out.problems), out.problems


def test_an_extra_report_written_by_the_candidate_is_never_read(tmp_path, forge):
    pr = candidate(forge)
    results = bench_dir(tmp_path, incorrect(), SOL, PATH)
    build = results / "kbot-results-0" / SLOT / "run" / "build" / "w-0123456789ab"
    build.mkdir(parents=True)
    forged().dump(build / "zz_forged.json")  # sorts last, as the attack arranged it
    out = publish_results(forge, pr.number, pr.head_sha, results_dir=results)
    assert_refused(forge, pr, out, "not part of the bench results layout")
    assert "none of them was read" in out.problems[0]


def test_the_honest_incorrect_result_is_reviewed_and_rejected(tmp_path, forge):
    pr = candidate(forge)
    out = publish_results(forge, pr.number, pr.head_sha, results_dir=bench_dir(tmp_path, incorrect(), SOL, PATH))
    assert out.decision.action == "reject" and not forge.get_pr(pr.number).merged
    assert forge.combined_status(pr.head_sha).get("kbot/harness").state == "failure"


def test_an_honest_win_is_promoted_from_the_fixed_place(tmp_path, forge):
    pr = candidate(forge)
    out = publish_results(forge, pr.number, pr.head_sha, results_dir=bench_dir(tmp_path, forged(), SOL, PATH))
    assert out.decision.action == "promote" and forge.get_pr(pr.number).merged


def test_a_report_overwritten_without_its_traces_is_refused(tmp_path, forge):
    pr = candidate(forge)
    results = bench_dir(tmp_path, incorrect(), SOL, PATH)
    forged().dump(results / "kbot-results-0" / SLOT / "run" / "report.json")
    out = publish_results(forge, pr.number, pr.head_sha, results_dir=results)
    assert_refused(forge, pr, out, "disagree")


@pytest.mark.parametrize("damage, why", [
    (lambda run: (run / "traces.jsonl").unlink(), "traces.jsonl is missing"),
    (lambda run: (run / "traces.jsonl").write_text(""), "traces.jsonl has 0 workload(s)"),
    (lambda run: (run / "traces.jsonl").write_text((run / "traces.jsonl").read_text() * 2), "two lines"),
    (lambda run: (run / "solution.json").write_text(stand_in("cand_v2", DEF, variant="other").to_json()), "not the solution"),
    (lambda run: (run / "report.json").unlink(), "report.json is missing"),
    (lambda run: (run / "report.json").write_text("{" * 50), "not JSON"),
    (lambda run: (run.parent / "kbot-bench.json").write_text(json.dumps({"solution": "cand_v2", "solution_path": "kernels/x/y.json"})),
     "does not name"),
    (lambda run: (run / "baseline.json").write_text(SOL.to_json()), "names no baseline"),
])
def test_a_damaged_run_folder_is_refused(tmp_path, forge, damage, why):
    pr = candidate(forge)
    results = bench_dir(tmp_path, forged(), SOL, PATH)
    damage(results / "kbot-results-0" / SLOT / "run")
    out = publish_results(forge, pr.number, pr.head_sha, results_dir=results)
    assert_refused(forge, pr, out, why)


def test_a_report_for_another_solution_than_the_meta_is_refused(tmp_path, forge):
    pr = candidate(forge)
    other = stand_in("cand_v2", DEF, variant="someone else's")
    rep = forged().model_copy(update={"solution_hash": other.content_hash()})
    out = publish_results(forge, pr.number, pr.head_sha, results_dir=bench_dir(tmp_path, rep, other, PATH))
    assert_refused(forge, pr, out, "solution hash differs")


def test_two_copies_of_the_slot_are_refused(tmp_path, forge):
    pr = candidate(forge)
    results = bench_dir(tmp_path, incorrect(), SOL, PATH)
    bench_dir(tmp_path, forged(), SOL, PATH, artifact="kbot-results-1")
    out = publish_results(forge, pr.number, pr.head_sha, results_dir=results)
    assert_refused(forge, pr, out, "2 result folders")


@pytest.mark.parametrize("extra", ["kbot-results-0/stray.json", "kbot-results-0/x/run/report.json.bak",
                                   "other-artifact/a/run/report.json", "kbot-results-0/x/run/profile/u/forged.json",
                                   "kbot-results-0/x/run/deeper/report.json"])
def test_anything_outside_the_layout_refuses_the_results(tmp_path, forge, extra):
    pr = candidate(forge)
    results = bench_dir(tmp_path, forged(), SOL, PATH)
    (results / extra).parent.mkdir(parents=True, exist_ok=True)
    (results / extra).write_text("{}")
    out = publish_results(forge, pr.number, pr.head_sha, results_dir=results)
    assert_refused(forge, pr, out, "not part of the bench results layout")


def test_symlinks_are_refused_and_not_followed(tmp_path, forge):
    pr = candidate(forge)
    outside = tmp_path / "outside"
    write_run(outside, forged(), SOL)
    results = tmp_path / "results"
    bench_dir(results, incorrect(), SOL, PATH)
    run = results / "kbot-results-0" / SLOT / "run"
    (run / "report.json").unlink()
    os.symlink(outside / "report.json", run / "report.json")
    out = publish_results(forge, pr.number, pr.head_sha, results_dir=results)
    assert_refused(forge, pr, out, "symlink refused")


def test_profiler_files_are_kept_but_never_read(tmp_path, forge):
    pr = candidate(forge)
    results = bench_dir(tmp_path, forged(), SOL, PATH)
    prof = results / "kbot-results-0" / SLOT / "run" / "profile" / "w0000-uuid"
    prof.mkdir(parents=True)
    (prof / "feedback.json").write_text(json.dumps(forged().model_dump(mode="json")))  # report-shaped: still not read
    (prof / "ncu.csv").write_text("a,b\n")
    read = read_bench_results(results, meta_of(forge, pr))
    assert read.report is not None and read.report.workloads[0].speedup_vs_reference == 3.0 and not read.problems


def test_other_solutions_of_the_same_run_are_allowed_but_not_read(tmp_path, forge):
    pr = candidate(forge)
    results = bench_dir(tmp_path, incorrect(), SOL, PATH)
    other = stand_in("another", DEF)
    bench_dir(results, forged().model_copy(update={"solution": "another", "solution_hash": other.content_hash()}),
              other, f"kernels/{DEF}/another/solution.json", artifact="kbot-results-1")
    read = read_bench_results(results, meta_of(forge, pr))
    assert read.report is not None and read.report.workloads[0].status is Status.INCORRECT_NUMERICAL


def test_no_trusted_meta_means_no_report(tmp_path, forge):
    results = bench_dir(tmp_path, forged(), SOL, PATH)
    assert read_bench_results(results, None).report is None
    with pytest.raises(ResultsError):
        read_bench_results(tmp_path / "absent", None)


def test_a_local_run_folder_laid_out_as_an_artifact_reads_back(tmp_path):
    run = tmp_path / "run"
    write_run(run, forged(), SOL)
    (run / "build").mkdir()
    (run / "build" / "forged.json").write_text(json.dumps(incorrect().model_dump(mode="json")))  # not copied
    dest = write_bench_results(tmp_path / "pub", run, PATH, "cand_v2")
    read = read_bench_results(dest, candidate_meta(DEF, "n1", solution_hash=HASH))
    assert read.report is not None and not read.problems
    assert read.where == f"kbot-results-local/{SLOT}/run/report.json"
