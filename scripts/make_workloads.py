"""Write workloads.jsonl for our own definitions (deterministic UUIDs, so re-running changes nothing).

Sizes follow the regimes of the official workload files (decode-sized batches of a few rows up to
prefill-sized batches of ~16k tokens).  Usage: python scripts/make_workloads.py
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


for name, (axis, sizes, inputs) in SPECS.items():
    d = ROOT / name
    (d / "workloads.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows(name, axis, sizes, inputs)))
    # A small set for CPU runs (the README demo, CI): same shapes as decode, minutes not hours.
    (d / "workloads.small.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows(name, axis, SMALL[name], inputs, "/small")))
    print(f"{name}: {len(sizes)} workloads, {len(SMALL[name])} small")
