"""Write workloads.jsonl for our own definitions (deterministic UUIDs, so re-running changes nothing).

Sizes follow the regimes of the official workload files (decode-sized batches of a few rows up to
prefill-sized batches of ~16k tokens).  Usage: python scripts/make_workloads.py

The MoE definition's workloads are the official workload file's (seq_len, local_expert_offset) pairs
(read from ../shared; skipped with a message when it is absent) with our generated routing, the
routed_scaling_factor varied across them (the official file has 2.5 everywhere: a kernel that
hard-codes it must fail somewhere), and routing shapes varied over the eight near-identical sizes of
52-62 tokens (no hot experts, every token preferring the local group, a wider bias).
"""

import json
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "definitions"
NS = uuid.UUID("6b626f74-0000-4000-8000-000000000000")  # "kbot"

SPECS = {
    "rmsnorm_h4096": ("batch_size", [1, 7, 32, 128, 512, 2048, 8192, 16384], ["hidden_states", "weight"]),
    "fused_add_rmsnorm_h4096": ("batch_size", [1, 7, 32, 128, 512, 2048, 8192, 16384], ["hidden_states", "residual", "weight"]),
    "gemm_n4096_k4096": ("M", [1, 16, 64, 256, 1024, 4096, 8192], ["A", "B"]),
}
SMALL = {"rmsnorm_h4096": [1, 3, 8], "fused_add_rmsnorm_h4096": [1, 3, 8], "gemm_n4096_k4096": [1, 4]}


def rows(name, axis, sizes, inputs, tag=""):
    return [
        {"definition": name, "solution": None, "evaluation": None,
         "workload": {"uuid": str(uuid.uuid5(NS, f"{name}/{axis}={n}{tag}")), "axes": {axis: n}, "inputs": {i: {"type": "random"} for i in inputs}}}
        for n in sizes
    ]


MOE = "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048"
MOE_OFFICIAL = ROOT.parent / ".." / "shared" / "flashinfer-trace" / "workloads" / "moe" / f"{MOE}.jsonl"
# Cycled over the official workloads in file order (DeepSeek-V3 uses 2.5).
MOE_SCALING = [2.5, 1.0, 2.5, 3.25, 2.5, 0.75]
# Routing shapes (moe_routing_logits params) for the sizes 52-62, in the official file's order.
MOE_ROUTING = [{}, {"hot_local": 0, "hot_global": 0}, {"local_share": 1.0}, {"bias_std": 0.2}, {"hot_local": 8}, {"local_share": 0.2},
               {"noise_std": 2.0}, {}]
MOE_SMALL = [1, 7]  # the official file's smallest sizes, for CPU runs


def moe_rows(official: Path) -> tuple[list[dict], list[dict]]:
    pairs = []
    for line in official.read_text().splitlines():
        if line.strip():
            w = json.loads(line)
            w = w.get("workload", w)
            pairs.append((int(w["axes"]["seq_len"]), int(w["inputs"]["local_expert_offset"]["value"])))
    rows, mid = [], 0
    for i, (n, off) in enumerate(pairs):
        params = {}
        if 52 <= n <= 62:
            params, mid = MOE_ROUTING[mid % len(MOE_ROUTING)], mid + 1
        rsf = MOE_SCALING[i % len(MOE_SCALING)]
        tag = f"{MOE}/seq_len={n}/offset={off}/rsf={rsf}/{json.dumps(params, sort_keys=True)}"
        rows.append({"definition": MOE, "solution": None, "evaluation": None, "workload": {
            "uuid": str(uuid.uuid5(NS, tag)), "axes": {"seq_len": n},
            "inputs": {"routing_logits": {"type": "generated", "generator": "moe_routing_logits", "params": params},
                       "local_expert_offset": {"type": "scalar", "value": off},
                       "routed_scaling_factor": {"type": "scalar", "value": rsf}}}})
    small = [r for r in rows if r["workload"]["axes"]["seq_len"] in MOE_SMALL]
    return rows, small


if MOE_OFFICIAL.is_file():
    big, small = moe_rows(MOE_OFFICIAL.resolve())
    (ROOT / MOE / "workloads.jsonl").write_text("".join(json.dumps(r) + "\n" for r in big))
    (ROOT / MOE / "workloads.small.jsonl").write_text("".join(json.dumps(r) + "\n" for r in small))
    print(f"{MOE}: {len(big)} workloads, {len(small)} small")
