"""Driver for test_moe_seed.py: judges the MoE seed on cases given as JSON, in a process of its own.

Triton's interpreter must be chosen before ``triton.language`` is first imported (its standard
library functions are decorated then), so the seed never runs inside a pytest process that may have
imported Triton for compiling. Usage: ``TRITON_INTERPRET=1 python moe_seed_run.py CASES_JSON``, CASES
a list of {"T", "offset", "seed", "params", "tunables", "dims"} (dims: the definition's shrunk sizes,
default test_references.SMALL); prints one JSON line per case with the TMA descriptors' block shapes.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from opkit import MOE, REPO, clone, gen, judge, make, our_run, ours, scalar, shrink, workload  # noqa: E402
from test_references import SMALL  # noqa: E402


def seed_module(tunables):
    """The seed with some tunables changed: scripts/moe_aot.py's loader (one home)."""
    spec = importlib.util.spec_from_file_location("moe_aot_tool", REPO / "scripts" / "moe_aot.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool.seed_module(tunables)


def count_descriptors(mod):
    """Record the block shape of every TMA descriptor the seed builds (its TMA paths are taken only where
    the sizes meet TMA's rules, so a case must show that they were)."""
    base, blocks = mod.TensorDescriptor, []

    class Counting(base):
        @staticmethod
        def from_tensor(t, block_shape):
            blocks.append(list(block_shape))
            return base.from_tensor(t, block_shape)

    mod.TensorDescriptor = Counting
    return blocks


def judged(case):
    mod = seed_module(case.get("tunables", {}))
    blocks = count_descriptors(mod)
    defn, cfg = ours(MOE)
    defn = shrink(defn, **case.get("dims", SMALL))
    T = case["T"]
    w = workload({"seq_len": T}, routing_logits=gen("moe_routing_logits", **case.get("params", {})),
                 local_expert_offset=scalar(case["offset"]), routed_scaling_factor=scalar(1.5))
    x = make(defn, cfg, w, case["seed"])
    expected = our_run(MOE)(**clone(x))
    out = torch.full((T, defn.axes["hidden_size"].value), float("nan"), dtype=torch.bfloat16)  # destination poisoned
    got = mod.run(**clone(x), output=out)
    r = judge(defn, cfg, w, x, got, expected)
    return {**case, "same_buffer": got is out, "descriptors": blocks, "ok": r.ok, "message": r.message, "matched": r.matched_ratio,
            "checks": {k: {"ok": c.ok, "value": c.value, "message": c.message} for k, c in r.checks.items()}}


if __name__ == "__main__":
    for case in json.loads(sys.argv[1]):
        print(json.dumps(judged(case)), flush=True)
