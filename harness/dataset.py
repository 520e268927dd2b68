"""Which definition and which workloads a command means: kbot's own, an official dataset's, or a file.

One function, ``resolve``, answers that for every command that names a definition (``kbot eval``,
``eval-many``, ``profile``, ``explain``, ``definitions show``, ``optimize``, ``submit``), and it never
substitutes one set of workloads for another without saying so: the answer carries where the definition
and the workloads came from (``Resolved.describe``), and when it cannot tell which workloads belong to a
definition it refuses (``SchemaError``) instead of guessing.

An official dataset is a FlashInfer-Trace folder: ``definitions/<op_type>/<name>.json`` and
``workloads/<op_type>/<name>.jsonl`` (the layout of ``flashinfer-trace`` and of ``TraceSet``). It is
given with ``--dataset DIR`` or the ``FIB_DATASET_PATH`` environment variable (the official tool's).

The rules:

* a **path** to a definition file inside a dataset (``<D>/definitions/...``) is that dataset's
  definition, and its workloads are ``<D>/workloads/<op_type>/<name>.jsonl``; none there: refused;
* a **path** to one of kbot's definitions (``definitions/<name>/definition.json``) uses the
  ``workloads.jsonl`` beside it; any other file uses a ``workloads.jsonl`` beside it, or the dataset's
  workloads when a dataset is given; otherwise refused (it used to fall back to kbot's workloads of the
  same name silently, measuring 8 workloads where the official set has 14);
* a **name** with a dataset given is the dataset's definition when the dataset has it, else kbot's
  (said so); a name without a dataset is kbot's;
* ``--workloads FILE`` always wins, and is named as given.

Names shared with the official dataset: kbot ships its own editions of some official definitions
(same name, a reference rewritten for speed, shorter descriptions). A name means one operator: kbot's
edition must have exactly the official interface (axes and their values, inputs and outputs with
shapes, dtypes and optionality, constraints). Whenever both are loaded (a dataset is given, or a
dataset definition picks up kbot's ``kbot.yaml`` sidecar by name) the two are compared, and a
different interface under one name is refused as a collision (``interface_difference``). Descriptions,
tags and the reference's text may differ; ``tests/operators/test_references.py`` holds the references
to the same results.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .paths import definition_dir, definition_names, definitions_dirs
from .schema import Definition, SchemaError, Workload, load_definition, load_workloads

DATASET_ENV = "FIB_DATASET_PATH"


@dataclass(frozen=True)
class Resolved:
    """A definition, the file it came from, and its workloads file, each with where it came from."""

    definition: Definition
    path: Path
    origin: str  # "kbot" | "dataset" | "file"
    workloads_path: Path | None
    workloads_origin: str  # "kbot" | "dataset" | "beside the definition" | "given" | "none"
    dataset: Path | None = None

    def workloads(self) -> list[Workload]:
        if self.workloads_path is None:
            raise SchemaError(f"no workloads for {self.definition.name}: pass --workloads FILE.jsonl")
        return load_workloads(self.workloads_path, self.definition)

    def provenance(self, n_workloads: int | None = None) -> dict[str, Any]:
        """What the report records about its inputs."""
        out: dict[str, Any] = {"definition_path": str(self.path), "definition_origin": self.origin,
                               "workloads_path": str(self.workloads_path) if self.workloads_path else None,
                               "workloads_origin": self.workloads_origin}
        if self.dataset is not None:
            out["dataset"] = str(self.dataset)
        if n_workloads is not None:
            out["workloads"] = n_workloads
        return out

    def describe(self, n_workloads: int | None = None) -> str:
        """One line for people: which definition and which workloads, from where."""
        where = {"kbot": "kbot's", "dataset": "the official dataset's", "file": "a file's"}[self.origin]
        text = f"definition {self.definition.name}: {where} ({self.path})"
        if self.workloads_path is not None:
            count = f"{n_workloads} " if n_workloads is not None else ""
            text += f"; {count}workloads from {self.workloads_path} ({self.workloads_origin})"
        return text


def dataset_root(arg: str | Path | None, env: dict[str, str] | None = None) -> Path | None:
    """The dataset folder from ``--dataset`` or ``FIB_DATASET_PATH`` (the option wins), checked."""
    env = os.environ if env is None else env
    raw = str(arg) if arg else env.get(DATASET_ENV, "")
    if not raw:
        return None
    root = Path(raw).expanduser()
    src = "--dataset" if arg else DATASET_ENV
    if not (root / "definitions").is_dir():
        raise SchemaError(f"{src} {root}: not a FlashInfer-Trace dataset (no definitions/ folder in it)")
    return root.resolve()


def dataset_of(path: Path) -> Path | None:
    """The dataset a definition file belongs to: the folder above its ``definitions/`` ancestor, when
    that folder also has ``workloads/`` (kbot's own ``definitions/`` has no ``workloads/`` beside it)."""
    p = path.resolve()
    for parent in p.parents:
        if parent.name == "definitions" and (parent.parent / "workloads").is_dir():
            return parent.parent
    return None


def dataset_definition(root: Path, name: str) -> Path | None:
    """``<root>/definitions/<op_type>/<name>.json`` (any depth; the file's own name is the key)."""
    hits = [p for p in sorted((root / "definitions").rglob(f"{name}.json")) if p.is_file()]
    for p in hits:
        try:
            if load_definition(p).name == name:
                return p
        except SchemaError:
            continue
    return None


def dataset_workloads(root: Path, definition: Definition) -> Path | None:
    p = root / "workloads" / definition.op_type / f"{definition.name}.jsonl"
    return p if p.is_file() else None


def kbot_definition_path(name: str, root: Path | None = None) -> Path | None:
    """``<root>/<name>/definition.json``; without ``root``, the repository's definition of that name, else ours."""
    if root is None:
        folder = definition_dir(name)
        return folder / "definition.json" if folder is not None else None
    p = root / name / "definition.json"
    return p if p.is_file() else None


def interface(d: Definition) -> dict[str, Any]:
    """What a definition promises a solution: axes (with const values), inputs and outputs (shape, dtype,
    optional), constraints. Descriptions, tags and the reference's text are not part of it."""

    def strip(spec: Any) -> dict[str, Any]:
        data = spec.model_dump(mode="json", exclude_none=True)
        data.pop("description", None)
        return data

    return {"axes": {k: strip(a) for k, a in d.axes.items()},
            "inputs": {k: strip(s) for k, s in d.inputs.items()},
            "outputs": {k: strip(s) for k, s in d.outputs.items()},
            "constraints": list(d.constraints or [])}


def interface_difference(a: Definition, b: Definition) -> str | None:
    """None when ``a`` and ``b`` promise the same interface, else what differs first (for the error)."""
    ia, ib = interface(a), interface(b)
    for part in ("axes", "inputs", "outputs"):
        for key in sorted(set(ia[part]) | set(ib[part])):
            if ia[part].get(key) != ib[part].get(key):
                return f"{part}.{key}: {ia[part].get(key)} vs {ib[part].get(key)}"
    if ia["constraints"] != ib["constraints"]:
        return f"constraints: {ia['constraints']} vs {ib['constraints']}"
    return None


def check_no_collision(d: Definition, path: Path, kbot_root: Path | None = None, dataset: Path | None = None) -> None:
    """Refuse a definition whose name kbot (or the dataset) also uses for a different interface (see the
    module doc)."""
    others = [kbot_definition_path(d.name, kbot_root)]
    if dataset is not None:
        others.append(dataset_definition(dataset, d.name))
    for other in others:
        if other is None or other.resolve() == path.resolve():
            continue
        why = interface_difference(load_definition(other), d)
        if why:
            raise SchemaError(f"definition name collision: {path} and {other} are both '{d.name}' but define "
                              f"different interfaces ({why}); kbot refuses to mix them (rename one, or use the "
                              f"file alone with --workloads from its own set)")


def resolve(value: str, *, dataset: Path | None = None, workloads: str | Path | None = None,
            kbot_root: Path | None = None, require_workloads: bool = True) -> Resolved:
    """The definition ``value`` (a path or a name) and its workloads, by the rules of the module doc.
    ``require_workloads=False``: a definition without workloads is not an error (``definitions show``)."""
    kroot = kbot_root  # None: the repository's definitions/, then ours (harness/paths.py)
    dataset = Path(dataset).resolve() if dataset is not None else None
    need = require_workloads and workloads is None
    p = Path(value)
    if p.is_file():
        d = load_definition(p)
        home = dataset_of(p)
        check_no_collision(d, p, kroot, dataset or home)
        ours = kbot_definition_path(d.name, kroot)
        if home is not None:
            if dataset is not None and home != dataset:
                raise SchemaError(f"{p} belongs to the dataset {home}, but --dataset/{DATASET_ENV} names {dataset}: "
                                  "say which one you mean")
            origin, wl, wo = "dataset", dataset_workloads(home, d), "the official dataset's"
            if wl is None and need:
                raise SchemaError(f"the dataset {home} has no workloads for {d.name} (looked for "
                                  f"{home / 'workloads' / d.op_type / (d.name + '.jsonl')}); pass --workloads FILE.jsonl "
                                  "(kbot never substitutes its own set for the official one)")
            return _with_given(Resolved(d, p, origin, wl, wo if wl else "none", home), workloads)
        beside = p.parent / "workloads.jsonl"
        if ours is not None and ours.resolve() == p.resolve():
            official = dataset_workloads(dataset, d) if dataset is not None else None
            if official is not None:  # --dataset asks for the official set, here with kbot's edition
                return _with_given(Resolved(d, p, "kbot", official, "the official dataset's", dataset), workloads)
            return _with_given(Resolved(d, p, "kbot", beside if beside.is_file() else None,
                                        "kbot's" if beside.is_file() else "none", dataset), workloads)
        if beside.is_file():
            return _with_given(Resolved(d, p, "file", beside, "beside the definition"), workloads)
        if dataset is not None:
            wl = dataset_workloads(dataset, d)
            if wl is not None:
                return _with_given(Resolved(d, p, "file", wl, "the official dataset's", dataset), workloads)
        if need:
            hint = (f" (kbot has a definition of that name with its own workloads: pass -d {d.name} for it, "
                    f"or --dataset for the official set)" if ours is not None else "")
            raise SchemaError(f"no workloads for the definition at {p}: there is no workloads.jsonl beside it"
                              f"{' and the dataset has none for it' if dataset is not None else ''}; pass --workloads "
                              f"FILE.jsonl or --dataset DIR{hint}")
        return _with_given(Resolved(d, p, "file", None, "none"), workloads)
    if p.is_dir() and ("/" in value or kbot_definition_path(value, kroot) is None):  # a name wins over a folder
        raise SchemaError(f"{value} is a directory, not a definition: pass its definition.json, or a definition "
                          "name such as rmsnorm_h4096")
    if "/" in value or value.endswith(".json"):
        raise SchemaError(f"{value}: no such file")
    ours = kbot_definition_path(value, kroot)
    if dataset is not None:
        found = dataset_definition(dataset, value)
        if found is not None:
            d = load_definition(found)
            check_no_collision(d, found, kroot, dataset)
            wl = dataset_workloads(dataset, d)
            if wl is None and need:
                raise SchemaError(f"the dataset {dataset} has no workloads for {value} (looked for "
                                  f"{dataset / 'workloads' / d.op_type / (value + '.jsonl')}); pass --workloads FILE.jsonl, "
                                  f"or drop --dataset/{DATASET_ENV} to use kbot's own definition and workloads")
            return _with_given(Resolved(d, found, "dataset", wl, "the official dataset's" if wl else "none", dataset), workloads)
    if ours is None:
        if kroot is None:
            known, looked = definition_names(), definitions_dirs()
        else:
            known = sorted(x.name for x in kroot.iterdir() if (x / "definition.json").is_file()) if kroot.is_dir() else []
            looked = [kroot]
        where = f" nor in the dataset {dataset}" if dataset is not None else ""
        raise SchemaError(f"no definition '{value}' in {' or '.join(str(x) for x in looked) or 'definitions/'}{where}"
                          f"{did_you_mean(value, known)}; "
                          f"known: {', '.join(known)}")
    d = load_definition(ours)
    beside = ours.parent / "workloads.jsonl"
    origin = "kbot's" + (f" (the dataset {dataset} has no definition of that name)" if dataset is not None else "")
    return _with_given(Resolved(d, ours, "kbot", beside if beside.is_file() else None,
                                origin if beside.is_file() else "none", dataset), workloads)


def did_you_mean(value: str, known: list[str]) -> str:
    """``; did you mean 'x'?`` for the closest known names (a typo, a missing suffix), or nothing."""
    import difflib

    close = difflib.get_close_matches(value, known, n=3, cutoff=0.6)
    close += [k for k in known if k not in close and value and (k.startswith(value) or value in k)][: 3 - len(close)]
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def _with_given(r: Resolved, workloads: str | Path | None) -> Resolved:
    if workloads is None:
        return r
    return Resolved(r.definition, r.path, r.origin, Path(workloads), "given", r.dataset)


def click_option():
    """``--dataset DIR`` for every command that names a definition (one spelling, one help text)."""
    import click

    return click.option(
        "--dataset", "dataset_arg", type=click.Path(file_okay=False),
        help=f"An official FlashInfer-Trace dataset folder (definitions/, workloads/); default: ${DATASET_ENV}. "
             "A definition named or found there takes its workloads from DIR/workloads/<op_type>/<name>.jsonl.")
