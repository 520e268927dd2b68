"""Per-definition harness configuration: tolerances, comparator, structured input generators.

Official definition JSON stays untouched; what the harness needs beyond it lives in a sidecar
``kbot.yaml`` next to the definition (``definitions/<name>/kbot.yaml``). A definition loaded from
elsewhere (for example ``../shared``) gets the sidecar of our own definition with the same name if we
ship one, else the defaults, which are the official contest settings.

Sidecar keys (all optional)::

    tolerance: {atol: 0.01, rtol: 0.01, required_matched_ratio: 1.0}
    comparator: default            # a name in harness.compare.COMPARATORS
    comparator_params: {}          # keyword arguments for the comparator
    checks:                        # kbot's own extra checks, reported beside the verdict (never change it)
      token_l2: {check: rows_relative_l2, params: {max_error: 0.1}, why: "one line for the review"}
    optional_outputs: [lse]        # outputs a solution may leave unwritten / return as None
    inputs:                        # overrides for inputs a workload marks "random"
      kv_indices: {generator: page_table, params: {...}}
    builder: inputs.py::make       # a trusted function that builds several structured inputs at once
    trials: 3                      # correctness trials (official default 3)
    reference_fn: reference.py::run  # a faster trusted reference than the JSON's (must agree with it)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .paths import definition_dir
from .schema import SchemaError


class Tolerance(BaseModel):
    model_config = ConfigDict(extra="forbid")
    atol: float = Field(default=1e-2, ge=0)
    rtol: float = Field(default=1e-2, ge=0)
    # Fraction of elements that must be within tolerance (official default: all of them).
    required_matched_ratio: float = Field(default=1.0, gt=0, le=1)


class GeneratorRef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    generator: str
    params: dict[str, Any] = Field(default_factory=dict)


class CheckRef(BaseModel):
    """One named extra check: a function in ``harness.compare.CHECKS`` and its keyword arguments."""

    model_config = ConfigDict(extra="forbid")
    check: str
    params: dict[str, Any] = Field(default_factory=dict)
    why: str = ""  # what the check catches that the official verdict does not (shown in the review)


class DefinitionConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tolerance: Tolerance = Field(default_factory=Tolerance)
    comparator: str = "default"
    comparator_params: dict[str, Any] = Field(default_factory=dict)
    # Extra checks run on outputs the official verdict passed; their outcomes are reported by name and
    # never change the workload's status (the official rule stays the official rule).
    checks: dict[str, CheckRef] = Field(default_factory=dict)
    optional_outputs: list[str] = Field(default_factory=list)
    inputs: dict[str, GeneratorRef] = Field(default_factory=dict)
    builder: str | None = None
    reference_fn: str | None = None
    trials: int = Field(default=3, ge=1, le=1000)
    # Where the sidecar was found; builder/reference_fn paths are relative to it.
    root: Path | None = None


def find_sidecar(definition_name: str, definition_path: Path | None = None) -> Path | None:
    candidates = []
    if definition_path is not None:
        candidates.append(Path(definition_path).resolve().parent / "kbot.yaml")
    ours = definition_dir(definition_name)  # the repository's definition of that name, else ours
    if ours is not None:
        candidates.append(ours / "kbot.yaml")
    for c in candidates:
        if c.is_file():
            return c
    return None


def load_config(definition_name: str, definition_path: Path | None = None, overrides: dict[str, Any] | None = None) -> DefinitionConfig:
    """The sidecar for a definition merged with command-line overrides (e.g. a tolerance)."""
    path = find_sidecar(definition_name, definition_path)
    data: dict[str, Any] = {}
    if path is not None:
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as e:
            raise SchemaError(f"{path}: not valid YAML: {e}") from None
        if not isinstance(data, dict):
            raise SchemaError(f"{path}: must be a mapping")
    for key, value in (overrides or {}).items():
        if key == "tolerance":
            data["tolerance"] = {**data.get("tolerance", {}), **value}
        else:
            data[key] = value
    try:
        cfg = DefinitionConfig.model_validate(data)
    except ValidationError as e:
        where = str(path) if path else "configuration"
        msgs = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())
        raise SchemaError(f"{where}: {msgs}") from None
    cfg.root = path.parent if path else None
    return cfg


def config_fingerprint(config: DefinitionConfig) -> str:
    """A hash of everything in a sidecar that changes a measurement: its settings (tolerance, input
    generators and their parameters, comparator, trials) and the code its builder and reference name.
    A cached result keyed on the definition's name alone would outlive a change of its inputs."""
    import hashlib
    import json

    h = hashlib.sha256(json.dumps(config.model_dump(mode="json", exclude={"root"}), sort_keys=True).encode())
    for spec in (config.builder, config.reference_fn):
        if spec and config.root is not None:
            f = (config.root / spec.partition("::")[0]).resolve()
            h.update(f.read_bytes() if f.is_file() else b"missing:" + str(f).encode())
    return h.hexdigest()[:16]
