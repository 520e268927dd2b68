"""The MoE seed's Triton kernels compiled ahead of time for sm_90, without a GPU: per kernel and
configuration, the compile time, registers, spills, shared memory, tensor-core instructions (QGMMA =
FP8 wgmma, HGMMA = 16-bit wgmma), how the K loop waits on them, global access widths and TMA loads (UTMALDG).

    PYTHONPATH=$PWD python3 scripts/moe_aot.py                     # the seed's defaults, both paths
    PYTHONPATH=$PWD python3 scripts/moe_aot.py BLOCK_M=128 G1_WARPS=8 --only gemm1,gemm2
    PYTHONPATH=/path/to/triton-3.6:$PWD python3 scripts/moe_aot.py  # the device's Triton version

Sizes are the contest definition's (H 7168, I 2048, 32 local experts, 256 experts); constexprs and
launch options are those ``run`` passes for the tunables given (NAME=VALUE, the seed's ``# kbot:
tunable`` names). The one-program routing kernel is compiled at every power-of-two tile it is used
with (BT 2 .. min(SMALL_MAX_TOKENS, SMALL_ROUTE_MAX)): a very slow compile there shows as its seconds.
``wgmma waits`` counts ``WARPGROUP.DEPBAR`` by how many wgmma groups they leave in flight: only
``0`` means every K step waits for its MMA before the scale FMA (no overlap of the promotion).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SEED = REPO / "skills" / "seeds" / "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048" / "grouped.py"
H, I, EL, E = 7168, 2048, 32, 256  # noqa: E741  (the definition's names)


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


def configs(m):
    """(name, kernel, signature, constexprs, num_warps, num_stages) of every kernel ``run`` launches."""
    import triton

    P = "*fp32"
    ptr = {"f8": "*fp8e4nv", "bf16": "*bf16", "i32": "*i32", "f32": P}
    consts = dict(E=E, N_GROUP=m.N_GROUP, TOPK_GROUP=m.TOPK_GROUP, TOP_K=m.TOP_K, E_LOCAL=EL)
    route_sig = {"logits_ptr": P, "bias_ptr": ptr["bf16"], "T": "i32", "rsf": "fp32", "offset": "i32"}
    out = []
    one = min(m.SMALL_MAX_TOKENS, m.SMALL_ROUTE_MAX)  # tokens routed in the small path's own routing
    if m.SMALL_ROUTE_BT:  # tiles above SMALL_ROUTE_BT tokens: routing programs of SMALL_ROUTE_BT, then the positions
        one_program = min(one, m.SMALL_ROUTE_BT)
        if one > m.SMALL_ROUTE_BT:
            sig = {**route_sig, "le_ptr": ptr["i32"], "wpair_ptr": P}
            out.append((f"route_pairs BT={m.SMALL_ROUTE_BT}", m._route_pairs_kernel, sig,
                        {k: consts[k] for k in ("E", "N_GROUP", "TOPK_GROUP", "TOP_K")} | {"BT": m.SMALL_ROUTE_BT},
                        m._route_small_warps(m.SMALL_ROUTE_BT), 1))
            nj = triton.next_power_of_2(one) * m.TOP_K
            sig = {"le_ptr": ptr["i32"], "wpair_ptr": P, "T": "i32", "counts_ptr": ptr["i32"], "sorted_tok_ptr": ptr["i32"],
                   "row_of_ptr": ptr["i32"], "w_ptr": P}
            out.append((f"positions NJ={nj}", m._positions_kernel, sig, {"TOP_K": m.TOP_K, "E_LOCAL": EL, "NJ": nj},
                        max(4, min(16, nj // 32)), 1))
    else:
        one_program = one
    bt = 2
    while one_program > 0 and bt <= max(2, triton.next_power_of_2(one_program)):
        sig = {**route_sig, "counts_ptr": ptr["i32"], "sorted_tok_ptr": ptr["i32"], "row_of_ptr": ptr["i32"], "w_ptr": P}
        out.append((f"route_small BT={bt}", m._route_small_kernel, sig, {**consts, "BT": bt}, m._route_small_warps(bt), 1))
        bt *= 2
    split = max(d for d in range(1, m.SMALL_SPLIT_K + 1) if (H // m.QBLOCK) % d == 0)

    def desc(use, dtype, block, fallback):
        """A TMA operand's signature (what run() passes when the tunable turns TMA on), else the pointer's."""
        return f"tensordesc<{dtype}[{block[0]}, {block[1]}]>" if use else fallback

    small_tma, small_tma2 = bool(m.SMALL_W_TMA), bool(m.SMALL_W_TMA and m.SMALL_INTER_FP8)
    sig = {"hs_ptr": ptr["f8"], "hs_scale_ptr": P, "w_ptr": ptr["f8"], "w_desc": desc(small_tma, "fp8e4nv", (m.SMALL_BN, m.QBLOCK), ptr["f8"]),
           "ws_ptr": P, "counts_ptr": ptr["i32"], "sorted_tok_ptr": ptr["i32"], "part_ptr": P, "T": "i32", "P": "i32"}
    out.append(("gemm1_swap", m._gemm1_swap_kernel, sig, dict(H=H, I=I, E_LOCAL=EL, BT=m.SMALL_G1_BT or m.SMALL_BT, BN=m.SMALL_BN,
                                                              SPLIT=split, QB=m.QBLOCK, PREFETCH=bool(m.PREFETCH_SCALES), TMA=small_tma,
                                                              WS1=bool(m.W_SCALE_ONE) and m.SMALL_BN <= m.QBLOCK),
                m.SMALL_WARPS, m.SMALL_STAGES))
    small_inter = ptr["f8"] if m.SMALL_INTER_FP8 else ptr["bf16"]
    sig = {"part_ptr": P, "counts_ptr": ptr["i32"], "inter_ptr": small_inter, "inter_scale_ptr": P, "P": "i32"}
    out.append(("swiglu", m._swiglu_kernel, sig, dict(I=I, E_LOCAL=EL, SPLIT=split, BR=16, BC=m.QBLOCK, A_FP8=m.SMALL_INTER_FP8,
                                                      FP8_MAX=m.FP8_MAX, INTERP=False), 4, 1))
    sig = {"inter_ptr": small_inter, "a_desc": desc(small_tma2, "fp8e4nv", (m.SMALL_BT, m.QBLOCK), small_inter), "inter_scale_ptr": P,
           "w_ptr": ptr["f8"], "w_desc": desc(small_tma2, "fp8e4nv", (m.SMALL_BN, m.QBLOCK), ptr["f8"]), "ws_ptr": P,
           "counts_ptr": ptr["i32"], "y_ptr": ptr["bf16"]}
    out.append(("gemm2_swap", m._gemm2_swap_kernel, sig, dict(H=H, I=I, E_LOCAL=EL, BT=m.SMALL_BT, BN=m.SMALL_BN, QB=m.QBLOCK,
                                                              A_FP8=m.SMALL_INTER_FP8, INTERP=False, TMA=small_tma2,
                                                              WS1=bool(m.W_SCALE_ONE) and m.SMALL_BN <= m.QBLOCK),
                m.SMALL_WARPS, m.SMALL_G2_STAGES))
    sig = {**route_sig, "counts_ptr": ptr["i32"], "le_ptr": ptr["i32"], "rank_ptr": ptr["i32"], "w_ptr": P}
    out.append(("route", m._route_kernel, sig, {**consts, "BT": 16}, 4, 1))
    inter = ptr["f8"] if m.INTER_FP8 else ptr["bf16"]
    tma, tma2 = bool(m.W_TMA), bool(m.W_TMA and m.INTER_FP8)
    stma = bool(m.SCALE_TMA) and not m.PREFETCH_SCALES  # the contest sizes meet its multiple-of-4 rule
    bm1, bm2 = m.BLOCK_M, m.G2_BLOCK_M
    sig = {"hs_ptr": ptr["f8"], "hs_scale_ptr": P, "sa_desc": desc(stma, "fp32", (bm1, 4), P), "w_ptr": ptr["f8"],
           "w_desc": desc(tma, "fp8e4nv", (m.G1_BN, m.QBLOCK), ptr["f8"]), "ws_ptr": P, "counts_ptr": ptr["i32"],
           "sorted_tok_ptr": ptr["i32"], "inter_ptr": inter, "inter_scale_ptr": P, "T": "i32", "P": "i32"}
    out.append(("gemm1", m._gemm1_kernel, sig, m._gemm1_consts(H, I, EL, False) | {"TMA": tma, "SCALE_TMA": stma}, m.G1_WARPS,
                m.NUM_STAGES))
    sig = {"inter_ptr": inter, "a_desc": desc(tma2, "fp8e4nv", (bm2, m.G1_BN), inter), "inter_scale_ptr": P,
           "sa_desc": desc(stma and m.INTER_FP8, "fp32", (bm2, 4), P), "w_ptr": ptr["f8"],
           "w_desc": desc(tma2, "fp8e4nv", (m.BLOCK_N2, m.G1_BN), ptr["f8"]), "ws_ptr": P, "counts_ptr": ptr["i32"], "y_ptr": ptr["bf16"]}
    out.append(("gemm2", m._gemm2_kernel, sig, m._gemm2_consts(H, I, EL, False) | {"TMA": tma2, "SCALE_TMA": bool(stma and m.INTER_FP8)},
                m.G2_WARPS, m.NUM_STAGES))
    return out


def sass_waits(sass_text: str) -> dict[str, int]:
    """WARPGROUP.DEPBAR.LE gsb0, 0xN counted by N (wgmma groups left in flight)."""
    return dict(Counter(int(n, 16) for n in re.findall(r"WARPGROUP\.DEPBAR\.LE\s+gsb0,\s*0x([0-9a-f]+)", sass_text)))


def compile_one(name, fn, sig, consts, warps, stages):
    import subprocess
    import tempfile

    from harness.profile.sass import find_tool, parse_sass
    from harness.profile.triton_stats import compile_for_sm90

    t0 = time.monotonic()
    full_sig = {**sig, **{k: "constexpr" for k in consts}}
    st = compile_for_sm90(fn, full_sig, consts, num_warps=warps, num_stages=stages, int_divisible={"T": False})
    secs = time.monotonic() - t0
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "k.cubin"
        p.write_bytes(st.cubin)
        text = subprocess.run([find_tool("cuobjdump"), "--dump-sass", str(p)], capture_output=True, text=True, timeout=120).stdout
    facts = next(iter(parse_sass(text).values()), {})
    return {"kernel": name, "warps": warps, "stages": stages, "compile_s": round(secs, 1), "registers": st.resources.get("REG"),
            "spill_bytes": (st.ptxas.get("spill_store_bytes", 0) + st.ptxas.get("spill_load_bytes", 0)) if st.ptxas else None,
            "shared_bytes": st.metadata.get("shared"), "tensor": facts.get("tensor_instructions", {}), "wgmma_waits": sass_waits(text),
            "ldg_widths": facts.get("ldg_widths", {}), "tma_loads": len(re.findall(r"\bUTMALDG\b", text)), "ffma": facts.get("ffma"),
            "instructions": facts.get("instructions")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tunables", nargs="*", help="NAME=VALUE changes of the seed's tunables")
    ap.add_argument("--only", default="", help="comma-separated kernel name prefixes (route_small, route_pairs, positions, "
                                                "gemm1_swap, swiglu, gemm2_swap, route, gemm1, gemm2)")
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
    m = seed_module(changes)
    only = [s for s in args.only.split(",") if s]
    rows = []
    for name, fn, sig, consts, warps, stages in configs(m):
        if only and not any(name == o or name.startswith(o + " ") for o in only):
            continue
        try:
            rows.append(compile_one(name, fn, sig, consts, warps, stages))
        except Exception as e:  # noqa: BLE001 — a configuration that does not compile is a result
            rows.append({"kernel": name, "error": f"{type(e).__name__}: {str(e)[:300]}"})
        r = rows[-1]
        if not args.json:
            print(f"{name:22s} " + (r["error"] if "error" in r else
                  f"warps {r['warps']} stages {r['stages']} compile {r['compile_s']:5.1f} s  regs {r['registers']}  spill {r['spill_bytes']} B  "
                  f"smem {r['shared_bytes']}  tensor {r['tensor']}  waits {r['wgmma_waits']}  ldg {r['ldg_widths']}  tma {r['tma_loads']}  "
                  f"ffma {r['ffma']}"), flush=True)
    if args.json:
        print(json.dumps({"triton": triton.__version__, "tunables": changes, "kernels": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
