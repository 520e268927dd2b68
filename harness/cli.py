"""The ``kbot`` command line.

Exit codes (other tools depend on them):
  0  everything asked for succeeded (for ``eval``: every workload PASSED)
  1  the evaluation ran and some workload did not pass
  2  bad input: a file that does not load, a wrong option (click's usage errors are 2 as well)
  3  the harness itself failed (a bug or a broken environment), not the solution
  4  a declared baseline could not run here (its library or its hardware is absent); nothing was measured
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from .dataset import click_option
from .paths import REPO_ENV, PathsError, check_repository, find_file, read_marker, repository, state_dir
from .sandbox import MODES as SANDBOX_MODES
from .sandbox import SandboxError
from .schema import SchemaError, Status

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_HARNESS, EXIT_UNAVAILABLE = 0, 1, 2, 3, 4
DATASET_OPT = click_option()


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="kbot")
@click.option("--repo", "repo_arg", type=click.Path(file_okay=False), metavar="DIR",
              help=f"The kbot repository (its definitions/, kernels/, skills/ come before kbot's own). Default: ${REPO_ENV}, "
                   "else the nearest folder at or above the working directory that holds kbot.toml; none: kbot's own files only.")
def cli(repo_arg) -> None:
    """kbot: optimize GPU kernels with LLM agents, one pull request per attempt.

    \b
    Start here:
      kbot definitions list                 what can be optimized
      kbot eval SOLUTION.json -d DEF.json   build, check and time one solution
      kbot eval --help                      every option, with the protocol explained
      kbot init                             make this git repository a kbot repository
    """
    try:
        if repo_arg:  # through the environment, so worker processes and the bot's commands see it too
            os.environ[REPO_ENV] = str(check_repository(Path(repo_arg), "--repo"))
        repo = repository()  # a bad KBOT_REPO or kbot.toml is bad input, said once here
        if repo is not None:
            read_marker(repo)
    except PathsError as e:
        _bad_input(str(e))


def _bad_input(msg: str) -> None:
    click.echo(f"error: {msg}", err=True)
    sys.exit(EXIT_BAD_INPUT)


TRACEBACK_ENV = "KBOT_TRACEBACK"  # set to 1: a harness failure also prints its traceback


def save_traceback(exc: BaseException) -> Path | None:
    """The traceback of ``exc`` (and the command line) in ``<kbot cache>/errors/``; None when no file
    could be written there nor in the temporary folder."""
    import datetime as dt
    import os
    import tempfile
    import traceback

    from .ceilings import cache_root

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    text = f"kbot {' '.join(sys.argv[1:])}\n\n" + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    for folder in (cache_root() / "errors", Path(tempfile.gettempdir()) / "kbot-errors"):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"harness-{stamp}-{os.getpid()}.txt"
            path.write_text(text)
            return path
        except OSError:
            continue
    return None


def harness_failure(exc: BaseException, what: str = "") -> None:
    """Exit 3 for kbot's own failure (a bug or a broken environment, not the solution's): one line
    with the reason and where the traceback was saved (the traceback itself with KBOT_TRACEBACK=1)."""
    import os

    path = save_traceback(exc)
    reason = (str(exc).strip().splitlines() or [""])[0][:300]
    where = f"traceback saved to {path}" if path else "the traceback could not be saved"
    click.echo(f"harness error{' on ' + what if what else ''}: {type(exc).__name__}{': ' + reason if reason else ''} "
               f"({where}; kbot's failure, not the solution's)", err=True)
    if os.environ.get(TRACEBACK_ENV) == "1" or path is None:
        import traceback

        click.echo("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)), err=True)
    sys.exit(EXIT_HARNESS)


def resolve_definition(value: str, dataset_arg: str | None = None, workloads: str | None = None):
    """``harness.dataset.resolve`` for a command line: the definition, where it and its workloads come
    from (``--dataset`` / ``FIB_DATASET_PATH``), or exit 2 saying why it cannot tell."""
    from .dataset import dataset_root, resolve

    try:
        if workloads:  # like a solution: found here, else in the repository, else in kbot's own files
            workloads = str(find_file(workloads, "workloads"))
        return resolve(value, dataset=dataset_root(dataset_arg), workloads=workloads)
    except (SchemaError, PathsError) as e:
        _bad_input(str(e))
        raise  # unreachable: _bad_input exits


BASELINE_ARG = "baseline:"  # `kbot eval baseline:NAME`: a declared baseline of the definition, by name


SANDBOX_OPTION = click.option(
    "--sandbox", "sandbox_mode", type=click.Choice(SANDBOX_MODES), default=None,
    help="OS sandbox for candidate code (Landlock filesystem rules + seccomp, no network): required refuses to "
         "run without it (exit 3), auto runs without it and says so loudly, off does not try. Default: "
         "$KBOT_SANDBOX, else required on GitHub Actions (GITHUB_ACTIONS=true), else auto.")


@cli.command("eval")
@click.argument("solution_json", metavar="SOLUTION", type=click.Path(dir_okay=False))
@click.option("--definition", "-d", "definition_arg", required=True, help="Definition JSON file, or the name of one of ours (definitions/NAME).")
@click.option("--workloads", "-w", "workloads_path", type=click.Path(dir_okay=False), help="Workloads JSONL (default: the definition's own; see --dataset).")
@DATASET_OPT
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default="auto",
    show_default=True,
    help="cpu runs python and triton solutions on the CPU (Triton through its interpreter), whatever target_hardware says.",
)
@click.option("--trials", type=click.IntRange(1, 1000), help="Correctness trials per workload, each with fresh inputs (default: the definition's, usually 3).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(1, 86400), default=300, show_default=True, help="Seconds per workload before it ends as TIMEOUT.")
@click.option("--total-timeout", "total_timeout_s", type=click.FloatRange(1, 7 * 86400), help="Seconds for the whole run.")
@click.option(
    "--baseline",
    "baseline_json",
    type=click.Path(dir_okay=False),
    help="A second solution measured interleaved with the candidate in one process; reports the paired ratio.",
)
@click.option(
    "--baselines",
    "baselines_arg",
    default="none",
    show_default=True,
    metavar="all|none|NAME,...",
    help="Declared baselines (definitions/<def>/baselines/) to measure beside the solution on every workload it passes, each paired with it.",
)
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Run folder (default: .kbot/runs/<definition>/<solution hash>/<run id>).")
@click.option("--resume", is_flag=True, help="Continue an interrupted run in --out: workloads with a trace line are not measured again.")
@click.option("--seed", type=int, default=0, show_default=True, help="Base seed for inputs (each workload and trial derives its own).")
@click.option("--workload", "workload_filter", multiple=True, help="Only these workload UUIDs (repeatable; a prefix is enough).")
@click.option(
    "--budget",
    "budget_s",
    type=click.FloatRange(0.01, 600),
    default=0.5,
    show_default=True,
    help="Timing budget per workload in seconds (sampling stops earlier once the median's 95% interval is within ±0.3%).",
)
@click.option(
    "--timing",
    "timing_pairs",
    multiple=True,
    metavar="NAME=VALUE",
    help="Advanced: override one timing-protocol setting (repeatable), e.g. --timing min_iters=200 "
    "--timing resolution_ms=0.000032. Names: see harness/timing_config.py.",
)
@click.option("--atol", type=float, help="Override the definition's absolute tolerance.")
@click.option("--rtol", type=float, help="Override the definition's relative tolerance.")
@click.option("--dataset-root", type=click.Path(file_okay=False), help="Folder that safetensors inputs are relative to.")
@click.option("--profile", "with_profile", is_flag=True,
              help="Fold feedback items into the report: the roofline rules and a Triton solution's ahead-of-time sm_90 "
                   "compile statistics everywhere; on a GPU also ncu (the sections the roofline class calls for), SASS and "
                   "NVML energy for a few workloads within --profile-budget.")
@click.option("--profile-budget", "profile_budget_s", type=click.FloatRange(1, 7200), default=None,
              help="Seconds the GPU profiling of this solution may take (default: no limit); the cost is in report.json.")
@SANDBOX_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the report JSON instead of a table.")
def eval_cmd(
    solution_json,
    definition_arg,
    workloads_path,
    dataset_arg,
    device,
    trials,
    timeout_s,
    total_timeout_s,
    baseline_json,
    baselines_arg,
    out_dir,
    resume,
    seed,
    workload_filter,
    budget_s,
    timing_pairs,
    atol,
    rtol,
    dataset_root,
    with_profile,
    profile_budget_s,
    sandbox_mode,
    as_json,
):
    """Build, guard, check and time SOLUTION (a solution JSON file, or baseline:NAME for one of the
    definition's declared baselines) on every workload of a definition.

    \b
    Protocol: each workload runs in an isolated worker process. Correctness uses several trials with
    fresh seeded inputs, poisoned outputs and an unchanged-inputs check, against the definition's
    reference. Timing on the GPU uses CUDA events with L2 flushed and new input values before every
    call, repeated until the standard error is small; timed outputs are re-checked. The reference is
    timed the same way. With --baseline both solutions are interleaved and the paired ratio reported.
    Beside the event latency the GPU's own time per call is read from CUPTI records (kernel_time in
    the report, "GPU time" in the table; --timing kernel_time=false turns it off).

    \b
    \b
    baseline:NAME runs a declared baseline (definitions/<def>/baselines/NAME/, trusted-author code
    around a pinned library) under the baseline trust level: the candidate policy of the guard does
    not apply to it, everything else does (the sandbox included). --baselines measures declared
    baselines beside a candidate.

    Candidate code runs in an OS sandbox (Landlock + seccomp, see --sandbox): it can read its own
    sources and the Python/CUDA installation, write only a private scratch folder, and has no network.

    \b
    Writes OUT/traces.jsonl (one FlashInfer-Bench Trace per workload, whatever happened),
    OUT/report.json and OUT/solution.json, nothing else; a symlink found there is replaced, never
    followed. Exits 0 only if every workload PASSED, 1 if any did not, 2 on bad input, 3 when the
    harness itself failed (a required sandbox that this machine cannot give included), 4 when a
    declared baseline could not run here (the reason is printed).
    """
    from .runner import evaluate
    from .schema import load_solution

    resolved, workloads, ((solution, trust),) = _load_run_inputs(definition_arg, workloads_path, workload_filter, [solution_json], dataset_arg)
    definition, dpath = resolved.definition, resolved.path
    beside = _declared_baselines(definition.name, baselines_arg)
    if beside and trust != "candidate":
        _bad_input("--baselines measures declared baselines beside a candidate, not beside another baseline")
    try:
        baseline = load_solution(baseline_json) if baseline_json else None
    except SchemaError as e:
        _bad_input(str(e))
    dev = _device(device)
    cfg = _run_config(dev, trials, seed, timeout_s, total_timeout_s, budget_s, timing_pairs, atol, rtol, dataset_root, sandbox_mode)
    cfg.provenance = resolved.provenance(len(workloads))
    if out_dir is None:
        if resume:
            _bad_input("--resume needs --out (the run folder to continue)")
        import uuid

        out = state_dir() / "runs" / definition.name / solution.content_hash()[:16] / uuid.uuid4().hex[:12]
    else:
        out = Path(out_dir)
    try:
        report = _run_with_progress(
            lambda progress: evaluate(definition, solution, workloads, out, cfg, baseline=baseline, definition_path=dpath, resume=resume, progress=progress,
                                      trust=trust, declared_baselines=beside),
            len(workloads),
            quiet=as_json,
        )
    except SchemaError as e:
        _bad_input(str(e))
    except SandboxError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(EXIT_HARNESS)
    except Exception as e:  # noqa: BLE001 — our failure, not the solution's: exit 3, not 1
        harness_failure(e)
    if with_profile:
        _fold_profile(report, out, definition, solution, workloads, gpu=dev == "cuda", budget_s=profile_budget_s)
    if as_json:
        click.echo(report.to_json(), nl=False)
    else:
        from .report_table import print_report

        print_report(report, out)
    if report.unavailable:
        click.echo(f"could not run here: {report.unavailable}", err=True)
        sys.exit(EXIT_UNAVAILABLE)
    sys.exit(EXIT_OK if report.all_passed else EXIT_FAILED)


def _solution_arg(arg: str, definition_name: str):
    """(solution, trust level): a JSON file is always a candidate; ``baseline:NAME`` is the definition's
    declared baseline NAME, found in this checkout's definitions/ (the only way to the baseline level)."""
    from .baselines import BaselineError, find
    from .schema import load_solution

    if arg.startswith(BASELINE_ARG) and not Path(arg).exists():
        try:
            return find(definition_name, arg[len(BASELINE_ARG):]).solution, "baseline"
        except BaselineError as e:
            _bad_input(str(e))
    try:  # a relative path not found here is tried in the repository, then in kbot's own files
        path = find_file(arg, "solution")
    except PathsError as e:
        _bad_input(str(e))
    return load_solution(path), "candidate"


