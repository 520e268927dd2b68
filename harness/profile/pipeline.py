"""From a solution (or a recorded ncu CSV) to roofline + prioritized feedback.

* :func:`analyze` -- collectors' output + definition + axes + ceilings -> roofline and feedback items.
* :func:`explain_csv` -- the same from recorded ``ncu --csv --page raw`` text (works anywhere).
* :func:`profile_workload` -- on a GPU runner: run ncu on the driver for one workload, gather SASS of
  the kernels it compiled, measure NVML energy.
* :func:`profile_report` -- what ``kbot eval --profile`` calls: folds roofline, feedback, profile and
  energy into every passing ``WorkloadResult`` of a report.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ..ceilings import Ceilings, ceilings_for, documented_ceilings
from ..feedback.engine import FeedbackResult, kernel_level, load_rules, merge_results, run_rules
from ..feedback.output import render_markdown, to_json
from ..report import Report, Roofline, WorkloadResult
from ..roofline import given_counts
from ..roofline import roofline as compute_roofline
from ..schema import Definition, Solution, Status, Workload
from . import Collected
from .child import run_bounded
from .ncu import METRICS, command_text, find_ncu, ncu_evidence, run_ncu
from .plan import ProfileBudget, plan_for
from .sass import facts_evidence, find_tool, parse_sass, pick_function

__all__ = ["ProfileOutcome", "analyze", "dominant_static", "explain_csv", "profile_report", "profile_workload", "sass_from_dirs"]



@dataclass
class ProfileOutcome:
    roofline: Roofline | None
    feedback: FeedbackResult
    collected: list[Collected] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)

    @property
    def missing(self) -> dict[str, str]:
        return {c.source: c.missing for c in self.collected if c.missing}

    def profile_dict(self) -> dict[str, Any]:
        """The report's ``profile`` field: evidence per source, what was missing, where files are."""
        return {
            "evidence": {c.source: c.evidence for c in self.collected if c.ok},
            "missing": self.missing,
            "not_evaluated": [n.to_dict() for n in self.feedback.not_evaluated],
            "stop": self.feedback.stop,
            "files": self.files,
        }

    def markdown(self, title: str | None = None) -> str:
        return render_markdown(self.feedback, self.roofline, title=title, missing=self.missing)

    def to_json(self, **extra: Any) -> dict[str, Any]:
        return to_json(self.feedback, self.roofline, missing=self.missing, files=self.files, **extra)


def analyze(definition: Definition, axes: dict[str, int], collected: Iterable[Collected], *, ceilings: Ceilings | None,
            measured_ms: float | None = None, kernel: str | None = None, rules_dir: str | Path | None = None,
            absent: frozenset[str] = frozenset(), given: dict[str, float] | None = None) -> ProfileOutcome:
    """Roofline + rule engine over whatever the collectors produced (``axes`` already resolved;
    ``absent``: optional inputs the workload leaves out; ``given``: the timed inputs' counts, for a
    definition whose floor depends on them: ``harness.roofline.given_counts`` of the report's roofline)."""
    collected = list(collected)
    evidence: dict[str, Any] = {}
    for c in collected:
        if c.ok:
            for k, v in c.evidence.items():
                evidence.setdefault(k, v)
    roof = None
    if ceilings is not None:
        event_timed = True  # a caller's measured time is the harness's event median: the launch is in it
        if measured_ms is None and evidence.get("kernel_time_us"):
            measured_ms, event_timed = evidence["kernel_time_us"] / 1e3, False  # ncu's GPU duration: no launch
        roof = compute_roofline(definition, axes, ceilings, measured_ms, absent=absent, given=given, launch=event_timed)
    missing = {c.source: c.missing for c in collected if c.missing}
    if ceilings is None:
        missing["roofline"] = "no device ceilings (run `kbot ceilings` on the runner)"
    if measured_ms is None:
        missing.setdefault("timing", "no measured time (neither ncu durations nor a latency measurement)")
    rules = load_rules(rules_dir)
    result = run_rules(evidence, roof, kernel=kernel, missing=missing, rules=rules)
    ncu = next((c for c in collected if c.source == "ncu" and c.ok), None)
    secondary = (ncu.raw.get("secondary") or []) if ncu is not None else []
    if secondary:
        per_kernel = [r for r in rules if kernel_level(r)]
        shared = {k: evidence[k] for k in ("sm_count",) if k in evidence}
        others = [(run_rules({**shared, **s["evidence"]}, roof, kernel=s["kernel"], rules=per_kernel), s["share"])
                  for s in secondary]
        result = merge_results(result, others)
    return ProfileOutcome(roofline=roof, feedback=result, collected=collected)


