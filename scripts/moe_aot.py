"""The MoE seed's Triton kernels compiled ahead of time for sm_90, without a GPU: per kernel and
configuration, the compile time, registers, spills, shared memory, tensor-core instructions (QGMMA =
FP8 wgmma, HGMMA = 16-bit wgmma), how the K loop waits on them, global access widths and TMA loads (UTMALDG).

    PYTHONPATH=$PWD python3 scripts/moe_aot.py                     # the seed's defaults at every workload's batch size
    PYTHONPATH=$PWD python3 scripts/moe_aot.py BLOCK_M=128 G1_WARPS=8 --only gemm1,gemm2
    PYTHONPATH=$PWD python3 scripts/moe_aot.py --tokens 14107      # the launches of one batch size
    PYTHONPATH=/path/to/triton-3.6:$PWD python3 scripts/moe_aot.py  # the device's Triton version

The launches are the seed's own: its ``run`` is called at the contest definition's sizes (H 7168, I 2048,
32 local experts, 256 experts) for each ``--tokens`` count (default: every workload's), on CPU tensors that are never read, and every
distinct launch it makes is compiled instead of run (``harness.profile.triton_stats.compiled_launches``:
arguments typed as the JIT specializes them, constexprs and options as ``run`` passes them), so nothing
here restates the seed's launch code. A row is named by its kernel and the first token count that
launched it; the one-program routing kernel appears at every tile it is used with, so a very slow compile
shows as its seconds. ``wgmma waits`` counts ``WARPGROUP.DEPBAR`` by how many wgmma groups they leave in
flight: only ``0`` means every K step waits for its MMA before the scale FMA (no overlap of the promotion).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SEED = REPO / "skills" / "seeds" / "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048" / "grouped.py"
H, I, EL, E = 7168, 2048, 32, 256  # noqa: E741  (the definition's names)
QB = 128  # the definition's scale block
WORKLOADS = REPO / "definitions" / SEED.parent.name / "workloads.jsonl"


def default_tokens() -> list[int]:
    """Every batch size of the definition's workloads (the official seq_len values: both paths, every
    routing tile from 8 up, T divisible by 16 and not), and 3 for the 4-token routing tile."""
    sizes = {json.loads(line)["workload"]["axes"]["seq_len"] for line in WORKLOADS.read_text().splitlines() if line.strip()}
    return sorted(sizes | {3})


def seed_module(tunables: dict[str, object]):
    spec = importlib.util.spec_from_file_location("moe_seed_aot", SEED)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for k, v in tunables.items():
        if not hasattr(mod, k):
            raise SystemExit(f"the seed has no tunable {k}")
        setattr(mod, k, v)
    return mod


def _value(text: str):
    return {"True": True, "False": False}.get(text, int(text) if re.fullmatch(r"-?\d+", text) else text)


def call_inputs(T: int) -> dict:
    """The definition's inputs for T tokens as CPU tensors that are allocated, never written or read (the
    kernels are compiled, not run; the host code reads shapes only)."""
    import torch

    f8, f32 = torch.float8_e4m3fn, torch.float32
    return dict(routing_logits=torch.empty((T, E), dtype=f32), routing_bias=torch.empty((E,), dtype=torch.bfloat16),
                hidden_states=torch.empty((T, H), dtype=f8), hidden_states_scale=torch.empty((H // QB, T), dtype=f32),
                gemm1_weights=torch.empty((EL, 2 * I, H), dtype=f8), gemm1_weights_scale=torch.empty((EL, 2 * I // QB, H // QB), dtype=f32),
                gemm2_weights=torch.empty((EL, H, I), dtype=f8), gemm2_weights_scale=torch.empty((EL, H // QB, I // QB), dtype=f32),
                local_expert_offset=64, routed_scaling_factor=2.5)


def kernel_name(fn_name: str) -> str:
    """``_gemm1_swap_kernel`` -> ``gemm1_swap`` (the names ``--only`` takes)."""
    return fn_name.strip("_").removesuffix("_kernel")


def launches(m, tokens: list[int]) -> list:
    """(first token count, CompiledLaunch) of every distinct launch the seed's ``run`` makes at these sizes."""
    from harness.profile.triton_stats import compiled_launches

    out = []
    with compiled_launches() as seen:
        for T in tokens:
            n = len(seen)
            m.run(**call_inputs(T))
            out += [(T, c) for c in seen[n:]]
    return out


