"""Time every configuration of the tunable Triton seeds on a GPU and write the tables that
scripts/search_bench.py reads.

Spaces (the declared tunables of the seeds in skills/seeds/, enumerated with bot.agents.tunables, so a
table's configurations are exactly what the offline agent proposes):
- rmsnorm_h4096 / single_pass.py and chunked.py, hidden 4096, batch sizes 1, 64, 1024, 16384 (bf16);
- gemm_n4096_k4096 / tiled.py, C = A @ B.T with N = K = 4096, M in {128, 1024, 4096} (fp16).

Every configuration is compiled first in a pool of worker processes (filling Triton's on-disk cache;
compilation is the slow part), then timed in this process with ``triton.testing.do_bench`` (median,
L2 flushed by do_bench between calls) after a correctness check against torch; a configuration that
fails to compile, to launch (out of resources) or to match is recorded with its error.

Usage (on the device):  python scripts/gpu/tunable_space.py [--budget-s 220] [--only rmsnorm|gemm]
Smoke test anywhere:    python scripts/gpu/tunable_space.py --smoke   (CPU, Triton interpreter, tiny
shapes, 3 configurations per table, perf_counter timing: checks the pipeline, measures nothing)
Writes $OUT/tunable_space.json: {"device", "tables": [ {name, definition, seed_file, source,
tunables, workloads, reference_ms, configs: [{config, latency_ms | null, error}]} ]} and prints a
summary. Stays under --budget-s (default 220 s): configurations not reached are recorded with error
"not measured (time budget)".
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import importlib.util
import itertools
import json
import math
import multiprocessing as mp
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bot.agents.providers.offline import load_seeds  # noqa: E402
from bot.agents.tunables import apply, configuration, solution_tunables  # noqa: E402
from harness.schema import Solution  # noqa: E402

SMOKE = "--smoke" in sys.argv  # decided before triton is imported: the interpreter is chosen at import
if SMOKE:
    os.environ["TRITON_INTERPRET"] = "1"
DEVICE = "cpu" if SMOKE else "cuda"
GEMM_NK = 128 if SMOKE else 4096  # the interpreter cannot do 4096^2 in reasonable time

SPACES = {
    "rmsnorm": {"definition": "rmsnorm_h4096", "seeds": ["single_pass", "chunked"], "axis": "batch_size",
                "values": [1, 64, 1024, 16384], "smoke_values": [1, 3]},
    "gemm": {"definition": "gemm_n4096_k4096", "seeds": ["tiled"], "axis": "M", "values": [128, 1024, 4096],
             "smoke_values": [5]},
}


def variants(seed: Solution) -> list[tuple[dict, str]]:
    ts = solution_tunables(seed)
    out = []
    for values in itertools.product(*[t.options for t in ts]):
        cfg = dict(zip([t.key for t in ts], values))
        out.append((cfg, apply(seed, cfg).source("main.py")))
    return out


def load_module(source: str, tag: str):
    d = Path(tempfile.mkdtemp(prefix="kbot_space_"))
    f = d / f"v_{tag}.py"
    f.write_text(source)
    spec = importlib.util.spec_from_file_location(f.stem, f)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_inputs(kind: str, value: int):
    import torch

    g = torch.Generator(device=DEVICE).manual_seed(value)
    if kind == "rmsnorm":
        x = torch.randn(value, 4096, device=DEVICE, dtype=torch.bfloat16, generator=g)
        w = torch.randn(4096, device=DEVICE, dtype=torch.bfloat16, generator=g)
        return {"hidden_states": x, "weight": w, "output": torch.empty_like(x)}
    a = torch.randn(value, GEMM_NK, device=DEVICE, dtype=torch.float16, generator=g)
    b = torch.randn(GEMM_NK, GEMM_NK, device=DEVICE, dtype=torch.float16, generator=g)
    return {"A": a, "B": b, "C": torch.empty(value, GEMM_NK, device=DEVICE, dtype=torch.float16)}


def sync() -> None:
    import torch

    if DEVICE == "cuda":
        torch.cuda.synchronize()


def bench(fn) -> float:
    """Median ms per call: do_bench on the GPU; a few perf_counter runs in smoke mode."""
    if SMOKE:
        times = []
        for _ in range(3):
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e3)
        return sorted(times)[1]
    import triton

    return float(triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median"))


def reference(kind: str, args: dict):
    import torch

    if kind == "rmsnorm":
        x = args["hidden_states"].float()
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * args["weight"].float()
        return y.to(torch.bfloat16)
    if DEVICE == "cpu":
        return (args["A"].float() @ args["B"].float().T).to(torch.float16)
    return torch.matmul(args["A"], args["B"].T)


def _compile_one(job: tuple[str, str, str, list[int]]) -> tuple[str, str | None]:
    """Worker: import the variant and launch it once per workload shape (Triton specialises integer
    arguments equal to 1 or divisible by 16, so shapes can need separate compilations); this fills the
    on-disk cache the timing process then hits. Returns (tag, error)."""
    kind, tag, source, values = job
    try:
        import torch

        mod = load_module(source, tag)
        for value in values:
            mod.run(**make_inputs(kind, value))
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return tag, None
    except Exception as e:  # compile errors and out-of-resources launches are data here
        return tag, f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"


def measure(kind: str, space: dict, deadline: float, workers: int) -> list[dict]:
    import torch

    tables = []
    for stem in space["seeds"]:
        [seed] = [s for s in load_seeds(space["definition"]) if s.name.endswith("_" + stem)]
        vs = variants(seed)
        if SMOKE:
            vs = vs[:3]
        tags = [f"{stem}_{i}" for i in range(len(vs))]
        t0 = time.time()
        compile_err: dict[str, str | None] = {tag: None for tag in tags}  # None: compile here if needed
        values = space["smoke_values"] if SMOKE else space["values"]
        jobs = [(kind, tag, src, values) for tag, (_, src) in zip(tags, vs)]
        if SMOKE:
            jobs = jobs[:1]  # one job through the worker path, in this process
            compile_err.update(dict(map(_compile_one, jobs)))
        else:
            pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))
            try:
                for tag, err in pool.map(_compile_one, jobs, timeout=max(10.0, (deadline - time.time()) * 0.6)):
                    compile_err[tag] = err
            except Exception as e:  # a crashed or slow pool: whatever is left compiles in this process
                print(f"[{kind}/{stem}] compile pool stopped early ({type(e).__name__}: {e})", flush=True)
            finally:
                pool.shutdown(wait=False, cancel_futures=True)
        print(f"[{kind}/{stem}] compiled {len(vs)} configurations in {time.time() - t0:.0f} s", flush=True)

        inputs = [make_inputs(kind, v) for v in values]
        refs = [reference(kind, a) for a in inputs]
        ref_ms = [bench(lambda a=a: reference(kind, a)) for a in inputs]
        rows = []
        for tag, (cfg, src) in zip(tags, vs):
            if time.time() > deadline:
                rows.append({"config": cfg, "latency_ms": None, "error": "not measured (time budget)"})
                continue
            if compile_err[tag]:
                rows.append({"config": cfg, "latency_ms": None, "error": compile_err[tag]})
                continue
            try:
                mod = load_module(src, tag)
                lat = []
                for a, ref in zip(inputs, refs):
                    out_name = "output" if kind == "rmsnorm" else "C"
                    a[out_name].fill_(float("nan"))
                    mod.run(**a)
                    sync()
                    got = a[out_name].float()
                    bad = ((got - ref.float()).abs() > 1e-2 + 1e-2 * ref.float().abs()) | ~torch.isfinite(got)
                    frac = bad.float().mean().item()
                    if frac > (0.0 if kind == "rmsnorm" else 1e-4):
                        raise AssertionError(f"wrong result: {frac:.2%} of elements outside tolerance")
                    lat.append(bench(lambda a=a, mod=mod: mod.run(**a)))
                rows.append({"config": cfg, "latency_ms": lat, "error": None})
            except Exception as e:
                rows.append({"config": cfg, "latency_ms": None, "error": f"{type(e).__name__}: {str(e)[:300]}"})
        ok = [r for r in rows if r["latency_ms"]]
        best = min(ok, key=lambda r: math.prod(r["latency_ms"])) if ok else None
        print(f"[{kind}/{stem}] {len(ok)}/{len(rows)} measured; best {best['config'] if best else None} "
              f"{best['latency_ms'] if best else ''}; reference {ref_ms}", flush=True)
        tables.append({
            "name": f"{space['definition']}/{stem}",
            "definition": space["definition"],
            "seed_file": f"skills/seeds/{space['definition']}/{stem}.py",
            "source": seed.source("main.py"),
            "tunables": {t.key: list(t.options) for t in solution_tunables(seed)},
            "default": configuration(solution_tunables(seed)),
            "workloads": [{space["axis"]: v} for v in values],
            "reference_ms": ref_ms,
            "configs": rows,
        })
    return tables


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget-s", type=float, default=220.0)
    ap.add_argument("--only", choices=sorted(SPACES))
    ap.add_argument("--workers", type=int, default=max(1, min(14, (os.cpu_count() or 2) - 2)))
    ap.add_argument("--smoke", action="store_true", help="CPU + Triton interpreter, tiny shapes, 3 configurations")
    args = ap.parse_args()
    import torch
    import triton

    out = Path(os.environ.get("OUT", "/tmp/out"))
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.time() + args.budget_s
    tables = []
    for kind in [args.only] if args.only else ["rmsnorm", "gemm"]:
        try:
            tables += measure(kind, SPACES[kind], deadline, args.workers)
        except Exception:
            traceback.print_exc()
    result = {
        "device": "cpu (smoke test, not a measurement)" if SMOKE else torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "timer": "perf_counter (smoke)" if SMOKE else "triton.testing.do_bench median (warmup 10 ms, rep 40 ms), L2 flushed between calls",
        "tables": tables,
    }
    (out / "tunable_space.json").write_text(json.dumps(result, indent=1))
    print(f"wrote {out / 'tunable_space.json'} ({sum(len(t['configs']) for t in tables)} configurations)")


if __name__ == "__main__":
    main()
