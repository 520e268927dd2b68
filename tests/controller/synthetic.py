"""Evaluators that need no GPU: build real ``harness.report.Report`` objects from a table of measured
latencies (configuration -> latency per workload) or from any latency function.

Used by ``scripts/search_bench.py`` (tables measured on the H200 by ``scripts/gpu/tunable_space.py``)
and by the tests (synthetic landscapes). The search code cannot tell these reports from the harness's.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from bot.agents.tunables import TunableError, configuration, solution_tunables
from harness.report import DeviceInfo, FeedbackItem, LatencyStats, PairedRatio, Report, Roofline, WorkloadResult
from harness.schema import Solution, Status


def _stats(ms: float) -> LatencyStats:
    return LatencyStats(median=ms, mean=ms, ci95=(ms, ms), stdev=0.0, sem=0.0, n=1, min=ms, max=ms)


def make_report(
    solution: Solution,
    workloads: list[dict[str, Any]],
    baseline: Solution | None = None,
) -> Report:
    """``workloads``: dicts with ``axes`` and either ``latency_ms`` (+ optional ``reference_ms``,
    ``baseline_ms``, ``floor_ms``, ``energy_j``, ``feedback``) or ``status``/``message`` for a failure."""
    now = datetime.now(timezone.utc).isoformat()
    results = []
    for i, w in enumerate(workloads):
        status = Status(w.get("status", "PASSED"))
        kw: dict[str, Any] = {"uuid": w.get("uuid", f"w{i}"), "axes": w.get("axes", {}), "status": status,
                              "seconds": float(w.get("seconds", 1.0))}
        if status is Status.PASSED:
            lat = float(w["latency_ms"])
            ref = float(w.get("reference_ms", lat))
            kw.update(latency_ms=_stats(lat), reference_latency_ms=_stats(ref), speedup_vs_reference=ref / lat)
            if baseline is not None and w.get("baseline_ms") is not None:
                r = float(w["baseline_ms"]) / lat
                kw.update(baseline_latency_ms=_stats(float(w["baseline_ms"])), speedup_vs_baseline=PairedRatio(median=r, ci95=(r, r), n=1))
            if w.get("floor_ms") is not None:
                kw["roofline"] = Roofline(bytes=0.0, flops=0.0, intensity=0.0, floor_ms=w["floor_ms"],
                                          fraction=min(1.0, w["floor_ms"] / lat), bound="memory")
            if w.get("energy_j") is not None:
                kw["energy_j_per_call"] = float(w["energy_j"])
            kw["feedback"] = [FeedbackItem.model_validate(f) for f in w.get("feedback", [])]
        else:
            kw["message"] = w.get("message", status.value)
        results.append(WorkloadResult(**kw))
    return Report(
        run_id=f"synthetic-{solution.content_hash()[:8]}",
        definition=solution.definition,
        solution=solution.name,
        solution_hash=solution.content_hash(),
        baseline=baseline.name if baseline else None,
        baseline_hash=baseline.content_hash() if baseline else None,
        device=DeviceInfo(kind="cpu", name="synthetic", timer="cpu_monotonic", note="latencies from a table, not measured"),
        workloads=results,
        started=now,
        finished=now,
    )


class FunctionEvaluator:
    """Evaluator from a function ``solution -> list of workload dicts`` (see make_report)."""

    def __init__(self, fn: Callable[[Solution], list[dict[str, Any]]]) -> None:
        self.fn = fn
        self.calls: list[str] = []  # content hashes, in evaluation order (tests check for repeats)

    def evaluate(self, solution: Solution, baseline: Solution | None) -> Report:
        self.calls.append(solution.content_hash())
        ws = self.fn(solution)
        if baseline is not None:
            bws = self.fn(baseline)
            for w, b in zip(ws, bws):
                if w.get("status", "PASSED") == "PASSED" and b.get("status", "PASSED") == "PASSED":
                    w["baseline_ms"] = b["latency_ms"]
        return make_report(solution, ws, baseline)


def canonical(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True)


class LatencyTable:
    """A measured tunable space: ``{"space": ..., "workloads": [axes...], "reference_ms": [...],
    "configs": [{"config": {...}, "latency_ms": [...] | null, "error": str | null}]}``."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.workloads: list[dict[str, int]] = data["workloads"]
        self.reference_ms: list[float] | None = data.get("reference_ms")
        self.rows: dict[str, dict[str, Any]] = {}
        for row in data["configs"]:
            lat = row.get("latency_ms")
            if lat is not None and len(lat) != len(self.workloads):
                raise ValueError(f"config {row['config']}: {len(lat)} latencies for {len(self.workloads)} workloads")
            self.rows[canonical(row["config"])] = row

    @classmethod
    def load(cls, path: str | Path) -> "LatencyTable":
        return cls(json.loads(Path(path).read_text()))

    def score(self, key: str) -> float | None:
        """Geometric mean latency over the workloads (None if the configuration failed)."""
        row = self.rows.get(key)
        if row is None or row.get("latency_ms") is None:
            return None
        lat = row["latency_ms"]
        if any(x is None or not x > 0 for x in lat):
            return None
        return math.exp(sum(math.log(x) for x in lat) / len(lat))

    def best(self) -> tuple[str, float]:
        scored = [(k, s) for k in self.rows if (s := self.score(k)) is not None]
        if not scored:
            raise ValueError("no configuration in the table has a latency")
        return min(scored, key=lambda kv: kv[1])

    def workload_dicts(self, key: str) -> list[dict[str, Any]]:
        row = self.rows.get(key)
        if row is None:
            return [{"axes": a, "status": "RUNTIME_ERROR", "message": f"configuration {key} is not in the table"} for a in self.workloads]
        if row.get("latency_ms") is None:
            return [{"axes": a, "status": row.get("status", "COMPILE_ERROR"), "message": row.get("error") or "failed"} for a in self.workloads]
        ref = self.reference_ms or row["latency_ms"]
        return [{"axes": a, "latency_ms": lat, "reference_ms": r, "seconds": 0.5}
                for a, lat, r in zip(self.workloads, row["latency_ms"], ref)]


class TableEvaluator(FunctionEvaluator):
    """Looks the solution's tunable configuration up in a LatencyTable."""

    def __init__(self, table: LatencyTable) -> None:
        self.table = table
        super().__init__(self._lookup)

    def _lookup(self, solution: Solution) -> list[dict[str, Any]]:
        try:
            cfg = configuration(solution_tunables(solution))
        except TunableError as e:
            return [{"axes": a, "status": "COMPILE_ERROR", "message": str(e)} for a in self.table.workloads]
        return self.table.workload_dicts(canonical(cfg))
