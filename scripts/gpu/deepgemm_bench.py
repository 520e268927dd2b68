"""On the device, after scripts/gpu/deepgemm_device.sh: DeepGEMM's sm_90 grouped FP8 GEMMs at the MoE
definition's shapes, with each local expert's row count taken from the routing of our own workloads, so
the figures compare with the MoE champion's `_gemm1_kernel` / `_gemm2_kernel` times (scripts/gpu/seed_kernels.py
moe --champion on the same workloads and machine).

Per workload: the definition's routing (its reference's ``route``) gives the local (token, expert) pairs per
expert; the rows are laid out expert-major with DeepGEMM's contiguous alignment (its psum layout: each
expert's rows start at an aligned offset, the cumulative ends are the layout), then

- GEMM1: ``[M, 7168] x W13 [32, 4096, 7168]^T`` (FP8, 1x128 activation scales, 128x128 weight scales),
- GEMM2: ``[M, 2048] x W2 [32, 7168, 2048]^T``,

through ``deep_gemm.m_grouped_fp8_gemm_nt_contiguous``, timed by the torch profiler's CUDA activities
(CUPTI kernel time per call, every kernel the call launches, listed), with TFLOP/s over the real pairs.
A few rows of the first non-empty expert are checked against a float32 matmul of the dequantized operands.

    usage: python3 scripts/gpu/deepgemm_bench.py [--workload INDEX ...] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]
DEFINITION = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"
QB = 128


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", type=int, action="append", default=[], help="workload indices (default: 4 and 8: 901 and 14107 tokens)")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    import deep_gemm
    import torch
    from devtime import kernel_table

    import harness.operators  # noqa: F401  (registers the MoE input generator)
    from harness.defconfig import load_config
    from harness.inputs import make_inputs
    from harness.schema import load_definition, load_workloads
    from harness.trusted_fn import load_trusted_fn

    ddir = REPO / "definitions" / DEFINITION
    defn = load_definition(ddir / "definition.json")
    cfg = load_config(DEFINITION, ddir / "definition.json")
    workloads = load_workloads(ddir / "workloads.jsonl", defn)
    route = load_trusted_fn(cfg.reference_fn.partition("::")[0] + "::route", cfg.root)
    align = deep_gemm.get_mk_alignment_for_contiguous_layout()
    print(f"# DeepGEMM {deep_gemm.__version__} on {torch.cuda.get_device_name()}; contiguous alignment {align}; "
          f"CUPTI kernel time per call over {a.calls} calls")
    rows = []
    for idx in a.workload or [4, 8]:
        w = workloads[idx]
        x = make_inputs(defn, w, seed=0, device="cuda", config=cfg)
        experts, _ = route(x["routing_logits"], x["routing_bias"], 1.0)
        off, el = int(x["local_expert_offset"]), x["gemm1_weights"].shape[0]
        local = experts[(experts >= off) & (experts < off + el)] - off
        counts = torch.bincount(local.flatten(), minlength=el).tolist()
        starts, psum, m = [], [], 0
        for c in counts:
            starts.append(m)
            psum.append(m + c)
            m += -(-c // align) * align
        m = max(m, align)
        pairs = sum(counts)
        layout = torch.tensor(psum, dtype=torch.int32, device="cuda")
        row = {"workload": idx, "seq_len": w.axes["seq_len"], "pairs": pairs, "experts": sum(c > 0 for c in counts), "rows": m}
        for name, wk, sk, n, k in (("gemm1", "gemm1_weights", "gemm1_weights_scale", 4096, 7168),
                                   ("gemm2", "gemm2_weights", "gemm2_weights_scale", 7168, 2048)):
            g = torch.Generator(device="cuda").manual_seed(1)
            act = (torch.randn(m, k, device="cuda", generator=g) * 2).to(torch.float8_e4m3fn)
            sfa = torch.rand(m, k // QB, device="cuda", generator=g) * 0.02 + 0.001
            b, sfb = x[wk], x[sk].to(torch.float32)
            d = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")

            def call(act=act, sfa=sfa, b=b, sfb=sfb, d=d, layout=layout):
                deep_gemm.m_grouped_fp8_gemm_nt_contiguous((act, sfa), (b, sfb), d, layout, disable_ue8m0_cast=True,
                                                           use_psum_layout=True)

            try:
                call()
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 — reported, the next GEMM goes on
                row[name] = {"error": f"{type(e).__name__}: {e}"[:400]}
                print(f"seq_len {w.axes['seq_len']} {name}: FAILED {row[name]['error']}", flush=True)
                continue
            e0 = next(i for i, c in enumerate(counts) if c)
            r = torch.arange(starts[e0], starts[e0] + min(8, counts[e0]), device="cuda")
            deq_a = act[r].float() * sfa[r].repeat_interleave(QB, dim=1)
            deq_b = b[e0].float() * sfb[e0].repeat_interleave(QB, dim=0).repeat_interleave(QB, dim=1)
            ref = deq_a @ deq_b.T
            rel = float((d[r].float() - ref).norm() / ref.norm().clamp_min(1e-30))
            ks = kernel_table(call, a.calls, warmup=2)
            us = sum(t for _, t, _ in ks)
            tflops = 2 * pairs * n * k / (us * 1e-6) / 1e12
            row[name] = {"us": round(us, 1), "tflops": round(tflops, 1), "rel_err_vs_fp32": rel,
                         "kernels": [{"kernel": kn[:80], "us": round(t, 1), "launches": c} for kn, t, c in ks]}
            print(f"seq_len {w.axes['seq_len']:6d} {name}: {us:8.1f} us  {tflops:6.1f} TFLOP/s over {pairs} pairs "
                  f"({row['experts']} experts, {m} rows)  rel err {rel:.2e}  kernels: "
                  + ", ".join(f"{kn[:40]} {t:.1f}" for kn, t, _ in ks), flush=True)
        rows.append(row)
        del x
    if a.json:
        a.json.write_text(json.dumps({"deep_gemm": deep_gemm.__version__, "device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    return 0 if all("error" not in r.get(g, {}) for r in rows for g in ("gemm1", "gemm2")) else 1


if __name__ == "__main__":
    raise SystemExit(main())
