"""Constructed evaluation Reports for the bot tests (numbers chosen by each test)."""

from __future__ import annotations

from harness.report import Correctness, DeviceInfo, FeedbackItem, Finding, LatencyStats, PairedRatio, Report, Roofline, WorkloadResult
from harness.schema import Status


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


def report(workloads, *, solution="cand_v2", solution_hash="c" * 64, baseline="champ_v1",
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
