"""``kbot explain``, ``kbot profile`` and ``kbot ceilings``; registered into the main CLI by ``register``.

Also exports :func:`profile_report`, which ``kbot eval --profile`` calls to fold feedback into a report.
Exit codes follow harness/cli.py: 0 ok, 2 bad input, 3 the tool itself failed.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import click

from .dataset import click_option as dataset_click_option
from .profile.pipeline import profile_report  # noqa: F401  (re-exported for harness/cli.py)

EXIT_OK, EXIT_BAD_INPUT, EXIT_HARNESS = 0, 2, 3
PROFILE_SEED = 0  # the seed `kbot profile` builds a workload's inputs with (its roofline counts the same inputs)
DATASET_OPT = dataset_click_option()


def _fail(msg: str, code: int = EXIT_BAD_INPUT) -> None:
    click.echo(f"error: {msg}", err=True)
    sys.exit(code)


def _resolve(value: str, dataset_arg: str | None, workloads_path: str | None, *, require_workloads: bool = True,
             quiet: bool = False):
    """The definition and its workloads file (``harness.dataset.resolve``: kbot's, the dataset's, or a
    file's; said on stderr unless ``quiet``, when the JSON output carries it under ``inputs``), or exit 2."""
    from .dataset import dataset_root, resolve
    from .schema import SchemaError

    try:
        r = resolve(value, dataset=dataset_root(dataset_arg), workloads=workloads_path, require_workloads=require_workloads)
    except SchemaError as e:
        _fail(str(e))
        raise  # unreachable
    if not quiet:
        click.echo(f"using {r.describe()}", err=True)
    return r


def parse_axes(text: str) -> dict[str, int] | None:
    """``M=128,N=4096`` or a JSON object -> axes; None when ``text`` looks like a UUID instead."""
    t = text.strip()
    if t.startswith("{"):
        try:
            data = json.loads(t)
        except json.JSONDecodeError as e:
            raise ValueError(f"--workload: not valid JSON: {e.msg}") from None
        if not isinstance(data, dict) or not all(isinstance(v, int) for v in data.values()):
            raise ValueError("--workload JSON must map axis names to integers")
        return data
    if "=" in t:
        axes = {}
        for part in re.split(r"[,\s]+", t):
            if not part:
                continue
            k, sep, v = part.partition("=")
            if not sep or not k.isidentifier():
                raise ValueError(f"--workload: '{part}' is not NAME=INT")
            try:
                axes[k] = int(v)
            except ValueError:
                raise ValueError(f"--workload: '{part}': {v!r} is not an integer") from None
        return axes
    return None


def _resolve_workload(r, workload: str):
    from .schema import SchemaError, load_workloads

    definition = r.definition

    try:
        axes = parse_axes(workload)
    except ValueError as e:
        _fail(str(e))
    if axes is not None:
        try:
            return definition.resolve_axes(axes), None
        except SchemaError as e:
            _fail(str(e))
    wpath = r.workloads_path
    if wpath is None:
        _fail(f"workload {workload!r} looks like a UUID but {definition.name} has no workloads file here; pass --workloads or --dataset")
    try:
        ws = load_workloads(wpath, definition)
    except SchemaError as e:
        _fail(str(e))
    hits = [w for w in ws if w.uuid == workload] or [w for w in ws if w.uuid.startswith(workload)]
    if len(hits) != 1:
        _fail(f"{len(hits)} workloads in {wpath} match {workload!r}" + ("" if hits else f" (first: {[w.uuid for w in ws[:3]]})"))
    return definition.resolve_axes(hits[0].axes), hits[0]


def _ceilings(gpu: str | None, device: str | None):
    from .ceilings import ceilings_for, load_ceilings

    if gpu:
        c = load_ceilings(gpu)
        if c is None:
            _fail(f"no ceilings for GPU {gpu!r}: measure them there with `kbot ceilings --device cuda`")
        return c
    if device == "cpu":
        return ceilings_for("cpu")
    return load_ceilings("NVIDIA H200")


def _emit(outcome, title: str, as_json: bool, out: str | None, **extra: Any) -> None:
    data = outcome.to_json(**extra)
    if out:
        Path(out).write_text(json.dumps(data, indent=2, default=str) + "\n")
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
    else:
        click.echo(outcome.markdown(title=title))


@click.command("explain")
@click.option("--ncu-csv", "ncu_csv", type=click.Path(exists=True, dir_okay=False),
              help="Recorded `ncu --csv --page raw` output.")
@click.option("--definition", "-d", "definition_arg", required=True, help="Definition JSON (or the name of one of ours).")
@click.option("--workload", "-w", "workload", required=True,
              help="Workload UUID (or unique prefix), or axes as NAME=INT,... or a JSON object.")
@click.option("--workloads", "workloads_path", type=click.Path(dir_okay=False), help="Workloads JSONL for a UUID.")
@DATASET_OPT
@click.option("--kernel", help="Kernel to diagnose: exact name or regex (default: the longest non-library kernel).")
@click.option("--cubin", type=click.Path(exists=True, dir_okay=False), multiple=True,
              help="Cubin / shared object with the kernel's device code, for SASS facts (repeatable).")
@click.option("--solution", "solution_json", type=click.Path(exists=True, dir_okay=False),
              help="Also compile the solution's Triton kernels for sm_90 (no GPU needed; imports the solution).")
@click.option("--gpu", help="GPU whose ceilings to use (default: cached or documented NVIDIA H200).")
@click.option("--ceilings", "ceilings_json", type=click.Path(exists=True, dir_okay=False),
              help="Ceilings JSON to use (e.g. one recorded with a CSV: tests/fixtures/ncu/ceilings.json).")
@click.option("--measured-ms", type=float, help="Measured latency per call; default: the kernels' ncu durations.")
@click.option("--rules", "rules_dir", type=click.Path(file_okay=False, exists=True), help="Rules folder (default: skills/profiling/rules).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of Markdown.")
@click.option("--out", type=click.Path(dir_okay=False), help="Also write the JSON here.")
def explain_cmd(ncu_csv, definition_arg, workload, workloads_path, dataset_arg, kernel, cubin, solution_json, gpu, ceilings_json,
                measured_ms, rules_dir, as_json, out):
    """Run the rule engine on recorded evidence: an ncu CSV, cubins, a solution's Triton kernels.

    Works anywhere, no GPU needed. Without --ncu-csv only the roofline and the static evidence (SASS,
    Triton compile statistics) are judged, and the profiler rules are listed as not evaluated.
    """
    from .profile import Collected
    from .profile.ncu import ncu_evidence
    from .profile.pipeline import analyze
    from .profile.sass import sass_evidence

    if not (ncu_csv or cubin or solution_json):
        _fail("give at least one of --ncu-csv, --cubin, --solution")
    resolved = _resolve(definition_arg, dataset_arg, workloads_path, require_workloads=False, quiet=as_json)
    definition = resolved.definition
    axes, w = _resolve_workload(resolved, workload)
    if ceilings_json:
        from .ceilings import Ceilings

        try:
            ceilings = Ceilings.model_validate_json(Path(ceilings_json).read_text())
        except ValueError as e:
            _fail(f"{ceilings_json}: not a ceilings file: {e}")
    else:
        ceilings = _ceilings(gpu, None)
    collected: list = []
    if ncu_csv:
        ncu = ncu_evidence(Path(ncu_csv).read_text(errors="replace"), kernel)
        if not ncu.ok and not as_json:
            click.echo(f"warning: ncu evidence missing: {ncu.missing}", err=True)
    else:
        ncu = Collected.unavailable("ncu", "no --ncu-csv given")
    collected.append(ncu)
    target = ncu.evidence.get("kernel_name") if ncu.ok else kernel
    collected += [sass_evidence(c, target) for c in cubin]
    if solution_json:
        import tempfile

        from .profile.triton_module import run_isolated
        from .schema import SchemaError, load_solution

        try:
            sol = load_solution(solution_json)
        except SchemaError as e:
            _fail(str(e))
        with tempfile.TemporaryDirectory() as tmp:
            collected.append(run_isolated(sol, definition, Path(tmp)))
    try:
        outcome = analyze(definition, axes, collected, ceilings=ceilings, measured_ms=measured_ms,
                          kernel=target, rules_dir=rules_dir, absent=w.absent_inputs() if w is not None else frozenset())
    except ValueError as e:
        _fail(str(e))
    _emit(outcome, f"{definition.name} {axes if w is None else w.uuid}", as_json, out,
          definition=definition.name, axes=axes, ncu_csv=str(ncu_csv) if ncu_csv else None, inputs=resolved.provenance())


@click.command("profile")
@click.argument("solution_json", type=click.Path(exists=True, dir_okay=False))
@click.option("--definition", "-d", "definition_arg", required=True, help="Definition JSON (or the name of one of ours).")
@click.option("--workload", "workload_ids", multiple=True, help="Workload UUID or prefix (repeatable; default: the first).")
@click.option("--workloads", "workloads_path", type=click.Path(dir_okay=False), help="Workloads JSONL.")
@DATASET_OPT
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=".kbot/profile", show_default=True)
@click.option("--kernel-regex", help="Only profile kernels whose name matches (ncu --kernel-name regex:...).")
@click.option("--no-energy", is_flag=True, help="Skip the NVML energy run.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of Markdown.")
def profile_cmd(solution_json, definition_arg, workload_ids, workloads_path, dataset_arg, out_dir, kernel_regex, no_energy, as_json):
    """Profile a solution on this machine's GPU (ncu + SASS + NVML) and explain the result."""
    from .ceilings import ceilings_for
    from .profile.pipeline import analyze, profile_workload
    from .schema import SchemaError, load_solution, load_workloads
    from .timed_counts import input_counts_for

    resolved = _resolve(definition_arg, dataset_arg, workloads_path, quiet=as_json)
    definition, dpath, wpath = resolved.definition, resolved.path, resolved.workloads_path
    try:
        solution = load_solution(solution_json)
        workloads = load_workloads(wpath, definition)
    except SchemaError as e:
        _fail(str(e))
    chosen = [w for w in workloads if any(w.uuid.startswith(i) for i in workload_ids)] if workload_ids else workloads[:1]
    if not chosen:
        _fail(f"no workload in {wpath} matches {list(workload_ids)}")
    try:
        import torch

        ceilings = ceilings_for("cuda") if torch.cuda.is_available() else None
    except Exception as e:  # noqa: BLE001
        click.echo(f"warning: no ceilings: {e}", err=True)
        ceilings = None
    results = []
    for w in chosen:
        wdir = Path(out_dir) / definition.name / w.uuid
        collected, files = profile_workload(solution, definition, w, wdir, definition_path=dpath, seed=PROFILE_SEED,
                                            kernel_regex=kernel_regex, energy=not no_energy)
        try:  # a floor that depends on the inputs (MoE: the experts the routing touches) counts the profiled ones
            given = input_counts_for(definition, w, input_seed=PROFILE_SEED, definition_path=dpath)
        except Exception as e:  # noqa: BLE001
            click.echo(f"warning: the roofline uses the spec's lower bounds: the inputs could not be counted ({e})", err=True)
            given = None
        outcome = analyze(definition, definition.resolve_axes(w.axes), collected, ceilings=ceilings, absent=w.absent_inputs(),
                          given=given)
        outcome.files = files
        data = outcome.to_json(definition=definition.name, workload=w.uuid, inputs=resolved.provenance())
        (wdir / "feedback.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
        md = outcome.markdown(title=f"{solution.name} on {definition.name} / {w.uuid}")
        (wdir / "feedback.md").write_text(md)
        results.append(data)
        if not as_json:
            click.echo(md)
    if as_json:
        click.echo(json.dumps(results if len(results) > 1 else results[0], indent=2, default=str))


@click.command("ceilings")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the ceilings JSON.")
@click.option("--force", is_flag=True, help="Measure again even if a cached measurement exists.")
@click.option("--quick", is_flag=True, help="Smaller sizes (a smoke test; do not cache these numbers).")
def ceilings_cmd(device, as_json, force, quick):
    """Measure (or show the cached) copy bandwidth and matmul peaks of this machine."""
    from .ceilings import cache_dir, ceilings_for, describe, dumps, measure_ceilings, save_ceilings

    try:
        if device == "cuda":
            import torch

            if not torch.cuda.is_available():
                _fail("no CUDA device visible; use --device cpu here, or run this on a GPU runner")
        if force or quick:
            c = measure_ceilings(device, quick=quick)
            if not quick:
                path = save_ceilings(c)
                click.echo(f"saved {path}", err=True)
        else:
            c = ceilings_for(device, measure_if_missing=True)
    except RuntimeError as e:
        _fail(str(e), EXIT_HARNESS)
    if as_json:
        click.echo(dumps(c))
    else:
        click.echo(describe(c))
        click.echo(f"\n(cache: {cache_dir()})")


def register(cli: click.Group) -> None:
    """Add ``explain``, ``profile`` and ``ceilings`` to the kbot CLI."""
    for cmd in (explain_cmd, profile_cmd, ceilings_cmd):
        if cmd.name not in cli.commands:
            cli.add_command(cmd)


@click.group()
def _standalone() -> None:
    """kbot profiling commands (standalone entry: python -m harness.cli_profile)."""


register(_standalone)

if __name__ == "__main__":
    _standalone()