def explain_csv(csv_text: str, definition: Definition, axes: dict[str, int], *, ceilings: Ceilings | None,
                kernel: str | None = None, extra: Iterable[Collected] = (), measured_ms: float | None = None,
                rules_dir: str | Path | None = None) -> ProfileOutcome:
    """Run the engine on recorded ncu raw CSV (+ optional SASS/Triton evidence)."""
    ncu = ncu_evidence(csv_text, kernel)
    return analyze(definition, axes, [ncu, *extra], ceilings=ceilings, measured_ms=measured_ms,
                   kernel=ncu.evidence.get("kernel_name") if ncu.ok else kernel, rules_dir=rules_dir)


# ------------------------------------------------------------------------------------- GPU runner


def sass_from_dirs(dirs: Iterable[Path], function: str | None = None, *, timeout_s: float | None = None) -> Collected:
    """SASS facts for ``function`` from cubins / shared objects under ``dirs`` (Triton cache, build dir).
    ``timeout_s`` bounds all the ``cuobjdump`` runs together (``subprocess.TimeoutExpired`` past it)."""
    import time

    exe = find_tool("cuobjdump")
    if exe is None:
        return Collected.unavailable("sass", "cuobjdump not found")
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    funcs: dict[str, dict[str, Any]] = {}
    for d in dirs:
        if not Path(d).is_dir():
            continue
        for f in sorted(Path(d).rglob("*")):
            if f.suffix not in (".cubin", ".so", ".o") or not f.is_file():
                continue
            left = 120.0 if deadline is None else min(120.0, deadline - time.monotonic())
            if left <= 0:
                raise subprocess.TimeoutExpired([exe], timeout_s or 0.0)
            p = run_bounded([exe, "--dump-sass", str(f)], timeout=left)
            if p.returncode == 0:
                funcs.update(parse_sass(p.stdout))
    if not funcs:
        return Collected.unavailable("sass", "no device code found in the Triton cache or the build folder")
    name = pick_function(funcs, function) or pick_function(funcs, None)
    assert name is not None
    ev = facts_evidence(funcs[name])
    ev["sass_function"] = name
    return Collected(source="sass", evidence=ev, raw={"functions": sorted(funcs)})


