"""On the device, outside the sandbox: build the FlashInfer kernels our baselines use, check each baseline
once against the reference, and install what was built as FlashInfer's own ahead-of-time modules.

FlashInfer compiles a kernel module the first time a call needs it (nvcc + ninja, minutes). The harness
runs baselines in a sandboxed worker whose home and caches are a fresh scratch folder, so each worker
would compile again, inside the timed process's set-up. This script calls every declared baseline that
depends on ``flashinfer`` once, on the smallest of its definition's workloads, so the modules get built
here; then copies each built ``<name>.so`` to ``<flashinfer>/data/aot/<name>/<name>.so``, the path
FlashInfer loads before it considers building (flashinfer/jit/env.py ``get_aot_artifacts``). The
sandboxed worker reads that folder (it is on ``sys.path``) and builds nothing.

    usage (repo root, on the device, after scripts/gpu/flashinfer_device.sh):
        python3 scripts/gpu/flashinfer_warm.py [--definition NAME ...] [--prebuild [MODULE ...]] [--json OUT.json]

Exit 0 when every baseline it ran agreed with the reference on its workload, 1 otherwise (a baseline
pinned to another FlashInfer version or GPU is listed as COULD_NOT_RUN with the harness's reason and
skipped); each line says how long its first call (the build) took and the baseline's verdict.
"""

from __future__ import annotations

import argparse
import importlib.util
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


def load_run(baseline):
    """The baseline's entry point, imported from its (trusted, repository) folder."""
    file, _, fn = baseline.solution.spec.entry_point.partition("::")
    path = baseline.folder / file
    spec = importlib.util.spec_from_file_location(f"kbot_baseline_{baseline.name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, fn)


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


def prebuild(names: list[str]) -> dict[str, str]:
    """Compile the named modules side by side (each is one ninja build; nvcc runs in subprocesses, so
    threads overlap them): {name: "built in N s" or the error}."""
    from concurrent.futures import ThreadPoolExecutor

    specs = prebuild_specs()

    def one(name: str) -> str:
        t0 = time.monotonic()
        try:
            specs[name]().build()
            return f"built in {time.monotonic() - t0:.0f} s"
        except Exception as e:  # noqa: BLE001 — reported; the baseline's own first call then says more
            return f"failed after {time.monotonic() - t0:.0f} s: {type(e).__name__}: {str(e)[-400:]}"

    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        return dict(zip(names, pool.map(one, names)))


def install_aot() -> list[str]:
    """Copy every module FlashInfer built into its AOT folder; the module names."""
    from flashinfer.jit import env as fi_env

    names = []
    for so in sorted(Path(fi_env.FLASHINFER_JIT_DIR).glob("*/*.so")):
        name = so.parent.name
        if so.name != f"{name}.so":
            continue
        dest = Path(fi_env.FLASHINFER_AOT_DIR) / name / so.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(so, dest)
        names.append(name)
    return names


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
    names = list(prebuild_specs()) if args.prebuild is None else args.prebuild
    for name, said in prebuild(names).items() if names else ():
        print(f"prebuild {name}: {said}", flush=True)
    for name in args.definition or list(CONTEST_DEFINITIONS):
        folder = REPO / "definitions" / name
        for b in (x for x in declared(name) if uses_flashinfer(x)):
            row = {"definition": name, "baseline": b.name}
            major, minor = torch.cuda.get_device_capability()
            why = unavailable_reason(b.solution, "cuda", f"{major}.{minor}")
            if why is not None:  # another version pinned, or another GPU: said, not a failure
                row.update(status="COULD_NOT_RUN", message=why)
                rows.append(row)
                print(json.dumps(row), flush=True)
                continue
            try:
                defn = load_definition(folder / "definition.json")
                cfg = load_config(name, folder / "definition.json")
                w = smallest(load_workloads(folder / "workloads.jsonl"), defn)
                row["workload"] = w.uuid
                x = make_inputs(defn, w, seed=0, device="cuda", config=cfg)
                expected = normalize_outputs(load_trusted_fn(cfg.reference_fn, cfg.root)(**x), defn)
                run = load_run(b)
                t0 = time.monotonic()
                got = run(**x)  # the first call builds the modules
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
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "traceback"}), flush=True)
    try:
        built = install_aot()
    except Exception as e:  # noqa: BLE001
        built = []
        print(f"could not install the built modules: {type(e).__name__}: {e}", flush=True)
        ok = False
    print(f"installed as FlashInfer AOT modules: {', '.join(built) or 'none'}", flush=True)
    if args.export and built:
        from flashinfer.jit import env as fi_env

        args.export.mkdir(parents=True, exist_ok=True)
        for name in built:
            shutil.copy2(Path(fi_env.FLASHINFER_AOT_DIR) / name / f"{name}.so", args.export / f"{name}.so")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "aot_modules": built}, indent=1))
    return 0 if ok and any(r["status"] != "COULD_NOT_RUN" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
