"""The five contest operators at full size on the GPU: our references, timed, checked against the official ones.

For each operator and each workload of ``definitions/<name>/workloads.jsonl`` (MoE: also the official
workload file's seq_len values and local offsets, with our generated routing in place of its missing
safetensors blobs), alternating smallest and largest, until the operator's time budget is spent:

1. generate the inputs (the sidecar's generators/builder, on the CPU from the seed, then moved);
2. time our reference (CUDA events around each call, median of up to 10 calls after one warm-up);
3. with ``--official-refs``: run the official reference (from ../shared) on a capped subset, check our
   output against it with the sidecar's comparator (official tolerances), and time it;
4. bytes, FLOPs and the roofline floor (harness.roofline with this GPU's ceilings).

Writes ``$OUT/operators_full.json`` and ``$OUT/operators_full.md`` and prints the table. The whole run
stays under ``--budget-s`` (default 270 s) of measuring time plus start-up.

    python scripts/gpu/operators_full.py --official-refs          # on the H200
    python scripts/gpu/operators_full.py --device cpu --only gdn_decode_qk4_v8_d128_k_last --max-per-op 1   # smoke test

With ``--eval`` it also runs each reference as a solution of itself through ``kbot eval`` on two of its
workloads (the worker imports harness.inputs, which registers the operators' generators and
comparators); otherwise it prints those commands.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from harness.compare import compare, normalize_outputs  # noqa: E402
from harness.defconfig import load_config  # noqa: E402
from harness.inputs import make_inputs, seed_for  # noqa: E402
from harness.operators import CONTEST_DEFINITIONS, official_definition_path  # noqa: E402
from harness.operators.moe import official_workloads  # noqa: E402
from harness.schema import Workload, load_definition, load_workloads  # noqa: E402
from harness.trusted_fn import load_trusted_fn  # noqa: E402

# Share of the measuring budget per operator (MoE has the most and the largest workloads).
BUDGET_SHARE = {"moe": 0.34, "dsa_topk": 0.12, "dsa_sparse": 0.16, "gdn_decode": 0.12, "gdn_prefill": 0.26}
# Workloads on which the official reference is affordable (it loops in Python per token/head/expert).
OFFICIAL_AFFORDABLE: dict[str, Callable[[dict[str, int]], bool]] = {
    "moe": lambda a: a["seq_len"] <= 1024,
    "dsa_topk": lambda a: True,
    "dsa_sparse": lambda a: a["num_tokens"] <= 64,
    "gdn_decode": lambda a: True,
    "gdn_prefill": lambda a: a["total_seq_len"] <= 1024,
}


def family(name: str) -> str:
    for k in BUDGET_SHARE:
        if name.startswith(k):
            return k
    raise KeyError(name)


def size_key(axes: dict[str, int]) -> int:
    return math.prod(max(1, v) for v in axes.values())


def find_shared(arg: str | None) -> Path | None:
    for c in (arg, os.environ.get("KBOT_SHARED"), str(REPO.parent / "shared"), str(REPO / ".kbot" / "shared"), str(REPO / "shared")):
        if c and (Path(c) / "flashinfer-trace" / "definitions").is_dir():
            return Path(c)
    return None


class Clock:
    """CUDA events on a GPU (device time between the two events), perf_counter on a CPU."""

    def __init__(self, device: str):
        self.cuda = device == "cuda"

    def time(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        if self.cuda:
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            out = fn()
            e.record()
            torch.cuda.synchronize()
            return s.elapsed_time(e), out
        t0 = time.perf_counter()
        out = fn()
        return (time.perf_counter() - t0) * 1e3, out


def timed(clock: Clock, fn: Callable[[], Any], max_calls: int, max_s: float) -> tuple[float, int, Any]:
    """Median ms over up to ``max_calls`` calls after one warm-up (fewer when a call is slow; a first
    call longer than ``max_s`` is the only sample, reported with n = 0: cold, not warmed up)."""
    first_ms, out = clock.time(fn)
    if first_ms > max_s * 1e3:
        return first_ms, 0, out
    times: list[float] = []
    t_end = time.perf_counter() + max_s
    while len(times) < max_calls and (len(times) < 1 or time.perf_counter() < t_end):
        ms, out = clock.time(fn)
        times.append(ms)
    return statistics.median(times), len(times), out


def clone(x: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in x.items()}


def max_errors(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, float]:
    out = {}
    for k, a in ours.items():
        b = theirs.get(k)
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.is_floating_point():
            a64, b64 = a.double(), b.double()
            fin = torch.isfinite(b64) & torch.isfinite(a64)
            out[k] = float((a64[fin] - b64[fin]).abs().max()) if bool(fin.any()) else 0.0
    return out


def roofline_of(defn, axes, measured_ms, device):
    try:
        from harness.ceilings import ceilings_for
        from harness.roofline import roofline

        r = roofline(defn, axes, ceilings_for(device), measured_ms=measured_ms)
        return {"bytes": r.bytes, "flops": r.flops, "floor_ms": r.floor_ms, "fraction": r.fraction, "bound": r.bound}
    except Exception as e:  # the table is still useful without it; say why
        return {"error": f"{type(e).__name__}: {e}"}


def run_operator(name: str, args, shared: Path | None, clock: Clock, budget_s: float) -> list[dict[str, Any]]:
    fam = family(name)
    dpath = REPO / "definitions" / name / "definition.json"
    defn, cfg = load_definition(dpath), load_config(name, dpath)
    ours = load_trusted_fn(cfg.reference_fn, cfg.root)
    workloads: list[tuple[str, Workload]] = [("ours", w) for w in load_workloads(REPO / "definitions" / name / "workloads.jsonl", defn)]
    if fam == "moe" and shared is not None:
        wpath = shared / "flashinfer-trace" / "workloads" / "moe" / f"{name}.jsonl"
        if wpath.is_file():
            workloads += [("official axes, generated routing", w) for w in official_workloads(wpath, shared / "flashinfer-trace")]
    workloads.sort(key=lambda sw: size_key(sw[1].axes))
    # Smallest, largest, second smallest, second largest, ...: when the time budget runs out, both
    # ends of the size range have been measured.
    workloads = [workloads[i // 2] if i % 2 == 0 else workloads[-1 - i // 2] for i in range(len(workloads))]
    if args.max_per_op:
        workloads = workloads[: args.max_per_op]
    official = None
    if args.official_refs and shared is not None:
        ns: dict[str, Any] = {}
        off = load_definition(official_definition_path(shared, name, defn.op_type))
        exec(compile(off.reference, f"<official {name}>", "exec"), ns)  # noqa: S102 (the shared official file)
        official = ns["run"]
    n_official = 0
    rows = []
    t_end = time.perf_counter() + budget_s
    for source, w in workloads:
        row: dict[str, Any] = {"definition": name, "workload": w.uuid, "source": source, "axes": dict(w.axes), "params": params_of(w)}
        rows.append(row)
        if time.perf_counter() > t_end:
            row["status"] = "skipped (operator time budget spent)"
            continue
        try:
            axes = defn.resolve_axes(w.axes)
            t0 = time.perf_counter()
            root = shared / "flashinfer-trace" if shared is not None else None  # official blobs, where present
            x = make_inputs(defn, w, seed=seed_for(args.seed, w.uuid, 0), device=args.device, config=cfg, dataset_root=root)
            if args.device == "cuda":
                torch.cuda.synchronize()
            row["gen_s"] = round(time.perf_counter() - t0, 3)
            ms, n, out = timed(clock, lambda x=x: ours(**clone(x)), 10, 3.0)
            row.update(ours_ms=ms, ours_calls=n)
            mine = normalize_outputs(out, defn)
            row["roofline"] = roofline_of(defn, axes, ms, args.device)
            if official is not None and n_official < args.official_cap and OFFICIAL_AFFORDABLE[fam](axes):
                n_official += 1
                oms, on, oout = timed(clock, lambda x=x: official(**clone(x)), 2, 2.0)
                theirs = normalize_outputs(oout, defn)
                r = compare(mine, theirs, definition=defn, axes=axes, config=cfg, inputs=x)
                row.update(official_ms=oms, official_calls=on, agrees=r.ok, compare=r.message or r.status.value,
                           max_abs_err=max_errors(mine, theirs), matched_ratio=r.matched_ratio)
            row["status"] = "ok"
            del x, out, mine
        except Exception as e:
            row["status"] = f"error: {type(e).__name__}: {e}"
        if args.device == "cuda":
            torch.cuda.empty_cache()
        print(json.dumps(row), flush=True)
    return rows


def params_of(w: Workload) -> str:
    """Scalars and generator parameters: what tells two workloads with the same axes apart."""
    parts = []
    for k, spec in w.inputs.items():
        if spec.type == "scalar":
            parts.append(f"{k}={spec.value:.4g}" if isinstance(spec.value, float) else f"{k}={spec.value}")
        elif spec.type == "generated" and spec.params:
            parts.append(",".join(f"{pk}={pv}" for pk, pv in spec.params.items()))
    return "; ".join(parts)


def fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}{unit}"
    return f"{v}{unit}"


def table(rows: list[dict[str, Any]]) -> str:
    head = "| definition | axes | inputs | source | gen s | ours ms (n) | official ms | agrees | max abs err | bytes | FLOPs | floor ms | status |"
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        rf = r.get("roofline") or {}
        axes = ", ".join(f"{k}={v}" for k, v in r["axes"].items())
        lines.append("| " + " | ".join([
            r["definition"].split("_")[0] + "_" + r["definition"].split("_")[1], axes, r.get("params", ""), r["source"], fmt(r.get("gen_s")),
            f"{fmt(r.get('ours_ms'))} ({r.get('ours_calls', '-')})", fmt(r.get("official_ms")), fmt(r.get("agrees")),
            fmt(max((r.get("max_abs_err") or {}).values(), default=None)), fmt(rf.get("bytes")), fmt(rf.get("flops")),
            fmt(rf.get("floor_ms")), r.get("status", "-"),
        ]) + " |")
    return "\n".join(lines)


def eval_commands(names: list[str], out: Path) -> list[tuple[str, list[str]]]:
    cmds = []
    for n in names:
        ws = load_workloads(REPO / "definitions" / n / "workloads.jsonl")
        picks = sorted(ws, key=lambda w: size_key(w.axes))[:2]
        cmd = [sys.executable, "-m", "harness.cli", "eval", f"definitions/{n}/reference_solution.json", "-d", n,
               "--budget", "1.0", "--trials", "2", "--out", str(out / "eval" / n)]
        for w in picks:
            cmd += ["--workload", w.uuid]
        cmds.append((n, cmd))
    return cmds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--official-refs", action="store_true", help="also run the (slow) official references on a capped subset")
    ap.add_argument("--official-cap", type=int, default=4, help="official reference runs per operator (default 4)")
    ap.add_argument("--only", nargs="*", default=None, help="definition names (default: all five)")
    ap.add_argument("--budget-s", type=float, default=270.0, help="measuring time for all operators together")
    ap.add_argument("--max-per-op", type=int, default=0, help="at most this many workloads per operator (0 = all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--shared", default=None, help="folder holding flashinfer-trace/ (default: $KBOT_SHARED, ../shared, .kbot/shared as staged by operators_stage_shared.sh)")
    ap.add_argument("--eval", action="store_true", help="run each reference through `kbot eval` as a solution of itself")
    args = ap.parse_args()

    out = Path(os.environ.get("OUT", "/tmp/out"))
    out.mkdir(parents=True, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False  # the references are float32 math
    torch.backends.cudnn.allow_tf32 = False
    shared = find_shared(args.shared)
    names = args.only or list(CONTEST_DEFINITIONS)
    notes = []
    if shared is None:
        notes.append("../shared not found: no official references, no official MoE workload axes (pass --shared or KBOT_SHARED)")
    elif args.official_refs:
        notes.append(f"official references from {shared}, at most {args.official_cap} affordable workloads per operator")
    notes.append("MoE official workloads: their routing_logits/routing_bias blobs are not shipped; generated by harness/operators/moe.py instead")
    clock = Clock(args.device)
    gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    total_share = sum(BUDGET_SHARE[family(n)] for n in names)
    for n in names:
        done = run_operator(n, args, shared, clock, args.budget_s * BUDGET_SHARE[family(n)] / total_share)
        rows += sorted(done, key=lambda r: size_key(r["axes"]))
    result = {"gpu": gpu, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "seed": args.seed,
              "timing": "CUDA events around each Python call (includes host launch gaps), median of up to 10 calls after 1 warm-up",
              "notes": notes, "wall_s": round(time.perf_counter() - t0, 1), "rows": rows}
    cmds = eval_commands(names, out)
    result["kbot_eval_commands"] = ["kbot eval " + " ".join(c[4:]) for _, c in cmds]
    if args.eval:
        result["kbot_eval"] = {}
        for n, c in cmds:
            p = subprocess.run(c, cwd=REPO, capture_output=True, text=True, timeout=300)
            result["kbot_eval"][n] = {"rc": p.returncode, "tail": (p.stdout + p.stderr)[-1500:]}
            print(f"kbot eval {n}: rc={p.returncode}\n{(p.stdout + p.stderr)[-600:]}", flush=True)
    (out / "operators_full.json").write_text(json.dumps(result, indent=1, default=str))
    md = f"# Contest operators on {gpu}\n\n" + "\n".join(f"- {x}" for x in notes) + f"\n- {result['timing']}\n\n" + table(rows) + "\n"
    md += "\n## kbot eval of each reference as a solution of itself\n\n" + "\n".join(f"    kbot eval {' '.join(c[4:])}" for _, c in cmds) + "\n"
    (out / "operators_full.md").write_text(md)
    print(md)
    bad = [r for r in rows if r.get("agrees") is False or str(r.get("status", "")).startswith("error")]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
