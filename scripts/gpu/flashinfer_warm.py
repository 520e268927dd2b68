"""On the device, outside the sandbox: build the FlashInfer kernels our baselines use, check each baseline
once against the reference, and install what was built as FlashInfer's own ahead-of-time modules.

FlashInfer compiles a kernel module the first time a call needs it (nvcc + ninja, minutes). The harness
runs baselines in a sandboxed worker whose home and caches are a fresh scratch folder, so each worker
would compile again, inside the timed process's set-up. This script compiles the modules our baselines
use (``prebuild_specs``) side by side and, the moment each one's build is done, copies that module's
library (only the one FlashInfer's JIT wrote for that spec, nothing else found in its cache) to
``<flashinfer>/data/aot/<name>/<name>.so``, the path FlashInfer loads before it considers building
(flashinfer/jit/env.py ``get_aot_artifacts``), and to ``--export`` (to bring back into ``.fi/aot/``); then
calls every declared baseline that depends on flashinfer-python once, on the smallest of its definition's
workloads, against the reference. The sandboxed worker reads the AOT folder (it is on ``sys.path``) and
builds nothing. Rows go to stdout and ``--json`` as they happen, so a call stopped at its time limit keeps
what finished.

Trusted code only: the baselines and the builds run here without the harness's sandbox, so run it from a
checkout you trust (the repository's declared baselines), never on a candidate's branch.

    usage (repo root, on the device, after scripts/gpu/flashinfer_device.sh):
        python3 scripts/gpu/flashinfer_warm.py [--definition NAME ...] [--prebuild [MODULE ...]] [--json OUT.json]
            [--export DIR]

Exit 0 when at least one baseline ran and every one that ran agreed with the reference on its workload,
1 otherwise (a baseline pinned to another FlashInfer version or GPU is listed as COULD_NOT_RUN with the
harness's reason and skipped; only such baselines is exit 1 too). Each baseline row gives its first call's
time (loading, or building what the prebuild did not) and its verdict.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from packaging.utils import canonicalize_name  # noqa: E402

import harness.operators  # noqa: E402,F401  (registers the contest generators and comparators)
from harness.baselines import declared, requirement, unavailable_reason  # noqa: E402
from harness.compare import compare, normalize_outputs  # noqa: E402
from harness.defconfig import load_config  # noqa: E402
from harness.inputs import make_inputs  # noqa: E402
from harness.operators import CONTEST_DEFINITIONS  # noqa: E402
from harness.schema import load_definition, load_workloads  # noqa: E402
from harness.trusted_fn import load_trusted_fn  # noqa: E402


def uses_flashinfer(baseline) -> bool:
    """Whether the baseline declares the flashinfer-python distribution (any version)."""
    return any(canonicalize_name(requirement(d).name) == "flashinfer-python" for d in baseline.dependencies)


def smallest(workloads: list, defn) -> object:
    """The workload with the fewest input elements (its shapes by the definition's axes)."""
    def size(w) -> int:
        axes = defn.resolve_axes(w.axes)
        total = 0
        for spec in defn.inputs.values():
            n = 1
            for d in defn.shape_of(spec, axes) or ():
                n *= d
            total += n
        return total
    return min(workloads, key=size)


def prebuild_specs() -> dict:
    """The JIT modules our FlashInfer baselines load, as FlashInfer names them (flashinfer/jit/topk.py,
    flashinfer/jit/attention/modules.py; the MLA one as flashinfer/mla/_batch_mla/_backends/_fa_common.py
    asks for it: FA3, bf16 query/KV/output, int32 indices, 512 + 64 head dims, no profiler)."""
    from flashinfer.jit.attention.modules import gen_batch_mla_module
    from flashinfer.jit.topk import gen_topk_module

    bf16 = torch.bfloat16
    return {
        "topk": gen_topk_module,
        "batch_mla_sm90": lambda: gen_batch_mla_module("fa3", bf16, bf16, bf16, torch.int32, 512, 64, False),
    }


def install(name: str, export: Path | None) -> str:
    """Copy one named module's build (the library FlashInfer's JIT wrote for that spec, nothing else found in
    its cache) into the package's AOT folder, and into ``export`` when given; where it was put."""
    from flashinfer.jit import env as fi_env

    spec = prebuild_specs()[name]()
    built = Path(spec.jit_library_path)
    if not built.is_file():
        raise FileNotFoundError(f"{built} (not built)")
    dest = Path(fi_env.FLASHINFER_AOT_DIR) / spec.name / built.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(built, dest)
    if export is not None:
        export.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, export / built.name)
    return str(dest)