def sass_waits(sass_text: str) -> dict[str, int]:
    """WARPGROUP.DEPBAR.LE gsb0, 0xN counted by N (wgmma groups left in flight)."""
    return dict(Counter(int(n, 16) for n in re.findall(r"WARPGROUP\.DEPBAR\.LE\s+gsb0,\s*0x([0-9a-f]+)", sass_text)))


def describe(T: int, c) -> dict:
    """One compiled launch as a row: the compiler's error, or its resources and what its SASS shows."""
    from harness.profile.sass import find_tool, parse_sass

    row = {"kernel": f"{kernel_name(c.kernel)} T={T}", "warps": c.options.get("num_warps") or 4,  # Triton's defaults
           "stages": c.options.get("num_stages") or 3,
           "compile_s": round(c.compile_s, 1)}
    if c.error:
        return row | {"error": c.error[:300]}
    st = c.stats
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "k.cubin"
        p.write_bytes(st.cubin)
        text = subprocess.run([find_tool("cuobjdump"), "--dump-sass", str(p)], capture_output=True, text=True, timeout=120).stdout
    facts = next(iter(parse_sass(text).values()), {})
    return row | {"registers": st.resources.get("REG"),
                  "spill_bytes": (st.ptxas.get("spill_store_bytes", 0) + st.ptxas.get("spill_load_bytes", 0)) if st.ptxas else None,
                  "shared_bytes": st.metadata.get("shared"), "tensor": facts.get("tensor_instructions", {}), "wgmma_waits": sass_waits(text),
                  "ldg_widths": facts.get("ldg_widths", {}), "tma_loads": len(re.findall(r"\bUTMALDG\b", text)), "ffma": facts.get("ffma"),
                  "instructions": facts.get("instructions")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tunables", nargs="*", help="NAME=VALUE changes of the seed's tunables")
    ap.add_argument("--only", default="", help="comma-separated kernel names to report (route_small, route_pairs, positions, "
                                                "gemm1_swap, swiglu, gemm2_swap, route, scatter, gemm1, gemm2, reduce); every "
                                                "launch is still compiled: use --tokens to compile fewer")
    ap.add_argument("--tokens", default=None, help="comma-separated batch sizes whose launches to compile (default: the "
                                                   "definition's workloads' seq_len values and 3)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import triton

    changes = {}
    for t in args.tunables:
        k, sep, v = t.partition("=")
        if not sep:
            print(f"not NAME=VALUE: {t}", file=sys.stderr)
            return 2
        changes[k] = _value(v)
    try:
        tokens = default_tokens() if args.tokens is None else [int(t) for t in args.tokens.split(",") if t.strip()]
    except ValueError:
        print(f"--tokens: not a list of integers: {args.tokens}", file=sys.stderr)
        return 2
    if not tokens or min(tokens) < 1:
        print("--tokens: give at least one batch size of 1 token or more", file=sys.stderr)
        return 2
    m = seed_module(changes)
    only = {s for s in args.only.split(",") if s}
    rows = []
    compiled = launches(m, tokens)
    unknown = only - {kernel_name(c.kernel) for _, c in compiled}
    if unknown:
        print(f"--only: no launch of {sorted(unknown)} at these batch sizes; launched: "
              f"{sorted({kernel_name(c.kernel) for _, c in compiled})}", file=sys.stderr)
        return 2
    for T, c in compiled:
        if only and kernel_name(c.kernel) not in only:
            continue
        rows.append(r := describe(T, c))
        if not args.json:
            print(f"{r['kernel']:22s} " + (r["error"] if "error" in r else
                  f"warps {r['warps']} stages {r['stages']} compile {r['compile_s']:5.1f} s  regs {r['registers']}  spill {r['spill_bytes']} B  "
                  f"smem {r['shared_bytes']}  tensor {r['tensor']}  waits {r['wgmma_waits']}  ldg {r['ldg_widths']}  tma {r['tma_loads']}  "
                  f"ffma {r['ffma']}"), flush=True)
    if args.json:
        print(json.dumps({"triton": triton.__version__, "tunables": changes, "tokens": tokens, "kernels": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
