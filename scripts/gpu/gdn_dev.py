"""Kernel development sweep for the Gated DeltaNet seeds on a GPU (not the judged path: that is
`kbot optimize` / `kbot eval`). For every workload of each definition: inputs from the harness's own
generators, the reference once, then every variant of the seed (tunable settings) and fla's kernels
(when `fla` imports): correctness against the reference with the definition's tolerance, GPU kernel time
from the torch profiler (CUPTI, sum of all kernels of one call) and event time per call (do_bench,
L2 flushed). Prints one compact table per definition; writes everything to $OUT/gdn_dev.json.

    source scripts/gpu/setup_device.sh; python3 scripts/gpu/gdn_dev.py [--only decode|prefill] [--quick] [--with-tunable NAME] [--budget-s S]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

sys.path.insert(0, str(Path(__file__).resolve().parent))
from devtime import kernel_time_us  # noqa: E402

from bot.agents.providers.offline import load_seeds  # noqa: E402
from bot.agents.tunables import apply  # noqa: E402
from bot.promotion.champion import champion_solution_file  # noqa: E402
from harness.compare import compare  # noqa: E402
from harness.defconfig import load_config  # noqa: E402
from harness.inputs import allocate_outputs, make_inputs  # noqa: E402
from harness.schema import load_definition, load_workloads  # noqa: E402

BW = 4.25e12  # measured copy bandwidth on the H200 (docs/measurements.md), bytes read + written

DECODE = "gdn_decode_qk4_v8_d128_k_last"
PREFILL = "gdn_prefill_qk4_v8_d128_k_last"
VARIANTS = {
    DECODE: [
        {},
        {"SMALL_BV": 4}, {"SMALL_BV": 16}, {"SMALL_WARPS": 1}, {"SMALL_WARPS": 4},
        {"LARGE_BV": 8}, {"LARGE_BV": 32}, {"LARGE_BV": 32, "LARGE_WARPS": 8}, {"LARGE_WARPS": 2},
        {"LARGE_BV": 64, "LARGE_WARPS": 8},
    ],
    PREFILL: [
        {},
        {"LONG_PREP_WARPS": 8}, {"LONG_OUT_WARPS": 8}, {"PREP_WARPS": 8}, {"LONG_FROM": 1024}, {"LONG_FROM": 512},
        {"STATE_WARPS": 8}, {"STATE_STAGES": 3}, {"FEW_SEQS_BV": 32}, {"OUT_BV": 32},
        {"OUT_BV": 128, "OUT_WARPS": 8},
        # per-chunk transitions (P = KD^T W, B = KD^T U) for long sequences: one product per state step
        # (TRANS_VN False, the output pass forming Vn, and TRANS_WARPS 4 were timed in recording 36 of 2026-12-06)
        {"TRANSITION_FROM": 2048}, {"TRANSITION_FROM": 2048, "FEW_SEQS_BV": 32}, {"TRANSITION_FROM": 2048, "TRANS_IN_PREP": True},
        {"TRANSITION_FROM": 2048, "TRANS_IN_PREP": True, "LONG_PREP_WARPS": 8},
        {"TRANSITION_FROM": 1024, "TRANS_IN_PREP": True},  # the skewed 8 x 8192 batch: its long sequence in 64-token chunks
        # one long sequence: the chain over chunks as a two-level scan (64 steps -> 24 at 1 x 8192 with groups of 8)
        {"TRANSITION_FROM": 2048, "SCAN_GROUP": 8}, {"TRANSITION_FROM": 2048, "TRANS_IN_PREP": True, "SCAN_GROUP": 8},
        {"TRANSITION_FROM": 2048, "TRANS_IN_PREP": True, "SCAN_GROUP": 4},
        # the recurrent path (1 x 16 and 64 x 4 tokens: 15.6 and 65 us on the H100 against floors of 0.3 and 16)
        {"REC_PARALLEL_O": True}, {"REC_WARPS": 4}, {"REC_PARALLEL_O": True, "REC_WARPS": 4},
        {"REC_PARALLEL_O": True, "REC_BV": 32, "REC_WARPS": 4}, {"REC_PARALLEL_O": True, "REC_BV": 8, "REC_WARPS": 1},
        {"REC_PARALLEL_O": True, "RECURRENT_MAX_LEN": 32},  # 2 x 46 tokens token by token (23 steps) instead of 3 launches
        # the two leads together: they change disjoint workloads (short sequences / long ones)
        {"REC_PARALLEL_O": True, "TRANSITION_FROM": 2048, "TRANS_IN_PREP": True},
        {"REC_PARALLEL_O": True, "REC_WARPS": 4, "TRANSITION_FROM": 2048},
    ],
}
# The champion on main (kernels/<definition>/champion.json) runs beside the seed's variants as "champion":
# the same inputs and timing, so the seed's edits read as a ratio against what the loop would pair them with.


def load_module(name: str, source: str):
    path = Path(os.environ.get("TMPDIR", "/tmp")) / "gdn_dev" / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fla_fn(defname: str):
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule  # noqa: F401
    except Exception as e:  # noqa: BLE001
        print("fla not available:", e)
        return None
    folder = "fla_fused_recurrent" if defname == DECODE else "fla_chunk"
    mod = load_module(f"fla_{folder}", (REPO / "definitions" / defname / "baselines" / folder / "main.py").read_text())
    return mod.run


def state_bytes(defname: str, axes: dict) -> float:
    n = axes["batch_size"] if defname == DECODE else axes["num_seqs"]
    return n * 8 * 128 * 128 * 4


def floor_us(defname: str, axes: dict, inputs: dict) -> float:
    tokens = axes.get("batch_size", axes.get("total_seq_len"))
    io = tokens * (4 * 128 * 2 * 2 + 8 * 128 * 2 * 2 + 8 * 2 * 2)  # q, k, v, output (+ gates)
    st = state_bytes(defname, axes) * (2 if inputs.get("state") is not None else 1)
    return (io + st) / BW * 1e6


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["decode", "prefill"])
    ap.add_argument("--quick", action="store_true", help="default variant and fla only")
    ap.add_argument("--with-tunable", action="append", default=[], metavar="NAME",
                    help="only the default and the variants that set NAME (repeatable), e.g. TRANSITION_FROM")
    ap.add_argument("--budget-s", type=float, default=0.0,
                    help="start no new workload after this many seconds (0: no limit); what ran is written either way")
    ap.add_argument("--dry", action="store_true", help="CPU dry run of this script (interpreter, small workloads, no timing)")
    args = ap.parse_args()
    if args.dry:
        os.environ["TRITON_INTERPRET"] = "1"
        from harness.interpreter_fixes import apply as fix_interpreter

        fix_interpreter()
    import triton.testing

    out_dir = Path(os.environ.get("OUT", "/tmp/gdn_dev_out"))
    out_dir.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cpu" if args.dry else "cuda")
    print(dev if args.dry else torch.cuda.get_device_name(), torch.__version__, flush=True)
    records = []
    tables = []
    started = time.time()
    out_of_time = False
    for defname in (DECODE, PREFILL):
        if out_of_time:
            break
        if args.only and not defname.startswith(f"gdn_{args.only}"):
            continue
        dpath = REPO / "definitions" / defname / "definition.json"
        d = load_definition(dpath)
        cfg = load_config(defname, dpath)
        ref = load_module(f"ref_{defname}", (REPO / "definitions" / defname / "reference.py").read_text())
        seed = load_seeds(defname)[0]
        variants = VARIANTS[defname][:1] if args.quick else VARIANTS[defname]
        if args.with_tunable:  # the default and the variants that set one of these tunables
            variants = [v for v in variants if not v or set(v) & set(args.with_tunable)]
        kernels = {}
        for v in variants:
            sol = apply(seed, v, name="v") if v else seed
            label = ",".join(f"{k}={x}" for k, x in v.items()) or "default"
            kernels[label] = load_module(f"k_{abs(hash(label))}", sol.sources[0].content).run
        champ = champion_solution_file(REPO, defname)
        if champ is not None:
            src = json.loads(champ.read_text())["sources"][0]["content"]
            kernels["champion"] = load_module(f"champ_{defname}", src).run
        fla = fla_fn(defname)
        if fla is not None:
            kernels["fla"] = fla
        wls = load_workloads(REPO / "definitions" / defname / ("workloads.small.jsonl" if args.dry else "workloads.jsonl"), d)
        rows = []
        tables.append((defname, rows))
        for w in wls:
            if args.budget_s and time.time() - started > args.budget_s:
                print(f"budget of {args.budget_s:.0f} s spent: {defname} stops before workload {w.uuid}", flush=True)
                out_of_time = True
                break
            axes = d.resolve_axes(w.axes)
            inputs = make_inputs(d, w, seed=1234, device=dev, config=cfg)
            t0 = time.time()
            ref_out = ref.run(**inputs)
            if not args.dry:
                torch.cuda.synchronize()
            ref_s = time.time() - t0
            ref_d = dict(zip(d.outputs, ref_out))
            fl = floor_us(defname, axes, inputs)
            for label, fn in kernels.items():
                rec = {"definition": defname, "workload": w.uuid, "axes": w.axes, "variant": label, "floor_us": fl,
                       "state": inputs.get("state") is not None, "scale": inputs.get("scale"), "ref_s": ref_s}
                try:
                    outs = allocate_outputs(d, axes, dev)
                    fn(**inputs, **outs)
                    if not args.dry:
                        torch.cuda.synchronize()
                    res = compare(outs, ref_d, definition=d, axes=axes, config=cfg, inputs=inputs)
                    rec.update(status=res.status.value, max_abs=res.max_absolute_error, msg=res.message[:200])

                    def call(outs=outs, fn=fn, inputs=inputs):
                        fn(**inputs, **outs)

                    if args.dry:
                        rec["event_us"] = rec["gpu_us"] = 0.0
                    else:
                        rec["event_us"] = triton.testing.do_bench(call, warmup=5, rep=40) * 1e3
                        rec["gpu_us"], per = kernel_time_us(call)
                        rec["kernels"] = {n[:60]: round(t, 2) for n, t in sorted(per.items(), key=lambda x: -x[1])}
                except Exception as e:  # noqa: BLE001
                    rec.update(status="ERROR", msg=f"{type(e).__name__}: {e}"[:300])
                records.append(rec)
                rows.append(rec)
                print(json.dumps(rec), flush=True)
            # after every workload, so a call cut short by its time limit keeps what it measured
            (out_dir / "gdn_dev.json").write_text(json.dumps(records, indent=1))
    (out_dir / "gdn_dev.json").write_text(json.dumps(records, indent=1))
    for defname, rows in tables:
        print(f"\n== {defname}: GPU time (CUPTI via torch.profiler, all kernels of a call) / event time per call, µs")
        labels = list(dict.fromkeys(r["variant"] for r in rows))
        wl = list(dict.fromkeys(r["workload"] for r in rows))
        print("axes".ljust(44) + "floor  " + "  ".join(lab[:14].rjust(14) for lab in labels))
        means = {lab: [] for lab in labels}
        for u in wl:
            rs = {r["variant"]: r for r in rows if r["workload"] == u}
            first = next(iter(rs.values()))
            ax = ",".join(f"{k}={v}" for k, v in first["axes"].items() if k != "len_cu_seqlens")
            ax += f",s={'y' if first['state'] else 'n'}"
            cells = []
            for lab in labels:
                r = rs.get(lab, {})
                if r.get("status") != "PASSED":
                    cells.append(str(r.get("status", "-"))[:14].rjust(14))
                else:
                    means[lab].append(r["gpu_us"])
                    cells.append(f"{r['gpu_us']:.1f}/{r['event_us']:.1f}".rjust(14))
            print(ax[:43].ljust(44) + f"{first['floor_us']:5.1f}  " + "  ".join(cells))
        for r in rows:
            if r.get("kernels") and r["variant"] in ("default", "champion", "fla"):
                print(f"   {r['variant']:8s} {','.join(f'{k}={v}' for k, v in r['axes'].items())}: {r['kernels']}")
        cells = ((f"{sum(m) / len(m):.2f}" if len(m) == len(wl) else f"({len(m)} ok)").rjust(14) for m in means.values())
        print("mean GPU".ljust(44) + "       " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