def profile_workload(solution: Solution, definition: Definition, workload: Workload, workdir: Path, *,
                     definition_path: Path | None = None, seed: int = 0, kernel_regex: str | None = None,
                     metrics: Iterable[str] = METRICS, energy: bool = True, timeout_s: float = 600,
                     python: str | None = None, sandbox_mode: str | None = None,
                     gpu: Any = None, budget: ProfileBudget | None = None) -> tuple[list[Collected], dict[str, str]]:
    """Collect ncu, SASS and NVML evidence for one workload on this machine's GPU. The candidate runs
    in sandboxed children with private scratch folders (harness/profile/child.py); ``workdir`` gets
    only what this process writes (the ncu CSV and log). ``gpu`` (``harness.gpu_pool.GPU``): the one GPU
    the children see, as the evaluation's workers did. ``budget``: each step (ncu, SASS, energy) is
    granted by it, with what it has left as the step's timeout (``timeout_s`` caps each step), and a
    step it refuses or stops reports its evidence as missing with the reason."""
    from ..runner import sandbox_reads
    from .child import CandidateChild

    budget = budget if budget is not None else ProfileBudget(None)
    uid = workload.uuid
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    read = sandbox_reads(None, definition, definition_path)
    base = {"solution": solution.model_dump(mode="json", exclude_unset=True),
            "definition": definition.model_dump(mode="json", exclude_unset=True),
            "workload": workload.model_dump(mode="json", exclude_unset=True),
            "definition_path": str(definition_path) if definition_path else None, "seed": seed}
    files: dict[str, str] = {}
    collected: list[Collected] = []

    ncu = find_ncu()
    grant = budget.grant("ncu", uid, cap_s=timeout_s) if ncu is not None else None
    if ncu is None:
        collected.append(Collected.unavailable("ncu", "ncu (Nsight Compute) not found on PATH or in /usr/local/cuda/bin"))
        collected.append(sass_from_dirs([], None))
    elif grant is not None and not grant.ok:
        collected.append(Collected.unavailable("ncu", grant.refused or ""))
        collected.append(Collected.unavailable("sass", "not run: no ncu run compiled the kernels (ncu " + (grant.refused or "") + ")"))
    else:
        assert grant is not None and grant.timeout_s is not None
        with CandidateChild(sandbox_mode, read, gpu) as child:
            stopped = False
            try:
                run = run_ncu(child.command("harness.profile.driver", {**base, "warmup": 3, "calls": 1, "energy": False}, python),
                              ncu=ncu, metrics=metrics, env=child.env(), cwd=str(child.scratch), timeout=grant.timeout_s,
                              kernel_regex=kernel_regex)
                files["ncu_command"] = command_text(run.command)
                csv_path = workdir / "ncu.csv"
                csv_path.write_text(run.csv)
                (workdir / "ncu.log").write_text(run.log[-50000:])
                files["ncu_csv"] = str(csv_path)
                files["ncu_log"] = str(workdir / "ncu.log")
                ev = ncu_evidence(run.csv)
                if not ev.ok and not run.csv:
                    tail = run.log.strip().splitlines()[-3:]
                    ev = Collected.unavailable("ncu", f"ncu exited {run.returncode} without a CSV: {' | '.join(tail)[-400:]}")
                if run.dropped:
                    ev.raw["dropped_metrics"] = run.dropped
                collected.append(ev)
            except subprocess.TimeoutExpired:
                stopped = True
                collected.append(Collected.unavailable("ncu", f"ncu {budget.stopped_reason(grant)}"))
            budget.finish(grant, stopped=stopped)
            main_kernel = next((c.evidence.get("kernel_name") for c in collected if c.source == "ncu" and c.ok), None)
            sg = budget.grant("sass", uid, cap_s=timeout_s)
            if not sg.ok:
                collected.append(Collected.unavailable("sass", sg.refused or ""))
            else:
                stopped = False
                try:
                    collected.append(sass_from_dirs(child.cache_dirs(), main_kernel, timeout_s=sg.timeout_s))
                except subprocess.TimeoutExpired:
                    stopped = True
                    collected.append(Collected.unavailable("sass", f"cuobjdump {budget.stopped_reason(sg)}"))
                budget.finish(sg, stopped=stopped)
    eg = budget.grant("energy", uid, cap_s=timeout_s) if energy else None
    if eg is not None and not eg.ok:
        collected.append(Collected.unavailable("nvml", eg.refused or ""))
    elif eg is not None:
        assert eg.timeout_s is not None
        stopped = False
        with CandidateChild(sandbox_mode, read, gpu) as child:
            try:
                p = run_bounded(child.command("harness.profile.driver", {**base, "warmup": 3, "calls": 10, "energy": True}, python),
                                timeout=eg.timeout_s, env=child.env(), cwd=str(child.scratch))
                res = child.result() or {"error": p.stderr[-400:]}
                e = res.get("energy") if isinstance(res.get("energy"), dict) else {}
                if res.get("ok") is True and "energy_j_per_call" in e:
                    collected.append(Collected(source="nvml", evidence=e, raw=res.get("energy_raw") if isinstance(res.get("energy_raw"), dict) else {}))
                else:
                    collected.append(Collected.unavailable("nvml", str(e.get("missing") or res.get("error") or "energy run failed")[:400]))
            except subprocess.TimeoutExpired:
                stopped = True
                collected.append(Collected.unavailable("nvml", f"energy run {budget.stopped_reason(eg)}"))
        budget.finish(eg, stopped=stopped)
    return collected, files


def static_compile(solution: Solution, definition: Definition, budget: ProfileBudget, *, launches: list[dict[str, Any]] | None = None,
                   sandbox_mode: str | None = None, cap_s: float = 300) -> Collected:
    """The ahead-of-time sm_90 statistics of a Triton solution (``triton_module.run_isolated``) as a step
    of ``budget``: refused, or stopped at what the budget has left, it is missing with the reason.
    ``launches``: the kernels' recorded launch signatures (``recorded_launches``)."""
    from .triton_module import run_isolated

    grant = budget.grant("static", None, cap_s=cap_s)
    if not grant.ok:
        return Collected.unavailable("triton", f"ahead-of-time compile {grant.refused}")
    assert grant.timeout_s is not None
    c = run_isolated(solution, definition, timeout_s=grant.timeout_s, sandbox_mode=sandbox_mode, launches=launches)
    stopped = bool(c.raw.get("timed_out"))
    budget.finish(grant, stopped=stopped)
    if stopped:
        return Collected.unavailable("triton", f"ahead-of-time compile {budget.stopped_reason(grant)}")
    return c


