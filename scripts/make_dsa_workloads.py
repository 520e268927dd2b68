"""Write workloads.jsonl and workloads.small.jsonl for the two DSA definitions (deterministic UUIDs,
so re-running changes nothing). Usage: python scripts/make_dsa_workloads.py

What the sets are built to catch (see skills/operators/dsa_topk_indexer.md and dsa_sparse_attention.md):

- indexer: rows longer than top-k dominate (a row of at most 2048 tokens selects every token, so a
  wrongly scored kernel agrees there); a few pass-through batches (all rows <= 2048, including rows
  shorter than one page) and mixed batches keep the pass-through path and the per-row dispatch honest;
  batch 1..64, rows up to 128k tokens, pages scattered by a random block table.
- attention: every workload has its own ``sm_scale`` (1/sqrt(192), 0.05, 0.1, 0.15, 0.25, 0.3, ...), so
  a kernel that ignores it fails; decode batches of 1..64 tokens, contexts short (padding) to 128k,
  and two prefill chunks of a few hundred tokens.

Sizes respect the roofline model in skills/roofline/dsa_paged.yaml, whose byte counts assume full
rows (every indexer row as long as the block table is wide; every attention token with 2048 valid,
distinct entries): a kernel must never be faster than the floor of its workload. So large workloads
use a narrow band of lengths just under the table's width (``low``), long contexts with a cache big
enough that decode tokens seldom share a page, and a prefill chunk's cache holds only its own pages;
workloads whose rows are much shorter than the formula assumes (padding, mixed batches) are kept
small, where a call costs more than its floor anyway.
"""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "definitions"
NS = uuid.UUID("6b626f74-0000-4000-8000-000000000000")  # "kbot", as scripts/make_workloads.py
INDEXER = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"
ATTENTION = "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64"
DEEPSEEK_SCALE = 1 / math.sqrt(192)

# (batch_size, max_num_pages, num_pages, dsa_seq_lens params)
INDEXER_SETS = {
    "workloads.jsonl": [
        (1, 32, 64, {"mix": "short"}),  # one row of 1985..2048 tokens: pass-through at the boundary
        (1, 128, 256, {"mix": "long", "low": 6144}),
        (1, 2048, 2560, {"mix": "long", "low": 126976}),  # one 124k-128k row: the longest
        (2, 1024, 2560, {"mix": "long", "low": 57344}),
        (3, 512, 2048, {"mix": "mixed", "short_fraction": 0.34}),  # long rows beside a short one
        (4, 512, 2560, {"mix": "long", "low": 28672}),
        (8, 224, 2560, {"mix": "mixed", "short_fraction": 0.25}),
        (16, 128, 2560, {"mix": "long", "low": 6144}),
        (24, 512, 16384, {"mix": "long", "low": 28672}),
        (24, 64, 2560, {"mix": "mixed", "short_fraction": 0.2}),
        (32, 64, 2560, {"mix": "long", "low": 3072}),
        (64, 32, 2560, {"mix": "short"}),  # every row passes through, some shorter than a page
        (64, 256, 16640, {"mix": "long", "low": 14336}),  # 1M tokens: the most bytes
    ],
    "workloads.small.jsonl": [
        (3, 40, 160, {"mix": "mixed"}),
        (2, 80, 200, {"mix": "long", "low": 3000}),
        (4, 32, 140, {"mix": "short", "fill_max": False}),
    ],
}

# (num_tokens, num_pages, dsa_sparse_indices params, sm_scale)
ATTENTION_SETS = {
    "workloads.jsonl": [
        (1, 2048, {"mix": "long", "max_context": 8192}, DEEPSEEK_SCALE),
        (2, 4096, {"mix": "long", "max_context": 65536}, 0.1),
        (3, 2048, {"mix": "short", "max_context": 8192}, 1 / math.sqrt(512)),  # contexts 1..2047: empty tiles
        (4, 2048, {"mix": "mixed", "max_context": 8192}, 0.05),
        (6, 4096, {"mix": "short", "min_context": 1536, "max_context": 8192}, 0.25),  # padded tails
        (16, 8192, {"mix": "long", "max_context": 16384}, DEEPSEEK_SCALE),
        (32, 16384, {"mix": "long", "max_context": 32768}, 0.05),
        (48, 16384, {"mix": "long", "max_context": 65536}, 0.3),
        (64, 16384, {"mix": "long", "max_context": 8192}, 0.1),
        (64, 16384, {"mix": "long", "max_context": 131072}, DEEPSEEK_SCALE),
        (256, 512, {"mix": "long", "max_context": 8192, "tokens_per_seq": 128}, DEEPSEEK_SCALE),  # prefill
        (384, 1024, {"mix": "long", "max_context": 16384, "tokens_per_seq": 384}, 0.15),  # one prefill chunk
    ],
    "workloads.small.jsonl": [
        (3, 100, {"mix": "mixed", "max_context": 3000}, DEEPSEEK_SCALE),
        (2, 128, {"mix": "long", "max_context": 8192}, 0.25),
        (4, 64, {"mix": "long", "max_context": 4096, "tokens_per_seq": 2}, 0.1),
    ],
}


def _uuid(name: str, key: dict) -> str:
    return str(uuid.uuid5(NS, f"{name}/{json.dumps(key, sort_keys=True)}"))


def indexer_rows(specs):
    out = []
    for B, mp, P, params in specs:
        axes = {"batch_size": B, "max_num_pages": mp, "num_pages": P}
        params = {"fill_max": True, **params}
        out.append({"uuid": _uuid(INDEXER, {"axes": axes, "seq_lens": params}), "axes": axes,
                    "inputs": {"seq_lens": {"type": "generated", "generator": "dsa_seq_lens", "params": params}}})
    return out


def attention_rows(specs):
    out = []
    for T, P, params, scale in specs:
        axes = {"num_tokens": T, "num_pages": P}
        params = {"tokens_per_seq": 1, **params}
        out.append({"uuid": _uuid(ATTENTION, {"axes": axes, "sparse_indices": params, "sm_scale": scale}), "axes": axes,
                    "inputs": {"sparse_indices": {"type": "generated", "generator": "dsa_sparse_indices", "params": params},
                               "sm_scale": {"type": "scalar", "value": scale}}})
    return out


def main() -> None:
    for name, sets, rows in ((INDEXER, INDEXER_SETS, indexer_rows), (ATTENTION, ATTENTION_SETS, attention_rows)):
        for fname, specs in sets.items():
            lines = rows(specs)
            (ROOT / name / fname).write_text("".join(json.dumps(r) + "\n" for r in lines))
            print(f"{name}/{fname}: {len(lines)} workloads")


if __name__ == "__main__":
    main()
