"""Per-kernel GPU time of a contest seed's variants (and of the champion on main) on the definition's own
workloads: where a call's time goes, kernel by kernel.

The sweeps (dsa_dev.py, gdn_dev.py, moe_dev.py) give a call's GPU time per variant; this splits it by
kernel: the GPU time (CUPTI, through torch.profiler; scripts/gpu/devtime.py) of each kernel per call,
``--calls`` calls after 5 warm-ups; host gaps between kernels are not in these figures. Inputs are the
harness's own for the workload (seed 0); each variant's output is first checked against the reference
with the definition's tolerances, and a wrong variant is reported, not profiled.

    usage (repo root, on the device): source scripts/gpu/setup_device.sh
        python3 scripts/gpu/seed_kernels.py attention --workload 0 --workload 9 --champion
        python3 scripts/gpu/seed_kernels.py indexer --variant default= --variant 'res={"RESIDENT_FROM_ROWS": 64}'
        python3 scripts/gpu/seed_kernels.py moe --workload 3 --variant 'route16={"ROUTE_BT": 16}' --json $OUT/moe_kernels.json

DEFINITION is a definition name or one of the short names below; ``--workload`` takes an index into the
workload file or a uuid prefix (default: every workload). Exit 0 when every variant ran right, 1 when
one was wrong or failed, 2 on bad arguments. ``--device cpu`` runs the same path under Triton's
interpreter (a plumbing check: no CUDA kernels to time there).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import NoReturn

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]

SHORT = {
    "indexer": "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64",
    "attention": "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64",
    "gdn_prefill": "gdn_prefill_qk4_v8_d128_k_last",
    "gdn_decode": "gdn_decode_qk4_v8_d128_k_last",
    "moe": "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048",
}


def fail(message: str) -> NoReturn:
    """Bad arguments: the message on stderr, exit code 2."""
    print(f"seed_kernels.py: {message}", file=sys.stderr)
    raise SystemExit(2)


def solutions(definition: str, variants: dict[str, dict], champion: bool) -> dict:
    """The seed with each variant's tunables (the offline agent's rewriting: unknown names and values are
    refused), and the champion on main when asked."""
    from bot.agents.providers.offline import load_seeds
    from bot.agents.tunables import TunableError, apply
    from bot.promotion.champion import champion_solution_file
    from harness.schema import load_solution

    seeds = load_seeds(definition)
    if len(seeds) != 1:
        fail(f"{definition} has {len(seeds)} seed files; this tool takes one")
    out = {}
    for name, tunables in variants.items():
        try:
            out[name] = apply(seeds[0], tunables, name=f"{seeds[0].name}_{name}") if tunables else seeds[0]
        except TunableError as e:
            fail(f"variant {name}: {e}")
    if champion:
        path = champion_solution_file(REPO, definition)
        if path is None:
            fail(f"no champion on main for {definition}")
        out["champion"] = load_solution(path)
    return out


def pick_workloads(workloads: list, selectors: list[str]) -> list:
    """Workloads by index or uuid prefix, in the order asked (all of them when none is)."""
    if not selectors:
        return workloads
    out = []
    for s in selectors:
        if s.isdigit():
            if int(s) >= len(workloads):
                fail(f"workload index {s} out of range (0..{len(workloads) - 1})")
            out.append(workloads[int(s)])
            continue
        hits = [w for w in workloads if w.uuid.startswith(s)]
        if len(hits) != 1:
            fail(f"workload {s!r} matches {len(hits)} uuids (give an index or a longer prefix)")
        out.append(hits[0])
    return out


def parse_variants(specs: list[str]) -> dict[str, dict]:
    out = {}
    for v in specs:
        name, sep, js = v.partition("=")
        if not sep or not name:
            fail(f"--variant wants NAME=JSON (empty JSON: the seed's defaults), got {v!r}")
        try:
            tunables = json.loads(js) if js else {}
        except json.JSONDecodeError as e:
            fail(f"--variant {name}: not JSON: {e}")
        if not isinstance(tunables, dict):
            fail(f"--variant {name}: want a JSON object of tunables")
        out[name] = tunables
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("definition", help=f"a definition name or one of {', '.join(SHORT)}")
    ap.add_argument("--workload", action="append", default=[], metavar="INDEX|UUID", help="which workloads (default: all)")
    ap.add_argument("--workloads-file", default="workloads.jsonl", help="file under definitions/<definition>/")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=JSON",
                    help="a seed variant's tunables as JSON (empty: the seed's defaults); default: the seed's defaults")
    ap.add_argument("--champion", action="store_true", help="the champion on main too")
    ap.add_argument("--calls", type=int, default=20, help="profiled calls per variant and workload")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    a = ap.parse_args(argv)
    if a.calls < 1:
        ap.error("--calls must be at least 1")
    if a.device == "cpu":  # before Triton is imported: the interpreter is chosen when kernels are decorated
        os.environ["TRITON_INTERPRET"] = "1"
    import torch
    from devtime import kernel_table
    from dsa_dev import load_module

    import harness.operators  # noqa: F401  (registers the operators' input generators and comparators)
    from harness import interpreter_fixes
    from harness.compare import compare, normalize_outputs
    from harness.defconfig import load_config
    from harness.inputs import allocate_outputs, make_inputs
    from harness.schema import load_definition, load_workloads
    from harness.trusted_fn import load_trusted_fn

    name = SHORT.get(a.definition, a.definition)
    ddir = REPO / "definitions" / name
    if not (ddir / "definition.json").is_file():
        ap.error(f"no definition {a.definition!r} (short names: {', '.join(SHORT)})")
    if a.device == "cuda" and not torch.cuda.is_available():
        print("seed_kernels.py: no CUDA device (use --device cpu for the plumbing check)", file=sys.stderr)
        return 2
    if a.device == "cpu":
        interpreter_fixes.apply()  # the interpreter's bf16 and rounding fixes, as kbot eval --device cpu
    defn = load_definition(ddir / "definition.json")
    cfg = load_config(name, ddir / "definition.json")
    wpath = ddir / a.workloads_file
    if not wpath.is_file():
        ap.error(f"no workload file {wpath}")
    workloads = pick_workloads(load_workloads(wpath, defn), a.workload)
    sols = solutions(name, parse_variants(a.variant) or {"default": {}}, a.champion)
    ref = load_trusted_fn(cfg.reference_fn, cfg.root)
    mods = {n: load_module(s.source("main.py"), f"kernels_{n}") for n, s in sols.items()}
    label = torch.cuda.get_device_name() if a.device == "cuda" else "cpu (Triton interpreter)"
    print(f"# {name} on {label}; self CUDA time per call, {a.calls} calls after 5 warm-ups")
    rows, rc = [], 0
    for w in workloads:
        axes = defn.resolve_axes(w.axes)
        x = make_inputs(defn, w, seed=0, device=a.device, config=cfg)
        expected = normalize_outputs(ref(**x), defn)
        print(f"\n## {w.uuid[:8]} {json.dumps(w.axes)}")
        for n, m in mods.items():
            dest = allocate_outputs(defn, axes, a.device)
            try:
                m.run(**x, **dest)
                r = compare(dict(dest), expected, definition=defn, axes=axes, config=cfg, inputs=x)
            except Exception as e:  # noqa: BLE001 — a variant that fails is reported, the others go on
                rows.append({"workload": w.uuid, "variant": n, "ok": False, "message": f"{type(e).__name__}: {e}"[:300]})
                print(f"== {n}: FAILED {type(e).__name__}: {str(e)[:200]}")
                rc = 1
                continue
            if not r.ok:
                rows.append({"workload": w.uuid, "variant": n, "ok": False, "message": r.message[:300]})
                print(f"== {n}: WRONG {r.message[:200]}")
                rc = 1
                continue
            ks = kernel_table(lambda m=m, dest=dest, x=x: m.run(**x, **dest), a.calls, warmup=5) if a.device == "cuda" else []
            rows.append({"workload": w.uuid, "variant": n, "ok": True,
                         "kernels": [{"kernel": k, "us": round(us, 2), "launches": c} for k, us, c in ks]})
            print(f"== {n}" + (f": {sum(us for _, us, _ in ks):.1f} us in {sum(c for *_, c in ks):g} launches" if ks else ": right"))
            for k, us, c in ks:
                print(f"  {k[:48]:48s} {us:8.1f} us x{c:g}")
        del x, expected
    if a.json:
        Path(a.json).write_text(json.dumps({"definition": name, "device": label, "calls": a.calls, "rows": rows}, indent=1))
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