def prebuild(names: list[str], export: Path | None, report) -> dict[str, str]:
    """Compile the named modules side by side (each is one ninja build; nvcc runs in subprocesses, so
    threads overlap them) and install each one as soon as its own build is done, so a slow module (or a
    call's time limit) does not cost the others: {name: what happened}."""
    from concurrent.futures import ThreadPoolExecutor

    specs = prebuild_specs()

    def one(name: str) -> str:
        t0 = time.monotonic()
        try:
            specs[name]().build()
            said = f"built in {time.monotonic() - t0:.0f} s, installed at {install(name, export)}"
        except Exception as e:  # noqa: BLE001 — reported; the baseline's own first call then says more
            said = f"failed after {time.monotonic() - t0:.0f} s: {type(e).__name__}: {str(e)[-400:]}"
        report({"prebuild": name, "result": said})
        return said

    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        return dict(zip(names, pool.map(one, names)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--definition", action="append", help="only these definitions (default: the contest ones)")
    ap.add_argument("--json", type=Path, help="write the rows here as well")
    ap.add_argument("--export", type=Path, metavar="DIR",
                    help="also copy each installed module to DIR/<name>.so (bring them back from the device into "
                         ".fi/aot/, and flashinfer_device.sh installs them on the next machine: no rebuild)")
    ap.add_argument("--prebuild", nargs="*", default=None, metavar="MODULE",
                    help="compile these modules first, side by side (default: all of topk, batch_mla_sm90; "
                         "give none to skip)")
    args = ap.parse_args(argv)
    rows, ok = [], True
    known = list(prebuild_specs())
    names = known if args.prebuild is None else args.prebuild
    unknown = sorted(set(names) - set(known))
    if unknown:
        ap.error(f"unknown module(s) {', '.join(unknown)} (known: {', '.join(known)})")

    def report(row: dict) -> None:
        """Print one row and rewrite --json with every row so far: a call stopped at its time limit keeps them."""
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "traceback"}), flush=True)
        if args.json:
            args.json.write_text(json.dumps({"rows": rows}, indent=1))

    if names:
        prebuild(names, args.export, report)
    for name in args.definition or list(CONTEST_DEFINITIONS):
        folder = REPO / "definitions" / name
        for b in (x for x in declared(name) if uses_flashinfer(x)):
            row = {"definition": name, "baseline": b.name}
            major, minor = torch.cuda.get_device_capability()
            why = unavailable_reason(b.solution, "cuda", f"{major}.{minor}")
            if why is not None:  # another version pinned, or another GPU: said, not a failure
                row.update(status="COULD_NOT_RUN", message=why)
                report(row)
                continue
            try:
                defn = load_definition(folder / "definition.json")
                cfg = load_config(name, folder / "definition.json")
                w = smallest(load_workloads(folder / "workloads.jsonl"), defn)
                row["workload"] = w.uuid
                x = make_inputs(defn, w, seed=0, device="cuda", config=cfg)
                expected = normalize_outputs(load_trusted_fn(cfg.reference_fn, cfg.root)(**x), defn)
                run = load_trusted_fn(b.solution.spec.entry_point, b.folder)  # the baseline's own folder
                t0 = time.monotonic()
                got = run(**x)  # builds what the prebuild did not (the module's build, then its loading)
                torch.cuda.synchronize()
                row["first_call_s"] = round(time.monotonic() - t0, 1)
                t0 = time.monotonic()
                got = run(**x)
                torch.cuda.synchronize()
                row["second_call_ms"] = round((time.monotonic() - t0) * 1e3, 3)
                verdict = compare(normalize_outputs(got, defn), expected, definition=defn,
                                  axes=defn.resolve_axes(w.axes), config=cfg, inputs=x)
                row["status"] = verdict.status.value
                row["message"] = (verdict.message or "")[:300]
                ok &= verdict.ok
            except Exception as e:  # noqa: BLE001 — each baseline's failure is reported and the rest go on
                row["status"] = "ERROR"
                row["message"] = f"{type(e).__name__}: {e}"[:600]
                row["traceback"] = traceback.format_exc()[-2000:]
                ok = False
            report(row)
    installed = {r["prebuild"] for r in rows if "prebuild" in r and "installed at" in r["result"]}
    for name in (n for n in known if n not in installed):  # built by a baseline's first call instead
        try:
            report({"install": name, "result": f"installed at {install(name, args.export)}"})
        except FileNotFoundError as e:
            report({"install": name, "result": f"not installed: {e}"})
    ran = [r for r in rows if "baseline" in r and r["status"] != "COULD_NOT_RUN"]
    return 0 if ok and ran else 1


if __name__ == "__main__":
    raise SystemExit(main())
