"""Per-kernel GPU time of the indexer seed's variants on one shape: where a variant's time goes.

The sweep (scripts/gpu/dsa_dev.py) gives a call's GPU time per variant; this splits it by kernel (self
CUDA time per call from torch.profiler through scripts/gpu/devtime.py, 20 calls after 5 warm-ups; random fp8 keys with equal scales, so
the scores are spread and rows are longer than top-k) at any shape; scripts/gpu/seed_kernels.py does the
same on the definition's own workloads, for every contest seed.

    usage (repo root, on the device): source scripts/gpu/setup_device.sh
        python3 scripts/gpu/indexer_kernels.py                                  # B=1, 2048 pages
        python3 scripts/gpu/indexer_kernels.py --rows 24 --pages 512 --cache-pages 16384 \\
            --variant default= --variant 'filter256={"FILTER_BINS": 256}'
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parent)]

DEFINITION = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"
DEFAULT_VARIANTS = {"default": {}, "filter256": {"FILTER_BINS": 256}, "filter256_last": {"FILTER_BINS": 256, "FILTER_LAST": True}}


def load(name: str, tunables: dict):
    """The indexer seed with ``tunables`` set (seed_kernels.py's loader: the offline agent's rewriting, which
    refuses names and values the seed does not declare), as a module from a real file."""
    from dsa_dev import load_module
    from seed_kernels import solutions

    return load_module(solutions(DEFINITION, {name: tunables}, champion=False)[name].source("main.py"), name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1, help="batch rows B")
    ap.add_argument("--pages", type=int, default=2048, help="pages of 64 tokens per row (the block table's width)")
    ap.add_argument("--cache-pages", type=int, default=2560)
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=JSON",
                    help="a variant's tunables as JSON (empty: the seed's defaults); default: default, filter256, filter256_last")
    a = ap.parse_args()
    import torch
    from devtime import kernel_table
    from seed_kernels import parse_variants

    variants = parse_variants(a.variant) or DEFAULT_VARIANTS
    B, mp, P = a.rows, a.pages, a.cache_pages
    q = torch.randn(B, 64, 128, device="cuda").to(torch.float8_e4m3fn)
    cache = torch.randint(0, 120, (P, 64, 1, 132), dtype=torch.uint8, device="cuda")
    cache.view(-1, 64 * 132)[:, 64 * 128:].view(torch.float32).fill_(0.01)  # each page's 64 scales
    w = torch.randn(B, 64, device="cuda")
    lens = torch.full((B,), mp * 64 - 5, dtype=torch.int32, device="cuda")
    bt = torch.randperm(P, device="cuda")[:mp].int().view(1, -1).repeat(B, 1)
    print(f"# B={B}, {mp} pages per row, {P}-page cache; {torch.cuda.get_device_name()}")
    for name, v in variants.items():
        m = load(name, v)
        print("==", name)
        for k, us, c in kernel_table(lambda m=m: m.run(q, cache, w, lens, bt), warmup=5):
            print(f"  {k[:40]:40s} {us:8.1f} us x{c:g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