def _declared_baselines(definition_name: str, arg: str) -> list:
    from .baselines import BaselineError, declared

    if arg in ("none", ""):
        return []
    try:
        every = declared(definition_name)
    except BaselineError as e:
        _bad_input(str(e))
    if arg == "all":
        return every
    names = [n.strip() for n in arg.split(",") if n.strip()]
    unknown = [n for n in names if n not in {b.name for b in every}]
    if unknown:
        _bad_input(f"--baselines: {', '.join(unknown)} not declared for {definition_name} (declared: {', '.join(b.name for b in every) or 'none'})")
    return [b for b in every if b.name in names]


def _load_run_inputs(definition_arg: str, workloads_path: str | None, workload_filter, solution_paths: list[str],
                     dataset_arg: str | None = None):
    """The resolved definition, its selected workloads and the solutions, or exit 2 naming what is
    wrong. Says on stderr which definition and which workloads it uses (``harness.dataset``)."""
    resolved = resolve_definition(definition_arg, dataset_arg, workloads_path)
    definition = resolved.definition
    try:
        solutions = [_solution_arg(p, definition.name) for p in solution_paths]
        for sol, _ in solutions:
            if sol.definition != definition.name:
                _bad_input(f"solution '{sol.name}' is for definition '{sol.definition}', not '{definition.name}'")
        workloads = resolved.workloads()
    except SchemaError as e:
        _bad_input(str(e))
    if workload_filter:
        workloads = [w for w in workloads if any(w.uuid.startswith(p) for p in workload_filter)]
    if not workloads:
        _bad_input("no workloads selected")
    click.echo(f"using {resolved.describe(len(workloads))}", err=True)
    return resolved, workloads, solutions


