"""Small helpers for the operator tests: load our and the official definitions, shrink, run, compare."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import torch

from harness.compare import CompareResult, compare, normalize_outputs
from harness.defconfig import DefinitionConfig, load_config
from harness.inputs import make_inputs
from harness.trusted_fn import load_trusted_fn
from harness.operators import CONTEST_DEFINITIONS, official_definition_path
from harness.schema import AxisConst, Definition, Workload, load_definition

REPO = Path(__file__).resolve().parents[2]
ALL = CONTEST_DEFINITIONS


def _contest(prefix: str) -> str:
    """The contest definition whose name starts with ``prefix`` (a sixth contest operator adds a name, moves none)."""
    (name,) = [n for n in ALL if n.startswith(prefix)]
    return name


MOE, INDEXER, ATTENTION = _contest("moe_"), _contest("dsa_topk_indexer_"), _contest("dsa_sparse_attention_")
DECODE, PREFILL = _contest("gdn_decode_"), _contest("gdn_prefill_")


def ours(name: str) -> tuple[Definition, DefinitionConfig]:
    path = REPO / "definitions" / name / "definition.json"
    return load_definition(path), load_config(name, path)


def official_path(shared: Path, name: str) -> Path:
    return official_definition_path(shared, name, ours(name)[0].op_type)


def official(shared: Path, name: str) -> Definition:
    return load_definition(official_path(shared, name))


def exec_reference(source: str, subs: dict[str, str] | None = None) -> Callable[..., Any]:
    """``run`` of a reference string, after exact text substitutions (each must occur)."""
    for old, new in (subs or {}).items():
        if old not in source:
            raise AssertionError(f"substitution '{old}' does not occur in the reference")
        source = source.replace(old, new)
    ns: dict[str, Any] = {}
    exec(compile(source, "<official reference>", "exec"), ns)  # noqa: S102  (trusted: the shared official file)
    return ns["run"]


def our_run(name: str) -> Callable[..., Any]:
    _, cfg = ours(name)
    return load_trusted_fn(cfg.reference_fn, cfg.root)


def shrink(defn: Definition, **consts: int) -> Definition:
    """A copy of ``defn`` with some const axes changed (for CPU-sized tests of the math)."""
    d = copy.deepcopy(defn)
    for k, v in consts.items():
        assert isinstance(d.axes[k], AxisConst), k
        d.axes[k] = AxisConst(type="const", value=v)
    return d


def workload(axes: dict[str, int], **inputs: Any) -> Workload:
    return Workload.model_validate({"uuid": "test", "axes": axes, "inputs": inputs})


def gen(name: str, **params: Any) -> dict[str, Any]:
    return {"type": "generated", "generator": name, "params": params}


def scalar(v: Any) -> dict[str, Any]:
    return {"type": "scalar", "value": v}


def make(defn: Definition, cfg: DefinitionConfig, w: Workload, seed: int) -> dict[str, Any]:
    return make_inputs(defn, w, seed=seed, config=cfg)


def clone(inputs: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}


def outputs_of(defn: Definition, result: Any) -> dict[str, Any]:
    return normalize_outputs(result, defn)


def judge(defn: Definition, cfg: DefinitionConfig, w: Workload, inputs: dict[str, Any], got: Any, expected: Any) -> CompareResult:
    axes = defn.resolve_axes(w.axes)
    return compare(outputs_of(defn, got), outputs_of(defn, expected), definition=defn, axes=axes, config=cfg, inputs=inputs)
