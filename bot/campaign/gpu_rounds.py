"""A campaign round on several GPUs of one host (``kbot optimize --gpus N``).

The one-GPU loop (``local_loop.PullRequestEvaluator``) takes a round's candidates one at a time:
measure the candidate paired with today's champion, publish, decide, and only then the next one. Here
the measuring is done first, for the whole round at once: ``measure_round`` hands every candidate of
the round still to be decided, each paired with today's champion, to ``GPUHarness.prefetch``, which
runs them over a ``harness.gpu_pool.Pool`` (one evaluation per GPU, the candidate and its champion in
the same worker on that GPU, nothing else on it meanwhile). The decisions then stay exactly where
they were: one at a time, in candidate order, each from the report of its own pair. When a decision
promotes, the champion has changed, so the candidates after it are measured again (concurrently)
paired with the new champion before they are decided: the decisions are the ones a one-GPU run makes
on the same candidates, and a round of N candidates without a promotion takes the time of one.

A GPU lost under an evaluation (harness/gpu_pool.py) has its run folder set aside and the candidate
measured on another GPU; a candidate the pool could not measure at all raises ``HarnessFailure``
when its turn to be decided comes: nothing is decided for it (its PR stays open, the campaign resumes
from it), and every other candidate of the round has been measured by then.

Each report says which GPU it came from (``config.gpu``) and the ceilings its roofline used
(``config.ceilings``, measured or cached for that GPU); ``gpus_summary`` gathers them per GPU for the
campaign summary.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable

from bot.controller.campaign import own_fingerprint
from bot.controller.tree import Tree
from harness.gpu_pool import GPU, DeviceProvider, GPUSelectionError, HarnessFailure, NvidiaSmi, Pool, gpus_for
from harness.report import Report
from harness.schema import Solution

Pair = tuple[Solution, Solution | None]


def _key(solution: Solution, baseline: Solution | None) -> tuple[str, str | None]:
    return solution.content_hash(), baseline.content_hash() if baseline is not None else None


class GPUHarness:
    """The campaign's harness over a pool of GPUs: one lane per GPU (a ``HarnessEvaluator`` pinned to
    it, or a stand-in with the same ``evaluate``/``latest_report``), all writing one run-folder cache.
    ``evaluate`` is what the one-GPU loop calls; ``prefetch`` measures many pairs at once."""

    def __init__(self, pool: Pool, lanes: dict[int, Any], event: Callable[[str, dict[str, Any]], None] | None = None):
        missing = [g.index for g in pool.gpus if g.index not in lanes]
        if missing:
            raise ValueError(f"no lane for GPU {missing}")
        self.pool, self.lanes = pool, lanes
        self.event = event or (lambda kind, data: None)
        self._reports: dict[tuple[str, str | None], Report] = {}
        self._failed: dict[tuple[str, str | None], str] = {}
        self.placements: list[dict[str, Any]] = []  # one per evaluation the pool ran: pair, GPU, attempts
        self._lock = threading.Lock()

    # -- what the loop reads of a harness ------------------------------------------------------------
    @property
    def device(self) -> str:
        return next(iter(self.lanes.values())).device

    @property
    def runs(self) -> int:
        return sum(getattr(h, "runs", 0) for h in self.lanes.values())

    @property
    def cache_hits(self) -> int:
        return sum(getattr(h, "cache_hits", 0) for h in self.lanes.values())

    def latest_report(self, solution_hash: str, *, same_inputs: bool = False) -> Report | None:
        found = [r for h in self.lanes.values() if (r := h.latest_report(solution_hash, same_inputs=same_inputs)) is not None]
        return max(found, key=lambda r: r.finished or r.started) if found else None

    def inputs_fingerprint(self) -> str | None:
        """The lanes' (one definition, one set of workloads: the same for every GPU), None without one."""
        return own_fingerprint(next(iter(self.lanes.values())))

    def close(self) -> None:
        for h in self.lanes.values():
            if hasattr(h, "close"):
                h.close()

    # -- measuring -------------------------------------------------------------------------------------
    def prefetch(self, pairs: list[Pair]) -> None:
        """Measure every pair not measured yet, concurrently, one per GPU; returns when all are done."""
        todo: list[Pair] = []
        seen = set()
        for s, b in pairs:
            k = _key(s, b)
            if k not in self._reports and k not in self._failed and k not in seen:
                seen.add(k)
                todo.append((s, b))
        if not todo:
            return
        self.event("gpus.round", {"evaluations": len(todo), "gpus": [g.index for g in self.pool.alive()]})
        placed = self.pool.map(todo, lambda pair, gpu: self.lanes[gpu.index].evaluate(*pair), lost=self._lost,
                               progress=self._progress)
        for p in placed:
            s, b = p.job
            rec = {"solution": s.name, "baseline": b.name if b is not None else None, **p.record()}
            with self._lock:
                self.placements.append(rec)
                if p.error is not None:
                    self._failed[_key(s, b)] = p.error
                else:
                    assert isinstance(p.result, Report)
                    self._reports[_key(s, b)] = p.result

    def evaluate(self, solution: Solution, baseline: Solution | None) -> Report:
        k = _key(solution, baseline)
        if k not in self._reports and k not in self._failed:
            self.prefetch([(solution, baseline)])
        if k in self._failed:
            raise HarnessFailure(f"{solution.name}: {self._failed[k]}; nothing was decided for it (run again to resume)")
        return self._reports[k]

    def _lost(self, pair: Pair, gpu: GPU, result: Any) -> None:
        """The GPU went under this pair: its run folder leaves the cache, so the retry measures afresh."""
        lane = self.lanes[gpu.index]
        why = self.pool.lost.get(gpu.index, "lost")
        aside = lane.set_aside(*pair, why) if hasattr(lane, "set_aside") else None
        self.event("gpus.lost", {"gpu": gpu.index, "solution": pair[0].name, "why": why, "set_aside": str(aside) if aside else None})

    def _progress(self, kind: str, p: Any) -> None:
        if kind == "start":
            self.event("gpus.start", {"gpu": p.attempts[-1].gpu, "solution": p.job[0].name,
                                      "champion": p.job[1].name if p.job[1] is not None else None})