def _device(device: str) -> str:
    from .env import resolve_device

    try:
        return resolve_device(device)
    except (RuntimeError, ValueError) as e:
        _bad_input(str(e))
        raise  # unreachable: _bad_input exits


def _run_config(dev, trials, seed, timeout_s, total_timeout_s, budget_s, timing_pairs, atol, rtol, dataset_root, sandbox_mode=None):
    from .runner import RunConfig
    from .sandbox import default_mode
    from .timing_config import parse_timing_overrides

    try:
        timing = {"budget_s": budget_s, **parse_timing_overrides(timing_pairs)}
    except ValueError as e:
        _bad_input(str(e))
    overrides = {}
    if atol is not None or rtol is not None:
        overrides["tolerance"] = {k: v for k, v in (("atol", atol), ("rtol", rtol)) if v is not None}
    try:
        mode = sandbox_mode or default_mode()
    except ValueError as e:
        _bad_input(str(e))
    return RunConfig(
        device=dev,
        trials=trials,
        seed=seed,
        timeout_s=timeout_s,
        total_timeout_s=total_timeout_s,
        timing=timing,
        config_overrides=overrides,
        dataset_root=dataset_root,
        sandbox=mode,
    )


@cli.command("eval-many")
@click.argument("solution_jsons", metavar="SOLUTION...", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--definition", "-d", "definition_arg", required=True, help="Definition JSON file, or the name of one of ours (definitions/NAME).")
@click.option("--workloads", "-w", "workloads_path", type=click.Path(dir_okay=False), help="Workloads JSONL (default: the definition's own; see --dataset).")
@DATASET_OPT
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--trials", type=click.IntRange(1, 1000), help="Correctness trials per workload (default: the definition's).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(1, 86400), default=300, show_default=True, help="Seconds per workload before it ends as TIMEOUT.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    required=True,
    help="Folder for the runs: OUT/<n>-<solution name>/ holds each solution's traces.jsonl and report.json.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--workload", "workload_filter", multiple=True, help="Only these workload UUIDs (repeatable; a prefix is enough).")
@click.option("--budget", "budget_s", type=click.FloatRange(0.01, 600), default=0.5, show_default=True, help="Timing budget per workload in seconds.")
@click.option("--timing", "timing_pairs", multiple=True, metavar="NAME=VALUE", help="Advanced: override one timing-protocol setting (repeatable).")
@SANDBOX_OPTION
@click.option("--gpus", "gpus_arg", metavar="N|all|I,J,...",
              help="Evaluate the solutions concurrently, one per GPU of this host at a time: a count, all, or indices (0,2; one GPU alone: 3,).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON summary instead of tables.")
def eval_many_cmd(solution_jsons, definition_arg, workloads_path, dataset_arg, device, trials, timeout_s, out_dir, seed, workload_filter,
                  budget_s, timing_pairs, sandbox_mode, gpus_arg, as_json):
    """Evaluate several solutions of one definition, one after another, each as `kbot eval` would.

    \b
    What it adds: while one solution is evaluated, the worker processes for the next one start and
    import torch (3-4 s on the H200), so each later solution starts at its job. Every solution still
    gets fresh processes of its own (a process is never reused across candidates); the GPU still runs
    one solution at a time. Use it on a runner that has several candidates to judge.

    \b
    Options are a subset of `kbot eval`'s (no --baseline, --resume, --profile, tolerance overrides or
    dataset root): it is for judging a batch of candidates on the standard protocol.

    \b
    With --gpus, the solutions run concurrently instead, one per GPU (each pinned to its GPU, nothing
    else on that GPU meanwhile; no spare workers): N solutions on N GPUs take about the time of one.
    summary.json then says which GPU each came from, and each GPU's ceilings. A GPU found lost after a
    solution ran on it (nvidia-smi) has that result set aside (OUT/<n>-<name>.lost-gpu<i>/) and the
    solution measured again on another GPU; one the pool could not measure is a harness failure (exit 3)
    after every other solution has finished.

    \b
    Writes OUT/<n>-<name>/{traces.jsonl,report.json} per solution and OUT/summary.json (also when the
    harness fails part-way: the solutions done so far); exits 0 only if every workload of every
    solution PASSED, 1 if any did not, 2 on bad input, 3 when the harness itself failed.
    """
    import time

    from .runner import Spares, evaluate

    resolved, workloads, solutions = _load_run_inputs(definition_arg, workloads_path, workload_filter, list(solution_jsons), dataset_arg)
    definition, dpath = resolved.definition, resolved.path
    dev = _device(device)
    cfg = _run_config(dev, trials, seed, timeout_s, None, budget_s, timing_pairs, None, None, None, sandbox_mode)
    cfg.provenance = resolved.provenance(len(workloads))
    out = Path(out_dir)
    if gpus_arg is not None:
        _eval_many_on_gpus(gpus_arg, definition, dpath, workloads, solutions, out, cfg, as_json)
        return
    ready, upcoming = Spares(), Spares()  # started during the previous solution; starting for the next one
    rows = []
    try:
        for i, sol in enumerate(solutions):
            # the next solution's workers import torch while this one runs
            upcoming = Spares.started_for(cfg) if i + 1 < len(solutions) else Spares()
            sol, trust = sol
            spares = ready
            run_dir = _many_dir(out, i, sol)
            t0 = time.monotonic()
            try:
                report = _run_with_progress(
                    lambda progress, sol=sol, run_dir=run_dir, spares=spares, trust=trust: evaluate(
                        definition, sol, workloads, run_dir, cfg, definition_path=dpath, progress=progress, spares=spares, trust=trust
                    ),
                    len(workloads),
                    quiet=as_json,
                )
            except SchemaError as e:
                _write_summary(out, definition.name, rows)
                _bad_input(f"{sol.name}: {e}")
            except SandboxError as e:
                _write_summary(out, definition.name, rows)
                click.echo(f"error: {e}", err=True)
                sys.exit(EXIT_HARNESS)
            except Exception as e:  # noqa: BLE001 — our failure, not the solution's: exit 3, not 1
                _write_summary(out, definition.name, rows)
                harness_failure(e, sol.name)
            rows.append(_many_row(sol, trust, run_dir, report, time.monotonic() - t0))
            if not as_json:
                from .report_table import print_report

                print_report(report, run_dir)
            ready.close()  # any it did not use (a retried observer takes a fresh process)
            ready = upcoming
    finally:
        ready.close()
        upcoming.close()
    _write_summary(out, definition.name, rows)
    if as_json:
        click.echo(json.dumps({"definition": definition.name, "runs": rows}, indent=2))
    else:
        for r in rows:
            what = f"could not run here: {r['unavailable']}" if r["unavailable"] else f"{r['passed']}/{r['workloads']} passed"
            click.echo(f"{r['solution']:<32} {what}  {r['wall_s']:.1f} s  -> {r['out']}")
    # A baseline that could not run here is said, not failed; the exit code judges what ran.
    ran = [r for r in rows if not r["unavailable"]]
    sys.exit(EXIT_OK if ran and all(r["all_passed"] for r in ran) else EXIT_UNAVAILABLE if not ran else EXIT_FAILED)


def _many_dir(out: Path, i: int, sol) -> Path:
    """The run folder of the ``i``-th solution of an ``eval-many``: OUT/<n>-<name>/."""
    return out / f"{i + 1:02d}-{_safe_name(sol.name)}"


def _many_row(sol, trust: str, run_dir: Path, report, wall: float) -> dict:
    timed_s = sum(w.latency_ms.n * w.latency_ms.mean for w in report.workloads if w.latency_ms) / 1e3
    return {"solution": sol.name, "out": str(run_dir), "passed": sum(w.status is Status.PASSED for w in report.workloads),
            "workloads": len(report.workloads), "all_passed": report.all_passed, "trust": trust, "unavailable": report.unavailable,
            "wall_s": round(wall, 3), "timed_kernel_s": round(timed_s, 4)}


def _eval_many_on_gpus(spec: str, definition, dpath, workloads, solutions, out: Path, cfg, as_json: bool, provider=None) -> None:
    """``eval-many --gpus``: the solutions over a pool of this host's GPUs (harness/gpu_pool.py); exits."""
    import time

    from .gpu_pool import GPUSelectionError, NvidiaSmi, Pool, gpus_for
    from .report_table import print_report

    provider = provider or NvidiaSmi()
    if provider.kind != cfg.device:
        _bad_input(f"--gpus {spec} spreads the solutions over this host's GPUs, but --device {cfg.device} runs them on the {cfg.device}")
    try:
        pool = Pool(gpus_for(spec, provider), provider)
    except GPUSelectionError as e:
        _bad_input(str(e))
    click.echo(f"on {len(pool.gpus)} GPUs: " + ", ".join(f"{g.index} ({g.name})" for g in pool.gpus), err=True)
    t0 = time.monotonic()
    placed = evaluate_many(definition, solutions, workloads, cfg, pool, definition_path=dpath,
                           run_dir=lambda i, sol: _many_dir(out, i, sol), echo=lambda m: click.echo(m, err=True))
    wall = time.monotonic() - t0
    rows, failed, bad = [], [], []
    for p in placed:
        sol, trust = solutions[p.index]
        run_dir = _many_dir(out, p.index, sol)
        where = {"gpu": p.gpu.index if p.gpu else None, "attempts": [a.__dict__ for a in p.attempts]}
        if p.error is not None:
            (bad if isinstance(p.exc, SchemaError) else failed).append(f"{sol.name}: {p.error}")
            rows.append({"solution": sol.name, "out": str(run_dir), "harness_failure": p.error, "trust": trust, **where})
            continue
        rows.append({**_many_row(sol, trust, run_dir, p.result, p.attempts[-1].seconds), **where})
        if not as_json:
            print_report(p.result, run_dir)
    gpus = _gpus_used(placed, pool)
    _write_summary(out, definition.name, rows, gpus=gpus, wall_s=round(wall, 3))
    if as_json:
        click.echo(json.dumps({"definition": definition.name, "runs": rows, "gpus": gpus, "wall_s": round(wall, 3)}, indent=2))
    else:
        for r in rows:
            what = (f"harness failure: {r['harness_failure']}" if "harness_failure" in r else
                    f"could not run here: {r['unavailable']}" if r["unavailable"] else f"{r['passed']}/{r['workloads']} passed")
            click.echo(f"{r['solution']:<32} GPU {r['gpu'] if r['gpu'] is not None else '-'}  {what}  -> {r['out']}")
        click.echo(f"{len(rows)} solutions on {len(pool.gpus)} GPUs in {wall:.1f} s", err=True)
    if bad:
        _bad_input("; ".join(bad))
    if failed:  # a sandbox that cannot be had, a lost GPU: the harness's failure, not the solutions'
        click.echo("error: " + "; ".join(failed), err=True)
        sys.exit(EXIT_HARNESS)
    ran = [r for r in rows if not r["unavailable"]]
    sys.exit(EXIT_OK if ran and all(r["all_passed"] for r in ran) else EXIT_UNAVAILABLE if not ran else EXIT_FAILED)


def evaluate_many(definition, solutions: list, workloads: list, cfg, pool, *, definition_path=None, run_dir, echo=None) -> list:
    """``kbot eval-many --gpus``: each solution (with its trust level) evaluated as ``kbot eval`` would,
    into ``run_dir(i, solution)``, one per GPU at a time over ``pool``; ``Placed.result`` is its report.
    A run folder of a GPU lost under it is renamed ``<folder>.lost-gpu<index>`` (kept, never read as a
    result) before the solution is measured again on another GPU."""
    from dataclasses import replace

    from .gpu_pool import GPU
    from .runner import evaluate

    def run(job: tuple, gpu: GPU):
        i, sol, trust = job
        return evaluate(definition, sol, workloads, Path(run_dir(i, sol)), replace(cfg, gpu=gpu), definition_path=definition_path, trust=trust)

    def lost(job: tuple, gpu: GPU, result) -> None:
        d = Path(run_dir(job[0], job[1]))
        if d.exists():
            n = 1
            while (aside := d.with_name(f"{d.name}.lost-gpu{gpu.index}" + (f"-{n}" if n > 1 else ""))).exists():
                n += 1
            d.rename(aside)

    def progress(kind: str, p) -> None:
        if echo is None:
            return
        name = p.job[1].name
        if kind == "start":
            echo(f"{name}: on GPU {p.attempts[-1].gpu}")
        elif kind == "lost":
            echo(f"{name}: GPU {p.attempts[-1].gpu} was lost under it ({p.attempts[-1].lost}); its result is discarded")
        elif kind == "done" and p.error is None:
            echo(f"{name}: done on GPU {p.gpu.index if p.gpu else '?'} in {p.attempts[-1].seconds:.1f} s")

    return pool.map([(i, sol, trust) for i, (sol, trust) in enumerate(solutions)], run, lost=lost, progress=progress)


def _gpus_used(placed, pool) -> list[dict]:
    """Per GPU of the pool: which it is, the ceilings its reports used, the solutions it measured, and
    why it was lost (if it was)."""
    out = []
    for g in pool.gpus:
        reports = [p.result for p in placed if p.gpu is not None and p.gpu.index == g.index and p.result is not None]
        ceilings = next((r.config.get("ceilings") for r in reports if isinstance(r.config.get("ceilings"), dict)), None)
        out.append({**g.record(), "solutions": [r.solution for r in reports], "ceilings": ceilings,
                    **({"lost": pool.lost[g.index]} if g.index in pool.lost else {})})
    return out


def _write_summary(out: Path, definition: str, rows: list[dict], **extra) -> None:
    from . import runfolder

    runfolder.write_text(runfolder.prepare(out), "summary.json", json.dumps({"definition": definition, "runs": rows, **extra}, indent=2))


def _safe_name(name: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:60] or "solution"


def _fold_profile(report, out: Path, definition, solution, workloads, *, gpu: bool, budget_s: float | None) -> None:
    try:
        from .cli_profile import profile_report
    except ImportError as e:
        click.echo(f"warning: profiling unavailable ({e})", err=True)
        return
    from . import runfolder

    profile_report(report, out, definition, solution, workloads, profile=gpu, budget_s=budget_s)
    runfolder.write_text(out, "report.json", report.to_json())


def _run_with_progress(fn, total: int, quiet: bool):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if quiet or not console.is_terminal:

        def plain(kind, r):
            if kind == "result" and not quiet:
                console.print(f"  {r.uuid[:8]} {r.status.value}", highlight=False)

        return fn(plain)
    with Progress(
        TextColumn("[bold]evaluating"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("building", total=total)

        def update(kind, r):
            if kind == "build":
                bar.update(task, description="built")
            elif kind == "result":
                bar.update(task, advance=1, description=f"{r.uuid[:8]} {r.status.value}")

        return fn(update)


# ------------------------------------------------------------------------------------ definitions


@cli.group("definitions")
def definitions_group() -> None:
    """List, show and validate definitions (ours in definitions/, or any JSON file)."""


@definitions_group.command("list")
@click.option("--json", "as_json", is_flag=True)
def definitions_list(as_json):
    """The repository's definitions and kbot's own, with their workload counts (a name in both: the repository's)."""
    from .paths import definition_dir, definition_names, shipped
    from .schema import load_definition, load_workloads

    rows = []
    ours = shipped().resolve()
    for name in definition_names():
        p = definition_dir(name) / "definition.json"
        d = load_definition(p)
        wp = p.parent / "workloads.jsonl"
        rows.append({"name": d.name, "op_type": d.op_type, "workloads": len(load_workloads(wp, d)) if wp.exists() else 0,
                     "from": "kbot" if ours in p.resolve().parents else "repository", "path": _shown(p)})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console

    from .report_table import print_rows

    # the path is in --json; "from" says whether the repository or kbot ships the definition
    print_rows(Console(), ["name", "op_type", "workloads", "from"],
               [[r["name"], r["op_type"], str(r["workloads"]), r["from"]] for r in rows], right=["workloads"])


def _shown(p: Path) -> str:
    """A path for a table: relative to the working directory when it is below it."""
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


@definitions_group.command("show")
@click.argument("definition")
@DATASET_OPT
def definitions_show(definition, dataset_arg):
    """Print one definition (a name of ours or of the dataset, or a path) as JSON; stderr says which
    file it is and which workloads go with it."""
    from .dataset import dataset_root, resolve

    try:
        r = resolve(definition, dataset=dataset_root(dataset_arg), require_workloads=False)
    except SchemaError as e:
        _bad_input(str(e))
    click.echo(r.describe(), err=True)
    click.echo(r.definition.to_json(indent=2))


@definitions_group.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per file: path, ok, definition name, workloads, error.")
def definitions_validate(paths, as_json):
    """Validate definition JSON files (or folders of them) and their workloads; exit 2 if any is bad."""
    from .schema import load_definition, load_workloads

    files = []
    for p in map(Path, paths):
        files += sorted(p.rglob("*.json")) if p.is_dir() else [p]
    rows = []
    for f in files:
        try:
            d = load_definition(f)
            wp = f.parent / "workloads.jsonl"
            n = len(load_workloads(wp, d)) if f.name == "definition.json" and wp.exists() else 0
            rows.append({"path": str(f), "ok": True, "name": d.name, "workloads": n, "error": None})
            if not as_json:
                click.echo(f"ok   {f}  ({d.name}{f', {n} workloads' if n else ''})")
        except SchemaError as e:
            rows.append({"path": str(f), "ok": False, "name": None, "workloads": 0, "error": str(e)})
            if not as_json:
                click.echo(f"FAIL {e}", err=True)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    sys.exit(EXIT_BAD_INPUT if any(not r["ok"] for r in rows) else EXIT_OK)


# ------------------------------------------------------------------------------------ baselines


@cli.group("baselines")
def baselines_group() -> None:
    """Declared baselines: trusted-author solutions around a pinned library, beside a definition
    (definitions/<def>/baselines/<name>/). Evaluate one with `kbot eval baseline:NAME -d DEF`; measure
    them beside a candidate with `kbot eval SOLUTION -d DEF --baselines all`."""


@baselines_group.command("list")
@click.argument("definition")
@DATASET_OPT
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--json", "as_json", is_flag=True)
def baselines_list(definition, dataset_arg, device, as_json):
    """The declared baselines of DEFINITION, their pinned libraries, and whether they can run here."""
    from .baselines import BaselineError, declared, unavailable_reason
    from .dataset import dataset_root, resolve

    try:
        name = resolve(definition, dataset=dataset_root(dataset_arg), require_workloads=False).definition.name
        found = declared(name)
    except (SchemaError, BaselineError) as e:
        _bad_input(str(e))
    dev = _device(device)
    def here(b) -> str:
        why = unavailable_reason(b.solution, dev)
        if why:
            return why
        sm = any(t.lower().startswith("sm_") for t in b.solution.spec.target_hardware)
        return "can run here" + (" if the GPU's compute capability fits (checked when it runs)" if sm else "")

    rows = [{"name": b.name, "solution": b.solution.name, "dependencies": b.dependencies,
             "target_hardware": list(b.solution.spec.target_hardware), "here": here(b)} for b in found]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo(f"{name} declares no baselines (definitions/{name}/baselines/)")
        return
    from rich.console import Console
    from rich.markup import escape

    from .report_table import print_rows

    print_rows(Console(), ["baseline", "pinned libraries", "target hardware", "here"],
               [[escape(r["name"]), escape(", ".join(r["dependencies"]) or "-"), escape(", ".join(r["target_hardware"])), escape(r["here"])]
                for r in rows])


@baselines_group.command("pack")
@click.argument("definition")
def baselines_pack(definition):
    """Refresh each declared baseline's solution.json from the source files beside it."""
    from .baselines import FOLDER, BaselineError, pack
    from .paths import definition_dir

    home = definition_dir(definition)
    folders = sorted(p.parent for p in (home / FOLDER).glob("*/solution.json")) if home is not None else []
    if not folders:
        from .dataset import did_you_mean
        from .paths import definition_names

        known = [n for n in definition_names() if (definition_dir(n) / FOLDER).is_dir()]
        _bad_input(f"no baselines declared under definitions/{definition}/{FOLDER}/{did_you_mean(definition, known)}")
    for f in folders:
        try:
            sol = pack(f, definition)
        except (SchemaError, BaselineError) as e:
            _bad_input(str(e))
        click.echo(f"packed {_shown(f)} ({sol.name}, {len(sol.sources)} sources)")


# ------------------------------------------------------------------------------------ export


@cli.command("export")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--to", "dest", required=True, type=click.Path(file_okay=False), help="TraceSet folder to write (definitions/, solutions/, traces/).")
@click.option("--definition", "-d", "definition_arg", help="Definition (name or path) when it is not one of ours.")
def export_cmd(run_dirs, dest, definition_arg):
    """Export run folders as a FlashInfer-Bench TraceSet that the official tool loads: definitions,
    solutions, workloads and traces. Exporting again (the same runs or more) gives the same set: files
    are merged and deduplicated, never appended to."""
    from .export import export_runs

    try:
        res = export_runs([Path(r) for r in run_dirs], Path(dest), definition_arg)
    except SchemaError as e:
        _bad_input(str(e))
    click.echo(f"exported {res.traces} traces ({res.workloads} workloads in the set) to {dest}")
    for note in res.notes:
        click.echo(f"note: {note}")
    if res.kbot_dropped_by_loader:
        click.echo(f"note: {res.kbot_dropped_by_loader} traces have a status the official model gives no correctness record "
                   "(RUNTIME_ERROR, TIMEOUT, ...): their kbot fields are in evaluation.kbot, which the official loader drops")
    if res.generated_inputs:
        click.echo(f"note: {res.generated_inputs} workload inputs come from kbot generators and are written as \"random\" "
                   "(the official workload has no field for a generator; each trace's kbot record names it)")


COMMANDS_GROUP = "kbot.commands"  # entry points: register(cli) functions of other packages (the bot's)


def _register_plugins() -> None:
    """Commands that live with their subsystems register themselves here: the harness's own profiling
    commands, then every ``register(cli)`` in the ``kbot.commands`` entry-point group (the bot declares
    its commands there, in pyproject.toml), so the harness never imports the bot."""
    from importlib.metadata import entry_points

    from . import cli_profile

    cli_profile.register(cli)
    found = list(entry_points(group=COMMANDS_GROUP)) or _checkout_entry_points()
    for ep in sorted(found, key=lambda e: e.name):
        try:
            ep.load()(cli)
        except ImportError as e:  # a plugin whose dependencies are not installed on this machine
            click.echo(f"warning: the {ep.name} commands are unavailable: {e}", err=True)


def _checkout_entry_points() -> list:
    """The ``kbot.commands`` table of the checkout's own pyproject.toml, for a source checkout whose
    metadata names no plugins: on a machine where it was never installed (``PYTHONPATH=. python -m harness.cli``, as on
    the GPU runners) the installed metadata has no entry points, and the bot's commands would vanish."""
    from importlib.metadata import EntryPoint

    from .paths import source_checkout

    root = source_checkout()
    if root is None or not (root / "pyproject.toml").is_file():
        return []
    import tomllib

    try:
        table = tomllib.loads((root / "pyproject.toml").read_text())["project"]["entry-points"][COMMANDS_GROUP]
    except (KeyError, tomllib.TOMLDecodeError, OSError):
        return []
    return [EntryPoint(name=name, value=value, group=COMMANDS_GROUP) for name, value in table.items()]


def main() -> None:
    try:
        _register_plugins()
    except ImportError as e:
        click.echo(f"warning: some commands are unavailable: {e}", err=True)
    try:
        cli(standalone_mode=True)
    except SchemaError as e:
        _bad_input(str(e))
    except Exception as e:  # noqa: BLE001 — any command's unexpected failure: one line and exit 3, not a raw traceback
        harness_failure(e)


if __name__ == "__main__":
    main()
