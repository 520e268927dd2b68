"""The campaign's Evaluator backed by the real harness (``harness.runner.evaluate``), with a cache.

Every evaluation gets a run folder ``<runs_dir>/<definition>/<solution hash>/<key>/`` where ``key``
hashes everything that changes the measurement: the solution, the baseline it is paired with, the
definition (its content, and its sidecar's settings and reference code: a sidecar that names other
generators or parameters must not be answered from a run on the old inputs), the workloads (their full
content), the device, trials, seed and timing budget. The code of the harness itself (generators,
comparators, what the reference imports) is not in the key: a change there needs a fresh workspace.
A folder holding ``kbot-done.json`` is a finished evaluation and is never run again (that is what makes ``kbot optimize`` resume cheaply after
a crash); a folder without it is an interrupted one and is resumed with ``resume=True`` (workloads
that already have a trace line are not measured again).

``evaluations.jsonl`` in ``runs_dir`` gets one line per evaluation actually started (not per cache hit),
so callers and tests can count real worker runs.

Profiling is on by default (``profile``): after a measurement with a passing workload, the report
gets its feedback items (``harness.profile.pipeline.profile_report``): on every device the roofline
rules and the static evidence (a Triton solution compiled ahead of time for sm_90 in a sandboxed child:
registers, spills, SASS facts; cached per solution in ``<runs_dir>/<definition>/<hash>/static.json``),
on the GPU also ncu with the sections the workload's roofline class calls for, SASS of the kernels it
ran and NVML energy, for up to ``max_profiled`` workloads, all of it within ``profile_budget_s``
seconds of wall time per candidate (``harness.profile.plan.ProfileBudget``: the static compile counts,
each step's subprocesses are stopped at what the budget has left, and what the evaluator's earlier
candidates' steps cost decides whether one is worth starting). What it cost, and what the budget left
out, is in ``report.profiling``.

With ``spare_workers`` (the default on the GPU) each evaluation starts the worker processes of the
next one, so they have imported torch (3-4 s on the H200) when the next candidate arrives; each spare
serves one job (``harness.runner.Spares``). ``close()`` ends the idle ones; a spare whose parent died
reads end-of-file as its job and exits on its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from harness.gpu_pool import GPU
from harness.report import Report, load_report
from harness.runner import RunConfig, Spares, evaluate
from harness.schema import Definition, Solution, Workload

DONE = "kbot-done.json"
Progress = Callable[[str, Any], None]


@dataclass
class HarnessEvaluator:
    definition: Definition
    workloads: list[Workload]
    runs_dir: Path
    device: str = "cpu"  # resolved: "cpu" or "cuda"
    trials: int | None = None
    timing: dict[str, Any] = field(default_factory=lambda: {"budget_s": 1.0})  # harness.measure.TimingConfig fields
    seed: int = 0
    definition_path: Path | None = None
    progress: Progress | None = None
    spare_workers: bool | None = None  # None: on the GPU only (on the CPU the import is ~1 s and tests run many evaluations)
    # Declared baselines (harness/baselines.py) measured beside every candidate: True/False, or None for
    # "on the GPU only" (on the CPU a torch.compile baseline alone costs a minute of compiling).
    with_baselines: bool | None = None
    provenance: dict[str, Any] | None = None  # where the definition and workloads came from (harness.dataset)
    profile: bool = True  # feedback items on every passing evaluation (see the module docstring)
    profile_budget_s: float | None = 120.0  # per candidate; the GPU's ncu/SASS/NVML runs (None: no limit)
    max_profiled: int = 2  # workloads profiled with ncu per candidate on the GPU (the smallest and largest floor)
    # The GPU of a host this evaluator's runs are pinned to (one per GPU under ``--gpus``:
    # bot/campaign/gpu_rounds.py). Not part of the cache key: GPUs of one host are interchangeable.
    gpu: GPU | None = None
    # What each profiling step cost on this evaluator's earlier candidates (harness.profile.plan.StepCosts).
    profile_costs: Any = field(default=None, init=False, repr=False)
    cache_hits: int = field(default=0, init=False)
    runs: int = field(default=0, init=False)
    _spares: Spares | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device must be resolved to cpu or cuda, not {self.device!r}")
        if not self.workloads:
            raise ValueError(f"no workloads to evaluate {self.definition.name} on")
        self.runs_dir = Path(self.runs_dir)

    def config(self) -> RunConfig:
        return RunConfig(device=self.device, trials=self.trials, seed=self.seed, timing=dict(self.timing), provenance=self.provenance,
                         gpu=self.gpu)

    def declared_baselines(self) -> list:
        from harness.baselines import declared

        use = self.with_baselines if self.with_baselines is not None else self.device == "cuda"
        return declared(self.definition.name) if use else []

    def key(self, solution: Solution, baseline: Solution | None) -> str:
        h = hashlib.sha256()
        h.update(json.dumps({
            "definition": self.definition.name, "inputs": self.inputs_fingerprint(),
            "solution": solution.content_hash(),
            "baseline": baseline.content_hash() if baseline else None,
            "device": self.device, "trials": self.trials, "seed": self.seed, "timing": self.timing,
            **({"baselines": sorted(b.solution.content_hash() for b in libs)} if (libs := self.declared_baselines()) else {}),
            **({"profile": [self.profile_budget_s, self.max_profiled]} if self.profile else {}),
        }, sort_keys=True).encode())
        return h.hexdigest()[:16]

    @cached_property
    def _inputs_fingerprint(self) -> str:
        from bot.controller.campaign import definition_inputs_fingerprint
        from harness.defconfig import config_fingerprint, load_config

        return definition_inputs_fingerprint(self.definition, self.workloads,
                                             config_fingerprint(load_config(self.definition.name, self.definition_path)))

    def inputs_fingerprint(self) -> str:
        """What a measurement depends on besides the solutions: the definition's content, its sidecar
        (generators, tolerance, comparator) and reference code, and the workloads' content. Part of the
        run-folder key, and what the search memory's "tried" means (bot.controller.memory)."""
        return self._inputs_fingerprint

    def run_dir(self, solution: Solution, baseline: Solution | None) -> Path:
        return self.runs_dir / self.definition.name / solution.content_hash()[:16] / self.key(solution, baseline)

    def cached(self, solution: Solution, baseline: Solution | None) -> Report | None:
        d = self.run_dir(solution, baseline)
        if (d / DONE).exists() and (d / "report.json").exists():
            try:
                return load_report(d / "report.json")
            except (ValueError, OSError):
                return None  # unreadable: measure again
        return None

    def evaluate(self, solution: Solution, baseline: Solution | None) -> Report:
        hit = self.cached(solution, baseline)
        if hit is not None:
            self.cache_hits += 1
            if self.progress:
                self.progress("cached", {"solution": solution.name, "run_dir": str(self.run_dir(solution, baseline))})
            return hit
        d = self.run_dir(solution, baseline)
        resume = (d / "traces.jsonl").exists()
        self.runs += 1
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        with (self.runs_dir / "evaluations.jsonl").open("a") as f:
            f.write(json.dumps({"solution": solution.name, "solution_hash": solution.content_hash(),
                                "baseline_hash": baseline.content_hash() if baseline else None,
                                "run_dir": str(d), "resume": resume, "pid": os.getpid(), "time": time.time()}) + "\n")
        if self.progress:
            self.progress("start", {"solution": solution.name, "baseline": baseline.name if baseline else None,
                                    "run_dir": str(d), "resume": resume})
        ready = self._next_spares()
        try:
            report = evaluate(self.definition, solution, self.workloads, d, self.config(), baseline=baseline,
                              definition_path=self.definition_path, resume=resume, spares=ready,
                              declared_baselines=self.declared_baselines(),
                              progress=(lambda kind, obj: self.progress("workload", obj)) if self.progress else None)
        finally:
            if ready is not None:
                ready.close()  # any it did not use
        if self.profile:
            self.fold_profile(report, solution, d)
        (d / DONE).write_text(json.dumps({"run_id": report.run_id, "finished": report.finished, "inputs": self.inputs_fingerprint()}) + "\n")
        return report

    def fold_profile(self, report: Report, solution: Solution, run_dir: Path) -> None:
        """Feedback items into ``report`` (and its report.json in ``run_dir``); nothing when no workload passed."""
        from harness import runfolder
        from harness.profile.pipeline import profile_report
        from harness.profile.plan import ProfileBudget, StepCosts
        from harness.schema import Status

        if not any(w.status is Status.PASSED for w in report.workloads):
            return
        if self.profile_costs is None:
            self.profile_costs = StepCosts()
        budget = ProfileBudget(self.profile_budget_s, costs=self.profile_costs)  # the clock starts here
        triton = solution.spec.language.value == "triton"
        profile_report(report, run_dir, self.definition, solution, self.workloads, definition_path=self.definition_path,
                       profile=self.device == "cuda", max_profiled=self.max_profiled, budget=budget,
                       static_evidence=(lambda b: self.static_evidence(solution, report, b)) if triton else None,
                       static=triton, gpu=self.gpu)
        runfolder.write_text(run_dir, "report.json", report.to_json())
        if self.progress:
            self.progress("profiled", {"solution": solution.name, **(report.profiling or {})})

    def static_evidence(self, solution: Solution, report: Report, budget: Any = None):
        """The ahead-of-time compile statistics of a Triton solution (None for any other language),
        computed once per solution, within ``budget`` (``harness.profile.plan.ProfileBudget``), from the
        launch signatures the evaluation recorded, and kept beside its run folders. A compile the budget
        refused or stopped is not kept: the next evaluation of the solution tries again."""
        from harness.profile import Collected
        from harness.profile.pipeline import static_compile
        from harness.profile.plan import ProfileBudget
        from harness.profile.triton_module import STATIC_VERSION, recorded_launches

        if solution.spec.language.value != "triton":
            return None
        path = self.runs_dir / self.definition.name / solution.content_hash()[:16] / "static.json"
        if path.is_file():
            try:
                data = json.loads(path.read_text())
                if data.get("version") == STATIC_VERSION:
                    return Collected(source="triton", evidence=data["evidence"], missing=data.get("missing"), raw=data.get("raw") or {})
            except (ValueError, KeyError, TypeError, OSError, AttributeError):
                pass  # unreadable or from an older kbot: compile again
        budget = budget if budget is not None else ProfileBudget(self.profile_budget_s)
        before = len(budget.left_out)
        c = static_compile(solution, self.definition, budget, launches=recorded_launches(report),
                           sandbox_mode=(report.isolation or {}).get("mode") or None)
        cut = len(budget.left_out) > before or any(x["step"] == "static" and x["outcome"] != "done" for x in budget.steps)
        if not cut:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"version": STATIC_VERSION, "evidence": c.evidence, "missing": c.missing, "raw": c.raw},
                                       default=str))
        return c

    def set_aside(self, solution: Solution, baseline: Solution | None, why: str) -> Path | None:
        """Move an evaluation's run folder out of the cache (the GPU it ran on was lost under it: what
        it holds is no verdict), kept beside it as ``<key>.lost-<n>`` with ``why``; the next
        ``evaluate`` of the pair measures afresh. Returns where it went (None: nothing was there)."""
        d = self.run_dir(solution, baseline)
        if not d.exists():
            return None
        n = 1
        while (aside := d.with_name(f"{d.name}.lost-{n}")).exists():
            n += 1
        d.rename(aside)
        (aside / "kbot-lost.json").write_text(json.dumps({"why": why, "time": time.time()}) + "\n")
        return aside

    def _next_spares(self) -> Spares | None:
        """The spares started during the previous evaluation (None the first time), after starting this
        evaluation's successors: they import while this one runs."""
        use = self.spare_workers if self.spare_workers is not None else self.device == "cuda"
        if not use:
            return None
        ready, self._spares = self._spares, Spares.started_for(self.config())
        return ready if ready is not None else Spares()

    def close(self) -> None:
        """End the idle spare workers (safe to call more than once)."""
        if self._spares is not None:
            self._spares.close()
            self._spares = None

    def latest_report(self, solution_hash: str, *, same_inputs: bool = False) -> Report | None:
        """The most recent finished report of a solution with any baseline (for the champion column).
        ``same_inputs``: only one measured on this evaluator's inputs (``inputs_fingerprint``; runs
        finished before the fingerprint was recorded in their marker do not count then)."""
        folder = self.runs_dir / self.definition.name / solution_hash[:16]
        done = sorted((m for m in folder.glob(f"*/{DONE}") if ".lost-" not in m.parent.name),  # set aside: no result
                      key=lambda p: p.stat().st_mtime) if folder.is_dir() else []
        for marker in reversed(done):
            try:
                if same_inputs and json.loads(marker.read_text()).get("inputs") != self.inputs_fingerprint():
                    continue
                return load_report(marker.parent / "report.json")
            except (ValueError, OSError):
                continue
        return None
