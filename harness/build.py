"""Builders: turn a Solution into a Python callable.

- ``python`` and ``triton``: the sources are written to a private folder and the entry file is
  imported as a fresh module (Triton compiles lazily, at the first launch; its compile errors are
  turned into the same structured form when that launch happens).
- ``cuda``: compiled with torch's extension loader (``torch.utils.cpp_extension.load``). We chose it
  over CuPy's RawModule because a CUDA solution's entry point is a C++ host function that takes
  tensors; the torch loader compiles host and device code together and binds tensors without a
  hand-written Python launcher. Its cost is a slower first build (~30-60 s), which the archive's
  build cache absorbs. On a machine without CUDA we still run ``nvcc`` (if present) so the agent gets
  compiler errors, and report that running needs a GPU.

Build errors come back as ``BuildResult(ok=False, errors=[BuildError(file, line, column, message)])``
with file names relative to the solution, because an agent reads them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from .report import BuildError, BuildResult
from .schema import Language, Solution

_GCC = re.compile(r"^(?P<file>[^\s:()][^:()]*?)(?:\((?P<pline>\d+)\)|:(?P<line>\d+)(?::(?P<col>\d+))?):\s*(?:fatal )?error\s*:?\s*(?P<msg>.*)$")


# Without a GPU, nvcc still runs so an agent gets compiler errors; errors surface early, a clean compile
# of torch's headers can take minutes on a small machine, so the check gives up rather than wait.
NVCC_CHECK_TIMEOUT_S = 180


class BuildFailed(Exception):
    def __init__(self, result: BuildResult):
        super().__init__(result.errors[0].message if result.errors else "build failed")
        self.result = result


def write_sources(solution: Solution, dest: Path) -> Path:
    """Write every source file under ``dest`` (paths were validated to stay inside it)."""
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    for src in solution.sources:
        p = (root / src.path).resolve()
        if root not in p.parents:
            raise ValueError(f"source path '{src.path}' escapes the build folder")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(src.content)
    return root


def python_error(exc: BaseException, src_root: Path) -> list[BuildError]:
    """Structured errors from a Python exception, with frames inside the solution's own files."""
    errors: list[BuildError] = []
    if isinstance(exc, SyntaxError) and exc.filename:
        errors.append(BuildError(file=_rel(exc.filename, src_root), line=exc.lineno, column=exc.offset, message=f"SyntaxError: {exc.msg}"))
        return errors
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _inside(f.filename, src_root)]
    msg = f"{type(exc).__name__}: {exc}".strip()
    # Triton's CompilationError carries the kernel source position in its message/attributes.
    node = getattr(exc, "node", None)
    src_file = getattr(exc, "fn", None)
    if node is not None and hasattr(node, "lineno"):
        fn_file = getattr(getattr(src_file, "fn", None), "__code__", None)
        file = _rel(fn_file.co_filename, src_root) if fn_file else None
        start = getattr(getattr(src_file, "fn", None), "__code__", None)
        line = (start.co_firstlineno + node.lineno - 1) if start else node.lineno
        errors.append(BuildError(file=file, line=line, column=getattr(node, "col_offset", None), message=msg[:4000]))
    elif frames:
        f = frames[-1]
        errors.append(BuildError(file=_rel(f.filename, src_root), line=f.lineno, message=msg[:4000]))
    else:
        errors.append(BuildError(message=msg[:4000]))
    return errors


def _inside(filename: str, root: Path) -> bool:
    try:
        return root in Path(filename).resolve().parents
    except (OSError, ValueError):
        return False


def _rel(filename: str, root: Path) -> str:
    try:
        return str(Path(filename).resolve().relative_to(root))
    except ValueError:
        return Path(filename).name


def parse_compiler_output(text: str, src_root: Path | None = None) -> list[BuildError]:
    """gcc/nvcc style ``file:line:col: error: msg`` and ``file(line): error: msg`` lines."""
    out = []
    for line in text.splitlines():
        m = _GCC.match(line.strip())
        if not m:
            continue
        file = m.group("file")
        if src_root is not None:
            file = _rel(file, src_root) if Path(file).is_absolute() else file
        ln = m.group("line") or m.group("pline")
        out.append(BuildError(file=file, line=int(ln) if ln else None, column=int(m.group("col")) if m.group("col") else None, message=m.group("msg").strip()))
    return out