def harness_for_gpus(spec: str, device: str, lane: Callable[[GPU], Any], provider: DeviceProvider | None = None,
                     event: Callable[[str, dict[str, Any]], None] | None = None) -> GPUHarness:
    """The harness of ``--gpus spec``: the GPUs it names on this host (``harness.gpu_pool.select``:
    more than there are is refused), a pool over them, ``lane(gpu)`` for each (a ``HarnessEvaluator``
    pinned to it)."""
    provider = provider or NvidiaSmi()
    if provider.kind != device:
        raise GPUSelectionError(f"--gpus {spec} spreads evaluations over this host's GPUs, but they would run on "
                                f"{device} here (--device {device}); use --device cuda or auto on a GPU host")
    gpus = gpus_for(spec, provider)
    return GPUHarness(Pool(gpus, provider), {g.index: lane(g) for g in gpus}, event)


def round_candidates(evaluator: Any) -> list[Solution]:
    """The candidates of the running round still to be decided, in candidate order: the campaign's
    pending nodes (or, while ``Campaign.resume`` evaluates those an interruption left, the pending
    records of its store)."""
    campaign = getattr(evaluator, "campaign", None)
    if campaign is not None:
        nodes = campaign.tree.pending()
    else:
        store = Path(evaluator.store) / "nodes"
        records = [json.loads(p.read_text()) for p in sorted(store.glob("*.json"))] if store.is_dir() else []
        nodes = Tree.from_records(records).pending() if records else []
    return [n.solution for n in nodes if n.solution is not None]


def measure_round(evaluator: Any, champion: Solution | None) -> None:
    """Before a candidate of the round is decided: every candidate of the round still to be decided,
    paired with ``champion`` (today's), measured at once when the harness has GPUs to spread them
    over; a no-op for a one-GPU harness. The champion itself is measured alone, as the loop does."""
    prefetch = getattr(evaluator.harness, "prefetch", None)
    if prefetch is None or champion is None:
        return
    ch = champion.content_hash()
    prefetch([(s, champion) for s in round_candidates(evaluator) if s.content_hash() != ch])


def gpus_summary(reports: list[Report], pool: Pool | None = None) -> list[dict[str, Any]]:
    """Per GPU of the run: which it is, the ceilings its reports' rooflines used, the evaluations it
    measured; and the GPUs the pool lost, with why. [] when no report was pinned to a GPU."""
    by: dict[int, dict[str, Any]] = {}
    for r in reports:
        g = r.config.get("gpu")
        if not isinstance(g, dict) or not isinstance(g.get("index"), int):
            continue
        row = by.setdefault(g["index"], {**g, "ceilings": None, "evaluations": []})
        c = r.config.get("ceilings")
        if isinstance(c, dict) and row["ceilings"] is None:
            row["ceilings"] = {k: c.get(k) for k in ("gpu_name", "source", "copy_bandwidth_gbs", "matmul_tflops", "error") if k in c}
        row["evaluations"].append(r.solution + (f" vs {r.baseline}" if r.baseline else ""))
    if pool is not None:
        for g in pool.gpus:
            row = by.setdefault(g.index, {**g.record(), "ceilings": None, "evaluations": []})
            if g.index in pool.lost:
                row["lost"] = pool.lost[g.index]
    return [by[i] for i in sorted(by)]