else:
    print(f"{MOE}: skipped, the official workload file {MOE_OFFICIAL} is absent")

for name, (axis, sizes, inputs) in SPECS.items():
    d = ROOT / name
    (d / "workloads.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows(name, axis, sizes, inputs)))
    # A small set for CPU runs (the README demo, CI): same shapes as decode, minutes not hours.
    (d / "workloads.small.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows(name, axis, SMALL[name], inputs, "/small")))
    print(f"{name}: {len(sizes)} workloads, {len(SMALL[name])} small")


# ------------------------------------------------------------------------------------ Gated DeltaNet
# Every scalar varies (scale 0 means 1/sqrt(128), so it appears once, beside explicit values that make
# the outputs large against the absolute tolerance); the state is carried in or absent (zeros); one
# sequence and many, short and long, equal/random/skewed lengths and empty sequences.
INV_SQRT_D = 1.0 / 128 ** 0.5
GDN_DECODE = [  # (batch, scale, state absent)
    (1, INV_SQRT_D, False), (1, 0.5, True), (2, 0.125, False), (4, 0.25, False), (8, 1.0, False),
    (16, 0.0, False), (32, INV_SQRT_D, False), (48, 0.5, False), (64, INV_SQRT_D, False), (64, 0.25, True),
]
GDN_DECODE_SMALL = [(1, INV_SQRT_D, False), (2, 0.5, True), (3, 1.0, False)]
GDN_PREFILL = [  # (sequences, tokens, mix, scale, state absent, empty sequences)
    (1, 16, "equal", INV_SQRT_D, False, 0), (1, 512, "equal", 0.5, True, 0), (1, 2048, "equal", 0.25, False, 0),
    (1, 8192, "equal", INV_SQRT_D, False, 0), (2, 46, "random", 1.0, False, 0), (4, 1024, "equal", 0.0, False, 0),
    (4, 4096, "random", 0.125, True, 0), (8, 2048, "skewed", 0.5, False, 0), (16, 4096, "random", INV_SQRT_D, False, 0),
    (16, 512, "equal", 0.25, False, 0), (32, 8192, "random", 1.0, False, 0), (8, 8192, "skewed", INV_SQRT_D, False, 0),
    (6, 1000, "random", 0.3, False, 2), (64, 256, "random", INV_SQRT_D, False, 0),
]
GDN_PREFILL_SMALL = [(1, 16, "equal", INV_SQRT_D, True, 0), (3, 40, "random", 0.5, False, 1), (2, 70, "skewed", 1.0, False, 0)]


def _gdn_state(absent):
    return {"state": {"type": "generated", "generator": "absent"}} if absent else {}


def gdn_decode_rows(name, specs, tag=""):
    out = []
    for b, scale, absent in specs:
        key = f"{name}/batch_size={b}/scale={scale:.6g}/absent={absent}{tag}"
        out.append({"uuid": str(uuid.uuid5(NS, key)), "axes": {"batch_size": b},
                    "inputs": {"scale": {"type": "scalar", "value": scale}, **_gdn_state(absent)}})
    return out


def gdn_prefill_rows(name, specs, tag=""):
    out = []
    for n, total, mix, scale, absent, empty in specs:
        key = f"{name}/num_seqs={n}/total={total}/{mix}/scale={scale:.6g}/absent={absent}/empty={empty}{tag}"
        params = {"mix": mix, **({"empty": empty} if empty else {})}
        out.append({"uuid": str(uuid.uuid5(NS, key)), "axes": {"total_seq_len": total, "num_seqs": n, "len_cu_seqlens": n + 1},
                    "inputs": {"cu_seqlens": {"type": "generated", "generator": "gdn_cu_seqlens", "params": params},
                               "scale": {"type": "scalar", "value": scale}, **_gdn_state(absent)}})
    return out


for name, make, full, small in (("gdn_decode_qk4_v8_d128_k_last", gdn_decode_rows, GDN_DECODE, GDN_DECODE_SMALL),
                                ("gdn_prefill_qk4_v8_d128_k_last", gdn_prefill_rows, GDN_PREFILL, GDN_PREFILL_SMALL)):
    d = ROOT / name
    (d / "workloads.jsonl").write_text("".join(json.dumps(r) + "\n" for r in make(name, full)))
    (d / "workloads.small.jsonl").write_text("".join(json.dumps(r) + "\n" for r in make(name, small, "/small")))
    print(f"{name}: {len(full)} workloads, {len(small)} small")
