"""Generators and comparators for the contest operators (MoE, DSA indexer and attention, GDN).

An operator module registers its generators (``@harness.generators.generator``) and comparators
(``@harness.compare.comparator``) on import. ``register_all`` imports every module of this package, so
adding an operator is adding a module here, with no list to edit; ``harness.inputs`` calls it when it is
imported, so every place that makes inputs (worker, profiler driver, tests) knows them. (Importing the
package alone registers nothing: ``python -m harness.operators.sync`` must not import itself twice.)
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

CONTEST_DEFINITIONS = (
    "moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048",
    "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64",
    "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64",
    "gdn_decode_qk4_v8_d128_k_last",
    "gdn_prefill_qk4_v8_d128_k_last",
)


def official_definition_path(shared: Path, name: str, op_type: str) -> Path:
    """Where the official FlashInfer-Trace definition ``name`` lives under a checkout of the shared
    files: ``flashinfer-trace/definitions/<op_type>/<name>.json`` (``op_type`` as the definition says)."""
    return Path(shared) / "flashinfer-trace" / "definitions" / op_type / f"{name}.json"


def register_all() -> None:
    """Import every operator module (each registers its generators and comparators on import)."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
