"""Baseline solutions: trusted-author code around a pinned library, declared beside a definition.

A baseline answers "how fast is what people already use?" (fla-core's Gated DeltaNet kernels,
FlashInfer's where its paths run on this GPU, ``torch.compile`` of the reference, cuBLASLt through
``torch._scaled_mm``). It is evaluated by the same harness, worker and protocol as any candidate (same
inputs, same timing, paired with the candidate when compared), under the **baseline trust level**: the
guard's candidate policy (the static scan that refuses library calls, the launch counter that wants a
kernel of the solution's own, the thread count, the CUPTI observer) does not apply to it. It still runs
in the isolated worker with no secrets, its outputs are still checked against the reference on every
trial, its inputs must come back unchanged, and the harness's own functions must not be touched.

Declaring one (the folder is the declaration; nothing else lists baselines)::

    definitions/<definition>/baselines/<name>/solution.json   the FlashInfer-Bench Solution (sources embedded)
    definitions/<definition>/baselines/<name>/main.py         its sources, side by side (``kbot baselines pack``)

* ``spec.dependencies``: the libraries it needs, as PEP 508 requirements of installed Python
  distributions, pinned where the numbers depend on the version (``fla-core==0.6.0``, ``torch>=2.4``).
* ``spec.target_hardware``: where it can run: ``cpu``, ``cuda`` (any NVIDIA GPU), ``sm_90`` (exactly
  compute capability 9.0), ``sm_90+`` (at least 9.0). Other entries (``NVIDIA_H200``) are informative.
* a source named ``reference.py`` that is not in the folder is the definition's own reference
  (``definitions/<definition>/reference.py``, else the definition's ``reference`` text): how
  ``torch_compile`` baselines carry the code they compile without a copy to keep in step.

A baseline that cannot run here is never a failure: ``unavailable_reason`` says why in one sentence
("fla-core is not installed (the baseline pins fla-core==0.6.0)", "needs compute capability 10.0
(sm_100); this GPU is 9.0"), and reports list it as "could not run here" with that sentence. A library
that is installed but fails to import is reported the same way, with the import error.

**Who gets the baseline level.** Only code the trusted side found in the definition's baselines folder
of its own checkout (on a GPU runner: the base commit, whose ``definitions/`` a pull request cannot
change): ``harness.runner.evaluate(..., trust="baseline")`` looks the solution up here by content hash
and refuses anything else. A field in a solution, its name, its author or a path that looks like a
baselines folder claims nothing: a candidate is always judged as a candidate.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from .paths import definition_dir, shipped
from .schema import Solution, SourceFile, load_definition, load_solution

# None: a definition's folder is looked up in the repository's definitions/, then ours (harness/paths.py);
# tests point this at a definitions/ tree of their own.
DEFINITIONS_DIR: Path | None = None
FOLDER = "baselines"
TRUST_CANDIDATE, TRUST_BASELINE = "candidate", "baseline"
TRUST_LEVELS = (TRUST_CANDIDATE, TRUST_BASELINE)
SHARED_REFERENCE = "reference.py"


class BaselineError(ValueError):
    """A baseline folder that does not declare a usable baseline (the message says which and why)."""


@dataclass(frozen=True)
class DeclaredBaseline:
    definition: str
    name: str  # the folder's name: what reports and tables call it
    folder: Path
    solution: Solution

    @property
    def dependencies(self) -> list[str]:
        return list(self.solution.spec.dependencies or [])


def _folder(definition: str, root: Path | None) -> Path:
    """``definitions/<definition>/`` under ``root`` (or DEFINITIONS_DIR), else where harness/paths.py finds it."""
    base = root if root is not None else DEFINITIONS_DIR
    if base is not None:
        return Path(base) / definition
    return definition_dir(definition) or shipped() / "definitions" / definition


def reference_source(definition: str, root: Path | None = None) -> str:
    """The text a baseline's ``reference.py`` stands for: the definition's reference file, else the
    reference code in its JSON."""
    ddir = _folder(definition, root)
    ref = ddir / SHARED_REFERENCE
    if ref.is_file():
        return ref.read_text()
    return load_definition(ddir / "definition.json").reference


def source_on_disk(folder: Path, path: str, definition: str, root: Path | None = None) -> str | None:
    """What a baseline's source ``path`` holds on disk (see the module docstring for ``reference.py``)."""
    p = folder / path
    if p.is_file():
        return p.read_text()
    if path == SHARED_REFERENCE:
        return reference_source(definition, root)
    return None