def profile_report(report: Report, out: Path, definition: Definition, solution: Solution, workloads: list[Workload], *,
                   ceilings: Ceilings | None = None, definition_path: Path | None = None, profile: bool = True,
                   max_profiled: int = 4, static: bool = True, rules_dir: str | Path | None = None,
                   sandbox_mode: str | None = None, budget_s: float | None = None, budget: ProfileBudget | None = None,
                   static_evidence: Collected | Callable[[ProfileBudget], Collected | None] | None = None,
                   gpu: Any = None) -> dict[str, Any]:
    """Fold roofline, feedback items, profile evidence and energy into each PASSED workload of ``report``;
    returns what the profiling cost and covered (also ``report.profiling``).

    Every passing workload gets its roofline (with the measured median) and the rules that need no
    profiler. Up to ``max_profiled`` of them -- spread from the smallest to the largest roofline floor,
    since one ncu run costs tens of seconds -- are also profiled (ncu, SASS, NVML) when ``profile``,
    the largest first, each with the ncu sections its roofline class calls for (``plan.plan_for``).
    The energy run is left out where the timing worker already measured the workload's energy (the
    figure the report keeps). Every step is granted by the per-candidate budget (``plan.ProfileBudget``:
    ``budget``, or a fresh one of ``budget_s`` seconds, None: no limit), which also bounds it.
    With ``static`` (and a Triton solution) the kernels are also compiled ahead of time for sm_90 in a
    child process, once, with the launch signatures the evaluation's workers recorded
    (``recorded_launches``), and their statistics (registers, spills, SASS facts) join every workload's
    evidence -- the part of the feedback that needs no GPU. ``gpu``: the GPU the evaluation was pinned to
    (profiled there too). ``static_evidence``: that compile's result when the caller already has it,
    so it is not compiled again, or how the caller gets it (called with the budget where the compile
    would run: a campaign keeps it per solution).
    Writes ``<out>/profile/<uuid>/{ncu.csv, ncu.log, feedback.json, feedback.md}``, all by this process;
    candidate code runs in sandboxed children (``sandbox_mode``, default the report's) whose folders are
    private and elsewhere.
    """
    from .triton_module import recorded_launches

    out = Path(out)
    budget = budget if budget is not None else ProfileBudget(budget_s)
    mode = sandbox_mode or (report.isolation or {}).get("mode") or None
    # What needs no profiler first (ceilings, rules, plans): after the last step only the analysis runs.
    if ceilings is None:
        ceilings = _ceilings_for_report(report)
    rules = load_rules(rules_dir)
    by_uuid = {w.uuid: w for w in workloads}
    passing = [wr for wr in report.workloads if wr.status is Status.PASSED and wr.uuid in by_uuid]

    def placed(wr: WorkloadResult) -> Roofline | None:
        if wr.roofline is not None or ceilings is None:
            return wr.roofline
        w = by_uuid[wr.uuid]
        return compute_roofline(definition, definition.resolve_axes(w.axes), ceilings, absent=w.absent_inputs(),
                                given=given_counts(wr.roofline))

    plans = {wr.uuid: plan_for(placed(wr), rules) for wr in passing}
    chosen: list[WorkloadResult] = []
    if profile and passing and max_profiled > 0:
        def floor(wr: WorkloadResult) -> float:
            roof = placed(wr)
            return roof.floor_ms if roof is not None and roof.floor_ms else 0.0

        ordered = sorted(passing, key=floor)
        n = min(max_profiled, len(ordered))
        idx = sorted({round(i * (len(ordered) - 1) / max(n - 1, 1)) for i in range(n)})
        chosen = [ordered[i] for i in reversed(idx)]  # the largest first: it dominates the time
    static_ev: list[Collected] = []
    if callable(static_evidence):
        got = static_evidence(budget)
        static_ev = [got] if got is not None else []
    elif static_evidence is not None:
        static_ev = [static_evidence]
    elif static and solution is not None and solution.spec.language.value == "triton":
        static_ev = [static_compile(solution, definition, budget, launches=recorded_launches(report), sandbox_mode=mode)]
    gathered: dict[str, tuple[list[Collected], dict[str, str]]] = {}
    from ..inputs import TIMED_TRIAL, seed_for  # torch, only where workloads are profiled

    run_seed = int((report.config or {}).get("seed", 0) or 0)
    for wr in chosen:
        # Each step asks the budget itself; one it refuses reports its evidence missing, with why. The
        # profiled inputs are the timed ones, whose counts (given_counts) set the roofline's floor.
        gathered[wr.uuid] = profile_workload(solution, definition, by_uuid[wr.uuid], out / "profile" / wr.uuid,
                                             definition_path=definition_path, sandbox_mode=mode,
                                             seed=seed_for(run_seed, wr.uuid, TIMED_TRIAL),
                                             metrics=plans[wr.uuid].metrics, gpu=gpu, budget=budget,
                                             energy=wr.energy_j_per_call is None)
    for wr in passing:
        w = by_uuid[wr.uuid]
        axes = definition.resolve_axes(w.axes)
        wdir = out / "profile" / wr.uuid
        collected, files = gathered.get(wr.uuid) or ([Collected.unavailable(
            "ncu", f"not profiled: only {max_profiled} workloads spread by size are" if profile else
            "profiling not requested")], {})
        measured = wr.latency_ms.median if wr.latency_ms else None
        # Order matters: analyze() keeps the first value of a name, so the SASS of the kernels this run
        # really compiled (runtime) wins over the static compile's guess at the same names.
        dominant = next((c.evidence.get("kernel_name") for c in collected if c.source == "ncu" and c.ok), None)
        outcome = analyze(definition, axes, [*collected, *dominant_static(static_ev, dominant)], ceilings=ceilings, measured_ms=measured,
                          rules_dir=rules_dir, absent=w.absent_inputs(), given=given_counts(wr.roofline))
        outcome.files = files
        _fold(wr, outcome)
        wr.profile = {**(wr.profile or {}), "plan": plans[wr.uuid].to_dict()}
        wdir.mkdir(parents=True, exist_ok=True)
        (wdir / "feedback.json").write_text(json.dumps(outcome.to_json(workload=wr.uuid), indent=2, default=str))
        (wdir / "feedback.md").write_text(outcome.markdown(title=f"{definition.name} / {wr.uuid}"))
    static_state = (static_ev[0].missing or "ok") if static_ev else (
        "not a Triton solution" if static else "not requested")
    ran_ncu = {x["workload"] for x in budget.steps if x["step"] == "ncu"}
    record = {**budget.record(), "profile": bool(profile), "static": static_state,
              "profiled": [wr.uuid for wr in chosen if wr.uuid in ran_ncu],
              "items": sum(len(wr.feedback) for wr in passing), "workloads": len(passing)}
    report.profiling = record
    return record


