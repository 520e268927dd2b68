"""Constructed evaluation Reports for the bot tests (numbers chosen by each test)."""

from __future__ import annotations

from harness.report import Correctness, DeviceInfo, FeedbackItem, Finding, LatencyStats, PairedRatio, Report, Roofline, WorkloadResult
from harness.schema import Solution, Status


def stand_in(name: str = "cand_v2", definition: str = "gdn_decode_qk4_v8_d128_k_last", *, variant: str = "") -> Solution:
    """A small valid Solution to stand for a constructed report's kernel (its hash goes in the report)."""
    return Solution.model_validate({
        "name": name, "definition": definition, "author": "kbot",
        "spec": {"language": "python", "target_hardware": ["NVIDIA_H200"], "entry_point": "main.py::run"},
        "sources": [{"path": "main.py", "content": f"def run(x):\n    return x  # {variant}\n"}]})


CAND_HASH = stand_in().content_hash()  # the default report's solution_hash: a real solution's


def lat(median: float) -> LatencyStats:
    return LatencyStats(median=median, mean=median * 1.01, ci95=(median * 0.98, median * 1.02), stdev=median * 0.02,
                        sem=median * 0.005, n=50, min=median * 0.95, max=median * 1.1)


def workload(i: int, ratio=(1.10, 1.08, 1.12), status=Status.PASSED, failed_trials=0, vs_ref=2.0,
             median=0.0100, name_suffix="", feedback=(), findings=(), log="", message="") -> WorkloadResult:
    return WorkloadResult(
        uuid=f"w{i:04d}-uuid{name_suffix}", axes={"batch_size": 2 ** i}, status=status, message=message, log=log,
        correctness=Correctness(max_absolute_error=1e-4, max_relative_error=1e-3, trials=3, failed_trials=failed_trials),
        latency_ms=lat(median) if status is Status.PASSED else None,
        reference_latency_ms=lat(median * vs_ref) if vs_ref else None,
        speedup_vs_reference=vs_ref if status is Status.PASSED else None,
        baseline_latency_ms=lat(median * ratio[0]) if ratio else None,
        speedup_vs_baseline=PairedRatio(median=ratio[0], ci95=(ratio[1], ratio[2]), n=50) if ratio else None,
        roofline=Roofline(bytes=1e6, flops=1e6, intensity=1.0, floor_ms=median * 0.4, fraction=0.4, bound="memory"),
        feedback=list(feedback), findings=list(findings))


def report(workloads, *, solution="cand_v2", solution_hash=CAND_HASH, baseline="champ_v1",
           baseline_hash="b" * 64, findings=(), definition="gdn_decode_qk4_v8_d128_k_last") -> Report:
    return Report(run_id="run-1", definition=definition, solution=solution, solution_hash=solution_hash,
                  baseline=baseline, baseline_hash=baseline_hash,
                  device=DeviceInfo(kind="cuda", name="NVIDIA H200", timer="cuda_events"),
                  workloads=list(workloads), findings=list(findings), started="2026-11-29T09:00:00Z",
                  finished="2026-11-29T09:05:00Z")


def good(n=4, ratio=(1.10, 1.08, 1.12), **kw) -> Report:
    return report([workload(i, ratio) for i in range(n)], **kw)


FB = FeedbackItem(rule="uncoalesced", severity="high", title="Loads are not coalesced",
                  evidence={"sectors_per_request": 8.2, "kernel": "k"}, cause="stride", recommendation="vectorize")
FINDING = Finding(rule="side-stream", message="uses torch.cuda.Stream", why="work escapes the timer")


# -- bench artifacts as bench.yml + the harness parent write them (bot/review/results.py reads them) ----


def write_run(run_dir, report: Report, solution, baseline=None) -> None:
    """A harness run folder for ``report``: report.json, traces.jsonl (one line per workload, made by the
    harness's own ``make_trace``), solution.json and baseline.json."""
    from pathlib import Path
    from types import SimpleNamespace

    from harness.runner import make_trace
    from harness.schema import Workload

    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    report.dump(run / "report.json")
    definition = SimpleNamespace(name=report.definition)
    lines = [make_trace(definition, solution, Workload(uuid=w.uuid, axes=w.axes, inputs={}), w,
                        {"hardware": "test"}).to_json() for w in report.workloads]
    (run / "traces.jsonl").write_text("".join(line + "\n" for line in lines))
    (run / "solution.json").write_text(solution.to_json(indent=2))
    if baseline is not None:
        (run / "baseline.json").write_text(baseline.to_json(indent=2))


def bench_dir(dest, report: Report, solution, solution_path: str, *, baseline=None, artifact: str = "kbot-results-0"):
    """``dest/<artifact>/<slot>/{kbot-bench.json, run/...}``: one bench matrix job's artifact, downloaded."""
    import json
    from pathlib import Path

    from bot.review.results import results_slot

    if report.baseline_hash is not None and (baseline is None or baseline.content_hash() != report.baseline_hash):
        raise ValueError("a report paired with a baseline needs that baseline's solution (baseline=)")
    slot = Path(dest) / artifact / results_slot(solution_path)
    slot.mkdir(parents=True, exist_ok=True)
    (slot / "kbot-bench.json").write_text(json.dumps({"solution": report.solution, "solution_path": solution_path}))
    write_run(slot / "run", report, solution, baseline)
    return Path(dest)


def bench_for_pr(dest, forge, pr, report: Report, *, solution=None, baseline=None, artifact: str = "kbot-results-0"):
    """``bench_dir`` at the solution path the PR's trusted meta names (a bot PR's block, a person's
    submission record; the stand-in solution by default)."""
    from bot.campaign.submission import trusted_meta

    meta = trusted_meta(forge, forge.get_pr(pr if isinstance(pr, int) else pr.number)) or {}
    sol = solution or stand_in(report.solution, report.definition)
    return bench_dir(dest, report, sol, meta["solution_path"], baseline=baseline, artifact=artifact)
