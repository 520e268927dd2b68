"""Functions that ship with a definition (its reference, its builder, MoE's ``route``), loaded from the
definition's own folder. Trusted: they are ours, never a candidate's; the path may not leave the folder.
A module of its own so that the operator modules can load them without importing the input maker
(``harness.inputs`` registers the operators, so importing it from one would be a cycle)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Callable

from .schema import SchemaError


def load_trusted_fn(spec: str, root: Path | None) -> Callable[..., Any]:
    """Load ``file.py::fn`` from a definition's own folder (trusted: it ships with our definitions)."""
    if root is None:
        raise SchemaError(f"'{spec}' needs the definition's folder, which is unknown")
    file, _, fn = spec.partition("::")
    path = (root / file).resolve()
    if root.resolve() not in path.parents:
        raise SchemaError(f"'{spec}' points outside the definition folder")
    modname = f"kbot_def_{abs(hash(str(path)))}"
    mspec = importlib.util.spec_from_file_location(modname, path)
    if mspec is None or mspec.loader is None:
        raise SchemaError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(mspec)
    mspec.loader.exec_module(mod)
    try:
        return getattr(mod, fn)
    except AttributeError:
        raise SchemaError(f"{path} has no function '{fn}'") from None