def load(folder: Path, definition: str, root: Path | None = None) -> DeclaredBaseline:
    """The baseline declared in ``folder``, checked: a valid solution of ``definition`` whose embedded
    sources are the files on disk, with parseable requirements."""
    try:
        sol = load_solution(folder / "solution.json")
    except ValueError as e:
        raise BaselineError(str(e)) from None
    if sol.definition != definition:
        raise BaselineError(f"{folder}: a solution of '{sol.definition}', in the baselines of '{definition}'")
    stale = [s.path for s in sol.sources if source_on_disk(folder, s.path, definition, root) != s.content]
    if stale:
        raise BaselineError(f"{folder}: solution.json does not hold the current {', '.join(stale)} (run `kbot baselines pack {definition}`)")
    for dep in sol.spec.dependencies or []:
        requirement(dep, folder)
    return DeclaredBaseline(definition, folder.name, folder, sol)


def declared(definition: str, root: Path | None = None) -> list[DeclaredBaseline]:
    """Every baseline declared for ``definition`` (by folder name); a broken declaration is an error."""
    base = _folder(definition, root) / FOLDER
    if not base.is_dir():
        return []
    return [load(f, definition, root) for f in sorted(base.iterdir()) if f.is_dir() and (f / "solution.json").is_file()]


def find(definition: str, name: str, root: Path | None = None) -> DeclaredBaseline:
    for b in declared(definition, root):
        if b.name == name:
            return b
    known = ", ".join(b.name for b in declared(definition, root)) or "none"
    raise BaselineError(f"no baseline '{name}' declared for {definition} (declared: {known})")


def declared_match(definition: str, solution: Solution, root: Path | None = None) -> DeclaredBaseline | None:
    """The declared baseline that IS ``solution`` (same content hash), or None: the only way to the
    baseline trust level."""
    want = solution.content_hash()
    return next((b for b in declared(definition, root) if b.solution.content_hash() == want), None)


def pack(folder: Path, definition: str, root: Path | None = None) -> Solution:
    """Refresh ``solution.json`` from the files beside it (and the shared reference)."""
    sol = load_solution(folder / "solution.json")
    sources = []
    for s in sol.sources:
        text = source_on_disk(folder, s.path, definition, root)
        if text is None:
            raise BaselineError(f"{folder}: source {s.path} is neither in the folder nor the shared reference")
        sources.append(SourceFile(path=s.path, content=text))
    new = sol.model_copy(update={"sources": sources})
    (folder / "solution.json").write_text(new.to_json(indent=2) + "\n")
    return new


# ------------------------------------------------------------------------------ can it run here?


def requirement(dep: str, where: object = "a baseline"):
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(dep)
    except InvalidRequirement as e:
        raise BaselineError(f"{where}: dependency {dep!r} is not a PEP 508 requirement ({e})") from None


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _capability(text: str) -> tuple[int, int] | None:
    """``90`` / ``9.0`` / ``100`` -> (major, minor)."""
    digits = text.replace(".", "")
    if not digits.isdigit() or len(digits) < 2:
        return None
    return int(digits[:-1]), int(digits[-1])


def hardware_reason(target_hardware: list[str], device: str, capability: str | None) -> str | None:
    """Why ``target_hardware`` rules out this device (None: it may run). ``capability`` ("9.0") is
    None when not known yet: compute-capability entries are then left to the worker, which knows it."""
    wants = [t.strip().lower() for t in target_hardware]
    kinds = {t for t in wants if t in ("cpu", "cuda")}
    sms = [(t, _capability(t[3:].rstrip("+"))) for t in wants if t.startswith("sm_")]
    sms = [(t, c) for t, c in sms if c is not None]
    named_gpus = [t for t in wants if t not in ("cpu", "cuda") and not t.startswith("sm_")]  # NVIDIA_H200, B200, ...
    if not kinds and not sms:
        return None  # informative names only: nothing to check
    if device == "cpu":
        return None if "cpu" in kinds else f"needs a GPU ({', '.join(target_hardware)}); this run is on the CPU"
    if "cuda" in kinds or (named_gpus and not sms):
        return None  # a GPU named by product (["NVIDIA_H200", "cpu"]) is a GPU target, not "CPU only"
    if not sms:
        return f"runs on the CPU only ({', '.join(target_hardware)})"
    have = _capability(capability) if capability else None
    if have is None:
        return None
    if any(have >= want if t.endswith("+") else have == want for t, want in sms):
        return None
    listed = " or ".join(f"{want[0]}.{want[1]}{' or newer' if t.endswith('+') else ''} ({t})" for t, want in sms)
    return f"needs compute capability {listed}; this GPU is {capability}"


def unavailable_reason(solution: Solution, device: str, capability: str | None = None) -> str | None:
    """Why this baseline cannot run here, in one sentence; None when nothing rules it out. Checked
    without importing anything: installed distributions and versions, then the hardware."""
    for dep in solution.spec.dependencies or []:
        req = requirement(dep, solution.name)
        have = _installed(req.name)
        if have is None:
            return f"{req.name} is not installed (the baseline needs {dep})"
        if req.specifier and not req.specifier.contains(have, prereleases=True):
            return f"{req.name} {have} is installed; the baseline is pinned to {dep}"
    return hardware_reason(list(solution.spec.target_hardware), device, capability)