def dominant_static(static_ev: list[Collected], kernel: str | None) -> list[Collected]:
    """The static compile's evidence for ``kernel`` (the one ncu found taking the most time) when the
    compile has statistics of that kernel; else as compiled (its largest kernel)."""
    if not static_ev or not kernel or not static_ev[0].ok:
        return static_ev
    c = static_ev[0]
    details = (c.raw.get("kernels") or {}).get(kernel)
    if not isinstance(details, dict) or not isinstance(details.get("evidence"), dict) or c.evidence.get("triton_kernel") == kernel:
        return static_ev
    return [Collected(source=c.source, evidence=details["evidence"], raw={**c.raw, "chosen_for": kernel})]


def _fold(wr: WorkloadResult, outcome: ProfileOutcome) -> None:
    if outcome.roofline is not None:
        wr.roofline = outcome.roofline
    wr.feedback = list(outcome.feedback)
    prof = dict(wr.profile or {})
    prof.update(outcome.profile_dict())
    wr.profile = prof
    nvml = next((c for c in outcome.collected if c.source == "nvml" and c.ok), None)
    if nvml is not None and wr.energy_j_per_call is None:
        # The timing worker's figure, when there is one, stays: it was measured beside the paired
        # baseline's (baseline_energy_j_per_call) with the same protocol, and promotion compares the two.
        wr.energy_j_per_call = nvml.evidence.get("energy_j_per_call")


def _ceilings_for_report(report: Report) -> Ceilings | None:
    if report.device.kind == "cuda":
        try:
            return ceilings_for("cuda")
        except Exception:
            return documented_ceilings(report.device.name)
    return ceilings_for("cpu")
