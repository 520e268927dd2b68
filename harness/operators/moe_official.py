"""Write the official MoE workloads, with generated routing, as a workloads JSONL for ``kbot eval -w``.

    python -m harness.operators.moe_official OFFICIAL.jsonl OUT.jsonl [--dataset-root DIR]

A derived file made when needed, so the official one is referenced rather than copied into the
repository. Inputs whose safetensors blob is missing under the dataset root (routing logits and bias:
the blobs are not shipped) are replaced by our generators; see harness.operators.moe.official_workloads.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .moe import official_workloads


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.operators.moe_official", description=__doc__.splitlines()[0])
    ap.add_argument("official", help="the official workloads JSONL")
    ap.add_argument("out", help="where to write the derived JSONL")
    ap.add_argument("--dataset-root", default=None, help="where the blobs would be (default: the flashinfer-trace folder two levels above the file)")
    a = ap.parse_args(argv)
    root = Path(a.dataset_root) if a.dataset_root else Path(a.official).resolve().parents[2]
    ws = official_workloads(a.official, root)
    Path(a.out).write_text("".join(w.to_json() + "\n" for w in ws))
    n_sub = sum(1 for w in ws if getattr(w, "kbot_substituted", None))
    print(f"{len(ws)} workloads -> {a.out} (routing generated for {n_sub})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