def import_entry(solution: Solution, src_root: Path) -> Callable[..., Any]:
    """Import the entry file as a uniquely named module; the solution folder is importable for helpers."""
    entry = src_root / solution.spec.entry_file
    modname = "kbot_solution_" + hashlib.sha256(str(src_root).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(modname, entry, submodule_search_locations=None)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {entry}")
    module = importlib.util.module_from_spec(spec)
    if str(src_root) not in sys.path:
        sys.path.insert(0, str(src_root))
    sys.modules[modname] = module
    spec.loader.exec_module(module)
    fn = getattr(module, solution.spec.entry_function, None)
    if fn is None or not callable(fn):
        raise AttributeError(f"{solution.spec.entry_file} has no callable '{solution.spec.entry_function}'")
    return fn


def build(solution: Solution, workdir: Path, *, device: str = "cpu") -> tuple[Callable[..., Any] | None, BuildResult]:
    """Build a solution in ``workdir``; returns (callable or None, BuildResult)."""
    t0 = time.perf_counter()
    lang = solution.spec.language
    src_root = write_sources(solution, workdir / "src")
    try:
        if lang in (Language.PYTHON, Language.TRITON):
            fn = import_entry(solution, src_root)
        else:
            fn = _build_cuda(solution, src_root, workdir, device)
        return fn, BuildResult(ok=True, language=lang.value, seconds=time.perf_counter() - t0)
    except BuildFailed as e:
        e.result.seconds = time.perf_counter() - t0
        return None, e.result
    except BaseException as e:  # noqa: BLE001 — any import-time failure is a build failure
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        return None, BuildResult(
            ok=False, language=lang.value, seconds=time.perf_counter() - t0, errors=python_error(e, src_root), log=traceback.format_exc()[-8000:]
        )


# --- the CUDA target: the compute capability of the GPU this runs on ------------------------------------

GPU_KIND_ENV = "KBOT_GPU_KIND"  # a runner without a visible GPU (a syntax check): which GPU the bench targets


def arch_for_capability(major: int, minor: int) -> str:
    """The nvcc target for a compute capability: ``sm_90a`` on Hopper, ``sm_100a`` on Blackwell
    (B200), ``sm_120a`` on RTX Blackwell; the ``a`` (architecture-specific: wgmma, TMA multicast,
    tcgen05) exists from 9.0 on, so older GPUs get the plain ``sm_80`` / ``sm_86`` / ``sm_89``."""
    if not (isinstance(major, int) and isinstance(minor, int) and 3 <= major <= 99 and 0 <= minor <= 9):
        raise ValueError(f"not a compute capability: {major}.{minor}")
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


def device_arch(props: Any = None) -> str:
    """The target of the GPU this process runs on (``torch.cuda.get_device_properties`` of the current
    device, or ``props`` with ``major``/``minor`` given by a caller or a test)."""
    if props is None:
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return arch_for_capability(int(props.major), int(props.minor))


def declared_arch(environ: Any = None) -> str | None:
    """The target for a machine without a visible GPU: the compute capability documented for the GPU
    kind the repository declares (``KBOT_GPU_KIND``, e.g. ``B200``; see harness/ceilings.py), or None."""
    import os

    from .ceilings import documented_capability

    kind = (environ if environ is not None else os.environ).get(GPU_KIND_ENV, "").strip()
    if not kind:
        return None
    cap = documented_capability(kind)
    if cap is None:
        raise ValueError(f"{GPU_KIND_ENV}={kind!r} is not a GPU kind with documented figures (harness/ceilings.py DOCUMENTED)")
    return arch_for_capability(*cap)


def gencode_flags(arch: str) -> list[str]:
    """``-gencode`` for one target: SASS for it and PTX of the same architecture beside it."""
    m = re.fullmatch(r"sm_(\d{2,3})(a?)", arch)
    if not m:
        raise ValueError(f"not an nvcc target: {arch!r}")
    return [f"-gencode=arch=compute_{m.group(1)}{m.group(2)},code=[sm_{m.group(1)}{m.group(2)},compute_{m.group(1)}{m.group(2)}]"]


def _cuda_sources(solution: Solution, src_root: Path) -> list[Path]:
    return [src_root / s.path for s in solution.sources if s.path.endswith((".cu", ".cpp", ".cc", ".cxx"))]


def _build_cuda(solution: Solution, src_root: Path, workdir: Path, device: str) -> Callable[..., Any]:
    import torch

    sources = _cuda_sources(solution, src_root)
    if not sources:
        raise BuildFailed(BuildResult(ok=False, language="cuda", errors=[BuildError(message="a cuda solution needs at least one .cu/.cpp source")]))
    fn_name = solution.spec.entry_function
    text = "\n".join(p.read_text() for p in sources)
    if "PYBIND11_MODULE" not in text and "TORCH_LIBRARY" not in text:
        # Bind the entry function ourselves so a solution only has to write the C++ launcher.
        binding = src_root / "_kbot_binding.cpp"
        binding.write_text(_binding_source(text, fn_name))
        sources.append(binding)
    if device != "cuda" or not torch.cuda.is_available():
        nvcc = shutil.which("nvcc")
        if nvcc is None:
            raise BuildFailed(BuildResult(ok=False, language="cuda", errors=[BuildError(message="cuda solutions need nvcc and a GPU; neither is here")]))
        import sysconfig

        from torch.utils.cpp_extension import include_paths

        includes = [f"-I{p}" for p in [str(src_root), *include_paths(), sysconfig.get_paths()["include"]]]
        errors: list[BuildError] = []
        log = []
        try:
            arch = declared_arch() or "sm_90a"
        except ValueError as e:
            raise BuildFailed(BuildResult(ok=False, language="cuda", errors=[BuildError(message=str(e))])) from None
        if not declared_arch():
            log.append(f"no GPU here and {GPU_KIND_ENV} is not set: checked the sources for sm_90a")
        for src in sources:
            if src.suffix != ".cu":
                continue
            try:
                r = subprocess.run(
                    [nvcc, *gencode_flags(arch), "-std=c++17", "-c", str(src), "-o", str(workdir / (src.stem + ".o")), *includes],
                    capture_output=True,
                    text=True,
                    timeout=NVCC_CHECK_TIMEOUT_S,
                )
            except subprocess.TimeoutExpired:
                log.append(
                    f"nvcc on {src.name} did not finish within {NVCC_CHECK_TIMEOUT_S} s (torch headers are heavy on a small CPU); no compiler errors known"
                )
                continue
            log.append(r.stdout + r.stderr)
            if r.returncode != 0:
                errors += parse_compiler_output(r.stdout + r.stderr, src_root) or [BuildError(file=src.name, message=(r.stderr or r.stdout)[-2000:])]
        raise BuildFailed(
            BuildResult(
                ok=False,
                language="cuda",
                errors=errors or [BuildError(message="compiled with nvcc, but running a cuda solution needs a GPU (use --device cuda on a GPU runner)")],
                log="\n".join(log)[-8000:],
            )
        )
    from torch.utils import cpp_extension

    arch = device_arch()
    # the target is part of the module's name: a build for another GPU is never loaded from the cache
    name = "kbot_cuda_" + hashlib.sha256((arch + "".join(p.read_text() for p in sources)).encode()).hexdigest()[:12]
    build_dir = workdir / "build"
    build_dir.mkdir(exist_ok=True)
    try:
        mod = cpp_extension.load(
            name=name,
            sources=[str(s) for s in sources],
            build_directory=str(build_dir),
            extra_cuda_cflags=["-O3", *gencode_flags(arch), "-lineinfo"],
            extra_cflags=["-O3"],
            verbose=False,
        )
    except Exception as e:  # noqa: BLE001
        text = str(e)
        log_file = build_dir / "build.ninja"
        raise BuildFailed(
            BuildResult(
                ok=False,
                language="cuda",
                errors=parse_compiler_output(text, src_root) or [BuildError(message=text[-4000:])],
                log=text[-8000:] + (f"\n(ninja file: {log_file})" if log_file.exists() else ""),
            )
        ) from None
    fn = getattr(mod, fn_name, None)
    if fn is None:
        raise BuildFailed(BuildResult(ok=False, language="cuda", errors=[BuildError(message=f"compiled module has no function '{fn_name}'")]))
    return fn


def _binding_source(all_text: str, fn_name: str) -> str:
    """A pybind11 module exposing ``fn_name``; its signature is copied from the solution's declaration."""
    m = re.search(r"([\w:<>\s\*&]+?)\b" + re.escape(fn_name) + r"\s*\(([^)]*)\)\s*\{", all_text)
    if not m:
        return f"#include <torch/extension.h>\n#error \"entry function '{fn_name}' not found in the cuda sources\"\n"
    ret, args = m.group(1).strip().split("\n")[-1].strip(), m.group(2)
    # Named arguments, so the harness's keyword call (inputs and outputs by name) reaches the C++ function.
    names = [re.findall(r"[A-Za-z_]\w*", a.split("=")[0])[-1] for a in args.split(",") if a.strip()]
    py_args = "".join(f', pybind11::arg("{n}")' for n in names)
    return f'#include <torch/extension.h>\n{ret} {fn_name}({args});\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{ m.def("{fn_name}", &{fn_name}{py_args}); }}\n'
