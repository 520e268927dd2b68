"""Runtime guard: checks the worker runs around the candidate, in the candidate's own process.

In-process checks cannot be airtight (the candidate shares the interpreter), so they are built to be
hard to subvert by code that got past the static guard: everything this module relies on is bound at
import time (before any candidate is imported), comparisons are by object identity (``is`` cannot be
patched), and the rule explanations are read from YAML at import, not when a finding is made.

What the worker calls, in order (see docs/guard.md, "Calling the runtime guard"):

1. ``counter = LaunchCounter(own_paths=[src_root]); counter.install()``  (triton; before the snapshot)
2. ``snap = IntegritySnapshot.capture(modules=[...harness modules...])``  (before importing the candidate)
3. ``before = thread_count()``  (after the reference and a warm torch op, see thread_count)
4. per call: ``check_output(...)`` for every output
5. after the calls: ``snap.verify()``, ``check_threads(before, thread_count())``,
   ``kernel_launch_check(counter)``, ``roofline_floor_check(median_ms, floor_ms)``
"""

from __future__ import annotations

import builtins
import importlib
import os
import re
import site
import sys
import sysconfig
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, NamedTuple

import torch

from ..report import Finding
from .policy import load_rules

# Bound now, so a candidate that replaces the builtins or torch functions later cannot blind the checks.
_id, _type, _isinstance, _getattr, _len, _sorted, _vars = id, type, isinstance, getattr, len, sorted, vars
_Tensor = torch.Tensor
_TensorBase = torch._C.TensorBase
_gettrace, _getprofile = sys.gettrace, sys.getprofile
_len_tf_stack = getattr(torch._C, "_len_torch_function_stack", None)
_len_td_stack = getattr(torch._C, "_len_torch_dispatch_stack", None)
_WHY = dict(load_rules())

_MISSING = object()
# Wrappers the harness itself installed (LaunchCounter), by id -> the original they wrap. verify()
# accepts these in place of the original, so the counter and the snapshot work in either order.
_OUR_WRAPPERS: dict[int, tuple[Any, Any]] = {}

# What the harness depends on. Names that do not exist in this build (no CUDA, older torch) are skipped.
DEFAULT_TARGETS: tuple[str, ...] = (
    # device timing and synchronization
    "torch.cuda.synchronize", "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize", "torch.cuda.Event.query", "torch.cuda.current_stream",
    "torch.cuda.default_stream", "torch.cuda.Stream", "torch.cuda.Stream.synchronize",
    "torch.cuda.is_available", "torch.cuda.device_count", "torch.cuda.empty_cache",
    "torch.cuda.max_memory_allocated", "torch.cuda.reset_peak_memory_stats",
    "torch.cuda.nvtx", "torch.cpu.synchronize", "torch.synchronize" ,
    # comparisons and the ops a comparison is made of
    "torch.allclose", "torch.isclose", "torch.isfinite", "torch.isnan", "torch.isinf", "torch.equal",
    "torch.abs", "torch.max", "torch.maximum", "torch.where", "torch.logical_and", "torch.logical_or",
    "torch.nan_to_num", "torch.count_nonzero", "torch.sum", "torch.mean", "torch.any", "torch.all",
    "torch.testing.assert_close", "torch.testing.make_tensor",
    # input generation and allocation
    "torch.empty", "torch.empty_like", "torch.empty_strided", "torch.zeros", "torch.zeros_like", "torch.full",
    "torch.randn", "torch.rand", "torch.randint", "torch.randperm", "torch.manual_seed", "torch.Generator",
    "torch.Generator.manual_seed", "torch.no_grad", "torch.inference_mode", "torch.tensor", "torch.as_tensor",
    "torch.from_numpy", "torch.cat", "torch.stack",
    # Tensor methods the harness calls on outputs and inputs
    "torch.Tensor.__eq__", "torch.Tensor.__ne__", "torch.Tensor.__sub__", "torch.Tensor.__abs__",
    "torch.Tensor.__bool__", "torch.Tensor.__float__", "torch.Tensor.__getitem__", "torch.Tensor.__setitem__",
    "torch.Tensor.__torch_function__", "torch.Tensor.__torch_dispatch__", "torch.Tensor.__repr__",
    "torch.Tensor.clone", "torch.Tensor.copy_", "torch.Tensor.to", "torch.Tensor.float", "torch.Tensor.double",
    "torch.Tensor.abs", "torch.Tensor.sub", "torch.Tensor.max", "torch.Tensor.min", "torch.Tensor.sum",
    "torch.Tensor.mean", "torch.Tensor.item", "torch.Tensor.tolist", "torch.Tensor.all", "torch.Tensor.any",
    "torch.Tensor.isfinite", "torch.Tensor.isnan", "torch.Tensor.numel", "torch.Tensor.dim", "torch.Tensor.size",
    "torch.Tensor.stride", "torch.Tensor.data_ptr", "torch.Tensor.untyped_storage", "torch.Tensor.storage_offset",
    "torch.Tensor.contiguous", "torch.Tensor.view", "torch.Tensor.reshape", "torch.Tensor.cpu",
    "torch.Tensor.detach", "torch.Tensor.zero_", "torch.Tensor.fill_", "torch.Tensor.normal_",
    "torch.Tensor.uniform_", "torch.Tensor.random_", "torch.Tensor.is_contiguous", "torch.Tensor.element_size",
    "torch.Tensor.shape", "torch.Tensor.dtype", "torch.Tensor.device", "torch.Tensor.is_meta",
    "torch.UntypedStorage.data_ptr", "torch.UntypedStorage.nbytes",
    # clocks
    "time.perf_counter", "time.perf_counter_ns", "time.monotonic", "time.monotonic_ns", "time.time",
    "time.time_ns", "time.process_time", "time.sleep",
    # interpreter plumbing the harness and its result channel use
    "builtins.print", "builtins.len", "builtins.isinstance", "builtins.issubclass", "builtins.type",
    "builtins.id", "builtins.getattr", "builtins.setattr", "builtins.hasattr", "builtins.min", "builtins.max",
    "builtins.sum", "builtins.abs", "builtins.range", "builtins.iter", "builtins.next", "builtins.sorted",
    "builtins.any", "builtins.all", "builtins.float", "builtins.int", "builtins.bool", "builtins.str",
    "builtins.dict", "builtins.list", "builtins.tuple", "builtins.set", "builtins.repr", "builtins.open",
    "builtins.__import__", "builtins.compile", "builtins.exec", "builtins.Exception", "builtins.BaseException",
    "builtins.KeyboardInterrupt", "builtins.SystemExit",
    "json.dumps", "json.loads", "json.dump", "json.JSONEncoder.encode", "math.isfinite", "math.isnan",
    "math.sqrt", "statistics.median", "statistics.mean", "statistics.stdev", "random.Random",
    "threading.active_count", "threading.enumerate", "threading.Thread.start", "gc.collect",
    "os.getpid", "os.write", "os.fsync", "os._exit", "sys.exit", "sys.stdout", "sys.stderr",
    "sys.__stdout__", "sys.__stderr__", "sys.settrace", "sys.setprofile", "sys.gettrace",
    "importlib.import_module", "importlib.util.spec_from_file_location",
    "triton.runtime.jit.JITFunction.run", "triton.runtime.jit.KernelInterface.__getitem__",
    "triton.runtime.interpreter.InterpretedFunction.run", "triton.runtime.autotuner.Autotuner.run",
    "triton.testing.do_bench",
)

# Modules whose identity in sys.modules must not change (a candidate could swap a whole module).
DEFAULT_MODULES: tuple[str, ...] = ("torch", "torch.cuda", "torch.testing", "time", "builtins", "json", "math",
                                    "statistics", "threading", "os", "sys", "gc", "importlib", "triton",
                                    "triton.runtime.jit")


def _finding(rule: str, message: str, severity: str = "error") -> Finding:
    return Finding(rule=rule, message=message, why=_WHY.get(rule, ""), severity=severity)


def _static_get(owner: Any, attr: str) -> Any:
    """The attribute as stored, without running descriptors: classmethods and properties keep their
    identity this way, and a patched value in a subclass's __dict__ shadows the base as Python would."""
    if _isinstance(owner, type):
        for klass in owner.__mro__:
            d = _vars(klass)
            if attr in d:
                return d[attr]
        return _MISSING
    if _isinstance(owner, ModuleType):
        d = _vars(owner)
        if attr in d:
            return d[attr]
    return _getattr(owner, attr, _MISSING)


def resolve_dotted(name: str, import_missing: bool = True) -> Any:
    """Object named by ``a.b.C.meth``, walking attributes from the root module (importing a submodule
    only when ``import_missing`` and the attribute is absent); _MISSING when it does not exist."""
    parts = name.split(".")
    obj = sys.modules.get(parts[0])
    if obj is None:
        if not import_missing:
            return _MISSING
        try:
            obj = importlib.import_module(parts[0])
        except Exception:  # noqa: BLE001 — absent in this build
            return _MISSING
    for i in range(1, _len(parts)):
        nxt = _static_get(obj, parts[i])
        if nxt is _MISSING and _isinstance(obj, ModuleType) and import_missing:
            try:
                nxt = importlib.import_module(".".join(parts[: i + 1]))
            except Exception:  # noqa: BLE001
                return _MISSING
        if nxt is _MISSING:
            return _MISSING
        obj = nxt
    return obj


@dataclass
class _Entry:
    name: str
    value: Any
    ident: int


@dataclass
class IntegritySnapshot:
    """Identities of everything the harness depends on, captured before the candidate is imported."""

    entries: dict[str, _Entry] = field(default_factory=dict)
    modules: dict[str, ModuleType] = field(default_factory=dict)
    tensor_meta: type | None = None
    tensor_class_keys: dict[str, frozenset] = field(default_factory=dict)
    meta_path: tuple = ()
    path_hooks: tuple = ()
    trace: Any = None
    profile: Any = None
    thread_trace: Any = None
    thread_profile: Any = None
    tf_stack: int = 0
    td_stack: int = 0

    @classmethod
    def capture(cls, names: Iterable[str] = (), modules: Iterable[ModuleType | str] = (),
                defaults: bool = True) -> "IntegritySnapshot":
        """Record identities. ``names``: extra dotted names; ``modules``: the harness's own modules,
        whose every function/class (and the methods of classes they define) is recorded too."""
        snap = cls()
        for n in (DEFAULT_TARGETS if defaults else ()) + tuple(names):
            v = resolve_dotted(n)
            if v is not _MISSING:
                snap.entries[n] = _Entry(n, v, _id(v))
        for m in (DEFAULT_MODULES if defaults else ()):
            mod = sys.modules.get(m)
            if mod is not None:
                snap.modules[m] = mod
        for mod in modules:
            mod = importlib.import_module(mod) if _isinstance(mod, str) else mod
            snap.modules[mod.__name__] = mod
            for attr, v in _sorted(_vars(mod).items()):
                if attr.startswith("__") or not (callable(v) or _isinstance(v, ModuleType)):
                    continue
                key = f"{mod.__name__}.{attr}"
                snap.entries[key] = _Entry(key, v, _id(v))
                if _isinstance(v, type) and v.__module__ == mod.__name__:
                    for mattr, mv in _vars(v).items():
                        if callable(mv) or _isinstance(mv, (staticmethod, classmethod, property)):
                            k2 = f"{key}.{mattr}"
                            snap.entries[k2] = _Entry(k2, mv, _id(mv))
        snap.tensor_meta = _type(_Tensor)
        snap.tensor_class_keys = {"torch.Tensor": frozenset(_vars(_Tensor)), "torch._C.TensorBase": frozenset(_vars(_TensorBase))}
        snap.meta_path = tuple(sys.meta_path)
        snap.path_hooks = tuple(sys.path_hooks)
        snap.trace, snap.profile = _gettrace(), _getprofile()
        snap.thread_trace = _getattr(threading, "_trace_hook", None)
        snap.thread_profile = _getattr(threading, "_profile_hook", None)
        snap.tf_stack = _len_tf_stack() if _len_tf_stack else 0
        snap.td_stack = _len_td_stack() if _len_td_stack else 0
        return snap

    def fn(self, name: str) -> Any:
        """The object captured under ``name`` (call this, not the live attribute, after the candidate ran)."""
        e = self.entries.get(name)
        if e is None:
            raise KeyError(f"'{name}' was not captured (absent in this build, or not in the capture list)")
        return e.value

    def verify(self) -> list[Finding]:
        """Every difference from the capture, as findings (empty = nothing replaced)."""
        out: list[Finding] = []
        for name, mod in self.modules.items():
            now = sys.modules.get(name)
            if now is not mod:
                out.append(_finding("runtime-patch", f"sys.modules['{name}'] was replaced or removed"))
        for name, e in self.entries.items():
            now = resolve_dotted(name, import_missing=False)
            if now is _MISSING:
                out.append(_finding("runtime-patch", f"{name} was deleted"))
            elif now is not e.value and not _is_our_wrapper_of(now, e.value):
                out.append(_finding("runtime-patch", f"{name} was replaced (by {_describe(now)})"))
        if _type(_Tensor) is not self.tensor_meta or _getattr(_Tensor, "__class__", None) is not self.tensor_meta:
            out.append(_finding("runtime-patch", "torch.Tensor's metaclass (__class__) was replaced"))
        if torch.Tensor is not _Tensor:
            out.append(_finding("runtime-patch", "torch.Tensor itself was replaced"))
        for cname, klass in (("torch.Tensor", _Tensor), ("torch._C.TensorBase", _TensorBase)):
            before, now = self.tensor_class_keys.get(cname, frozenset()), frozenset(_vars(klass))
            added, removed = _sorted(now - before), _sorted(before - now)
            if added or removed:
                out.append(_finding("runtime-patch", f"{cname} attributes changed: added {added[:8]} removed {removed[:8]}"))
        if tuple(sys.meta_path) != self.meta_path or tuple(sys.path_hooks) != self.path_hooks:
            out.append(_finding("runtime-import-hook", "sys.meta_path or sys.path_hooks changed while the candidate ran"))
        if _gettrace() is not self.trace or _getprofile() is not self.profile:
            out.append(_finding("runtime-trace-hook", "sys.settrace/sys.setprofile hook changed while the candidate ran"))
        if (_getattr(threading, "_trace_hook", None) is not self.thread_trace
                or _getattr(threading, "_profile_hook", None) is not self.thread_profile):
            out.append(_finding("runtime-trace-hook", "threading.settrace/setprofile hook changed while the candidate ran"))
        tf = _len_tf_stack() if _len_tf_stack else 0
        td = _len_td_stack() if _len_td_stack else 0
        if tf != self.tf_stack or td != self.td_stack:
            out.append(_finding("runtime-torch-mode", f"torch function/dispatch mode stacks went from {self.tf_stack}/{self.td_stack} to {tf}/{td}"))
        return out


def _is_our_wrapper_of(now: Any, original: Any) -> bool:
    entry = _OUR_WRAPPERS.get(_id(now))
    return entry is not None and entry[0] is now and entry[1] is original


def _describe(obj: Any) -> str:
    mod = _getattr(obj, "__module__", None)
    qn = _getattr(obj, "__qualname__", None) or _type(obj).__name__
    return f"{mod}.{qn}" if mod else str(qn)


# ------------------------------------------------------------------------------------------ threads


class ThreadCount(NamedTuple):
    python: int  # threads started through threading (not the main thread's dummies for foreign threads)
    os: int | None  # the process's kernel threads (/proc/self/status), None where /proc is absent
    threads: tuple[Any, ...] = ()  # those Python threads' objects, to tell which ones are new


_Thread, _DummyThread, _enumerate = threading.Thread, getattr(threading, "_DummyThread", ()), threading.enumerate
_thread_start = _Thread.start


def _prefixes(paths: Iterable[str | Path]) -> tuple[str, ...]:
    """Folders as ``str.startswith`` prefixes of the real paths of the files under them."""
    return tuple(os.path.realpath(str(p)) + os.sep for p in paths)


def thread_count() -> ThreadCount:
    """Threads now. Take ``before`` after the reference and one warm torch op have run: torch starts its
    intra-op (OpenMP) pool and CUDA its helper threads lazily, on first use, and those are not the
    candidate's. A thread that was not started through ``threading`` but ran Python code (a CUDA, CUPTI
    or OpenMP thread calling back into Python shows up as a ``_DummyThread``) is not a Python thread
    here: the kernel-thread count covers it."""
    n = None
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    n = int(line.split()[1])
                    break
    except OSError:
        n = None
    threads = tuple(t for t in _enumerate() if not (_DummyThread and _isinstance(t, _DummyThread)))
    return ThreadCount(_len(threads), n, threads)


_KEEP_STARTED = 8  # threads kept for the finding's names (a timed run may start one per call: only counted)


class ThreadOrigins:
    """Where each Python thread was started: ``threading.Thread.start`` wrapped (before the candidate is
    imported) to record whether the candidate's own code (a file under ``own_paths``) was on the stack.
    A thread the harness, the reference or a library started with no candidate frame on the stack (an
    energy counter, a compile pool the reference woke) is not the candidate's doing; every other new
    thread is, including any whose start was not seen. The candidate's starts are also kept in order
    until ``check_threads`` takes them, so a thread that did its work and ended before the check (a
    result filled in after the timer stopped, then gone) is still seen."""

    def __init__(self, own_paths: Iterable[str | Path]):
        self.own_paths = _prefixes(own_paths)
        # thread -> (candidate's, where it was started); weak: a later thread never inherits a dead one's id
        self.sites: weakref.WeakKeyDictionary[Any, tuple[bool, str]] = weakref.WeakKeyDictionary()
        # the candidate's threads since the last take_started(), in start order: the first few kept, all counted
        self.started: list[Any] = []
        self.started_count = 0
        self._installed: tuple[Callable, Callable] | None = None

    def install(self) -> "ThreadOrigins":
        if self._installed:
            return self
        orig = _vars(_Thread)["start"]
        origins = self

        def start(thread: Any, *args: Any, **kwargs: Any) -> Any:
            site = origins._site(sys._getframe(1))
            origins.sites[thread] = site
            out = orig(thread, *args, **kwargs)  # a start that raises started nothing
            if site[0]:
                origins.started_count += 1
                if _len(origins.started) < _KEEP_STARTED:
                    origins.started.append(thread)
            return out

        _Thread.start = start
        _OUR_WRAPPERS[_id(start)] = (start, orig)
        self._installed = (start, orig)
        return self

    def uninstall(self) -> None:
        if self._installed:
            start, orig = self._installed
            if _vars(_Thread).get("start") is start:
                _Thread.start = orig
            _OUR_WRAPPERS.pop(_id(start), None)
            self._installed = None

    def _site(self, frame: Any) -> tuple[bool, str]:
        first = ""
        while frame is not None:
            f = frame.f_code.co_filename
            if not first and not f.endswith("threading.py"):
                first = f"{f}:{frame.f_lineno}"
            if self.own_paths and os.path.realpath(f).startswith(self.own_paths):
                return True, f"{f}:{frame.f_lineno}"
            frame = frame.f_back
        return False, first or "?"

    def take_started(self) -> tuple[list[Any], int]:
        """The first threads the candidate started since the last call (alive or not) and how many it
        started in all; forgets them."""
        out, n = self.started, self.started_count
        self.started, self.started_count = [], 0
        return out, n

    def candidates(self, threads: Iterable[Any]) -> list[Any]:
        """Those of ``threads`` the candidate started (or whose start was not seen)."""
        return [t for t in threads if self.sites.get(t, (True, ""))[0]]


def _describe_thread(t: Any, origins: ThreadOrigins | None) -> str:
    target = _getattr(t, "_target", None)
    what = f" running {_describe(target)}" if target is not None else ""
    where = origins.sites.get(t, (True, "an unseen place"))[1] if origins else ""
    return f"'{_getattr(t, 'name', '?')}'{what}" + (f", started at {where}" if where else "")


def check_threads(before: ThreadCount, after: ThreadCount, os_slack: int = 0,
                  origins: ThreadOrigins | None = None) -> list[Finding]:
    """Findings when the candidate left threads running, or (with ``origins``) started threads since the
    last check that have already ended. ``os_slack`` tolerates that many extra kernel threads (for a
    runtime known to start helpers lazily); Python threads get no slack, but with ``origins`` those
    started with no candidate code on the stack are not counted."""
    out = []
    new = [t for t in after.threads if not any(t is b for b in before.threads)]
    theirs: list[Any] = []
    if after.threads or before.threads:
        theirs = origins.candidates(new) if origins is not None else new
        if theirs:
            names = "; ".join(_describe_thread(t, origins) for t in theirs[:3])
            out.append(_finding("runtime-threads", f"Python threads went from {before.python} to {before.python + _len(theirs)}"
                                                   f" (new: {names})"))
    elif after.python > before.python:
        out.append(_finding("runtime-threads", f"Python threads went from {before.python} to {after.python}"))
    if origins is not None:
        kept, n = origins.take_started()
        alive = sum(1 for t in kept if any(t is a for a in theirs))  # already reported as running
        ended = [t for t in kept if not any(t is a for a in theirs)]
        if n > alive:
            names = "; ".join(_describe_thread(t, origins) for t in ended[:3])
            out.append(_finding("runtime-threads", f"the candidate started {n - alive} Python thread(s) that ended before the "
                                                   f"check (work done off the timed path){': ' + names if names else ''}"))
    if before.os is not None and after.os is not None and after.os > before.os + os_slack:
        out.append(_finding("runtime-threads", f"OS threads went from {before.os} to {after.os}"))
    return out


# ------------------------------------------------------------------------------------------ outputs


def _storage_range(t: torch.Tensor) -> tuple[int, int] | None:
    try:
        st = t.untyped_storage()
        start, n = st.data_ptr(), st.nbytes()
    except Exception:  # noqa: BLE001 — meta/fake tensors have no storage to compare
        return None
    return (start, start + n) if n else None


def check_output(name: str, value: Any, expected_shape: Iterable[int] | None, expected_dtype: torch.dtype | None,
                 inputs: dict[str, Any], device: torch.device | str | None = None,
                 previous: Iterable[torch.Tensor] = ()) -> list[Finding]:
    """Findings for one output of one call.

    ``inputs``: every tensor the output must not share storage with (the candidate's inputs; add the
    reference's outputs if they are alive). ``device``: the evaluation device (default: the device of
    the first tensor input). ``previous``: outputs of earlier calls still held by the harness
    (value-returning solutions), which a fresh output must not share storage with.
    """
    if _type(value) is not _Tensor:
        kind = _type(value)
        what = f"a subclass of torch.Tensor ({kind.__module__}.{kind.__qualname__})" if _isinstance(value, _Tensor) else f"a {kind.__module__}.{kind.__qualname__}"
        return [_finding("output-type", f"output '{name}' is {what}, not a plain torch.Tensor")]
    out: list[Finding] = []
    if _vars(value) and any(k.startswith("__") for k in _vars(value)):
        out.append(_finding("output-type", f"output '{name}' carries instance attributes {sorted(_vars(value))[:5]}"))
    if value.is_meta or value.device.type == "meta":
        return out + [_finding("output-meta", f"output '{name}' is a meta tensor (no data)")]
    if value.layout is not torch.strided:
        return out + [_finding("output-layout", f"output '{name}' has layout {value.layout}")]
    if expected_shape is not None and tuple(value.shape) != tuple(expected_shape):
        out.append(_finding("output-shape", f"output '{name}' has shape {tuple(value.shape)}, expected {tuple(expected_shape)}"))
    if expected_dtype is not None and value.dtype != expected_dtype:
        out.append(_finding("output-dtype", f"output '{name}' has dtype {value.dtype}, expected {expected_dtype}"))
    if device is None:
        device = next((v.device for v in inputs.values() if _type(v) is _Tensor), None)
    if device is not None and value.device.type != torch.device(device).type:
        out.append(_finding("output-device", f"output '{name}' is on {value.device}, expected {device}"))
    if value.numel() == 0:
        return out
    # Storage must cover every element the shape and strides reach.
    span = 1 + sum((s - 1) * abs(st) for s, st in zip(value.shape, value.stride()))
    need = (value.storage_offset() + span) * value.element_size()
    rng = _storage_range(value)
    if rng is None or rng[1] - rng[0] < need or value.data_ptr() == 0:
        have = 0 if rng is None else rng[1] - rng[0]
        out.append(_finding("output-storage", f"output '{name}' needs {need} bytes of storage, has {have}"))
        return out
    if any(st == 0 and s > 1 for s, st in zip(value.shape, value.stride())) or torch._debug_has_internal_overlap(value) == 1:
        out.append(_finding("output-overlap", f"output '{name}' has overlapping elements (strides {tuple(value.stride())})"))
    for iname, t in inputs.items():
        if _type(t) is _Tensor or _isinstance(t, _Tensor):
            r = _storage_range(t)
            if r and r[0] < rng[1] and rng[0] < r[1]:
                out.append(_finding("output-aliases-input", f"output '{name}' shares storage with input '{iname}'"))
    for i, t in enumerate(previous):
        if _isinstance(t, _Tensor):
            r = _storage_range(t)
            if r and r[0] < rng[1] and rng[0] < r[1]:
                out.append(_finding("output-reused", f"output '{name}' shares storage with the output of an earlier call (#{i})"))
                break
    return out


def status_for(findings: Iterable[Finding]):
    """The trace status a list of runtime findings calls for: shape/dtype mismatches keep their official
    statuses, anything else is a guard rejection; None when there is no error finding."""
    from ..schema import Status

    errs = [f for f in findings if f.severity == "error"]
    if not errs:
        return None
    rules = {f.rule for f in errs}
    if rules <= {"output-shape"}:
        return Status.INCORRECT_SHAPE
    if rules <= {"output-dtype"}:
        return Status.INCORRECT_DTYPE
    return Status.REJECTED


# ------------------------------------------------------------------------------------------ roofline


# roofline_floor_check lives in .floor (torch-free, so the runner's parent process can use it).
from .floor import roofline_floor_check  # noqa: E402,F401


# ------------------------------------------------------------------------------------------ launches


@dataclass(frozen=True)
class Launch:
    name: str  # kernel qualname (triton) or kernel symbol (cuda)
    module: str
    filename: str


def _library_dirs() -> tuple[str, ...]:
    dirs = set(site.getsitepackages() + [site.getusersitepackages()]) if hasattr(site, "getsitepackages") else set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            dirs.add(p)
    dirs.add(str(Path(__file__).resolve().parents[1]))  # the harness itself
    return tuple(sorted(os.path.realpath(d) + os.sep for d in dirs if d))


class LaunchCounter:
    """Counts Triton kernel launches, and which were the solution's own.

    Wraps ``JITFunction.run`` (compiled path, every launch including through autotuners) and
    ``InterpretedFunction.run`` (TRITON_INTERPRET=1) at class level, so kernels defined before or after
    ``install()`` are both seen. Warm-up compiles (``warmup=True``) are not launches.

    A kernel is the solution's own when its Python function's file is under one of ``own_paths``, or its
    module is one of ``own_modules``; with neither given, when its file is outside site-packages, the
    standard library and the harness (so library kernels never count as the candidate's).
    """

    def __init__(self, own_paths: Iterable[str | Path] = (), own_modules: Iterable[str] = ()):
        self.own_paths = _prefixes(own_paths)
        self.own_modules = frozenset(own_modules)
        self.launches: list[Launch] = []
        # Called as on_launch(kernel, args, kwargs) after each launch while set (the worker sets it for
        # its correctness calls only: harness/profile/launches.py records the launch signatures).
        self.on_launch: Callable[[Any, tuple, dict], None] | None = None
        self._originals: list[tuple[type, Callable]] = []
        self._wrappers: list[tuple[type, Callable]] = []
        self._libdirs = _library_dirs()

    # -- install / uninstall
    def _classes(self) -> list[type]:
        out = []
        for modname, cname in (("triton.runtime.jit", "JITFunction"), ("triton.runtime.interpreter", "InterpretedFunction")):
            try:
                out.append(_getattr(importlib.import_module(modname), cname))
            except Exception:  # noqa: BLE001 — triton not installed, or no interpreter in this version
                pass
        return out

    def install(self) -> "LaunchCounter":
        if self._originals:
            return self
        for klass in self._classes():
            orig = _vars(klass)["run"]
            wrapper = self._make_wrapper(orig)
            klass.run = wrapper
            _OUR_WRAPPERS[_id(wrapper)] = (wrapper, orig)
            self._originals.append((klass, orig))
            self._wrappers.append((klass, wrapper))
        return self

    def uninstall(self) -> None:
        for klass, orig in self._originals:
            klass.run = orig
        for _, w in self._wrappers:
            _OUR_WRAPPERS.pop(_id(w), None)
        self._originals.clear()
        self._wrappers.clear()

    def __enter__(self) -> "LaunchCounter":
        return self.install()

    def __exit__(self, *exc: Any) -> None:
        self.uninstall()

    @property
    def installed(self) -> bool:
        """False when a wrapper was removed or replaced after install (then counts cannot be trusted)."""
        return bool(self._wrappers) and all(_vars(k).get("run") is w for k, w in self._wrappers)

    def _make_wrapper(self, orig: Callable) -> Callable:
        counter = self

        def run(kernel, *args, **kwargs):  # noqa: ANN001 — same signature as the wrapped method
            result = orig(kernel, *args, **kwargs)
            # Counted only once it returned: a launch that raised (and was papered over by a fallback
            # in an except handler) computed nothing.
            if not kwargs.get("warmup", False):
                counter._record(kernel)
                hook = counter.on_launch
                if hook is not None:
                    try:
                        hook(kernel, args, kwargs)
                    except Exception:  # noqa: BLE001 -- a recording problem never fails the launch
                        pass
            return result

        return run

    def _record(self, kernel: Any) -> None:
        fn = _getattr(kernel, "fn", None)
        code = _getattr(fn, "__code__", None)
        self.launches.append(Launch(
            name=_getattr(fn, "__qualname__", "?"),
            module=_getattr(fn, "__module__", "?") or "?",
            filename=os.path.realpath(code.co_filename) if code is not None else "?",
        ))

    # -- queries
    def is_own(self, launch: Launch) -> bool:
        if self.own_paths or self.own_modules:
            return launch.module in self.own_modules or launch.filename.startswith(self.own_paths)
        return launch.filename != "?" and not launch.filename.startswith(self._libdirs)

    @property
    def count(self) -> int:
        """Launches of the solution's own kernels so far."""
        return sum(1 for x in self.launches if self.is_own(x))

    @property
    def total(self) -> int:
        return _len(self.launches)

    def reset(self) -> None:
        self.launches.clear()


class CudaLaunchCounter:
    """Counts CUDA kernels launched in a region and the streams its GPU work went to; GPU only.

    Through CUPTI's callback API (``cupti_callbacks``: ~14 ms to set up) when libcupti can be loaded,
    else through the torch profiler (CUPTI activity tracing: 4-5 s to start on the H200). ``backend``
    says which one ran. ``own_names``: the solution's kernel names (``__global__`` functions in its
    sources; see ``kernel_names_in``). A recorded kernel is the solution's own when its (mangled or
    demangled) name contains one of them. On a machine without CUDA ``available`` is False and nothing
    is recorded: the check then reports nothing rather than guessing.
    """

    def __init__(self, own_names: Iterable[str] = (), *, backend: str = "auto"):
        self.own_names = tuple(n for n in own_names if n)
        self.kernels: list[str] = []
        self.streams: set[int] = set()  # the streams the region's GPU work was enqueued on
        self.unparsed: list[str] = []  # enqueuing driver calls whose stream could not be read (callbacks only)
        self.unreadable_launches: list[str] = []  # kernel launches among them: GPU work on an unknown stream
        self.expected_stream: int | None = None  # the caller's stream (callbacks only: handles, not profiler ids)
        self.blinded = False  # the harness's own canary launch was not seen: the callbacks were switched off
        self.errors: list[str] = []
        self.available = torch.cuda.is_available()
        self.backend: str | None = None
        self._want = backend
        self._prof = None
        self._sub = None

    def __enter__(self) -> "CudaLaunchCounter":
        if not self.available:
            return self
        from . import cupti_callbacks

        self._sub = cupti_callbacks.subscription() if self._want in ("auto", "callbacks") else None
        if self._sub is not None:
            handle = int(torch.cuda.current_stream().cuda_stream)
            self.expected_stream = 0 if handle == 1 else handle  # CU_STREAM_LEGACY is the NULL stream
            self._canary = torch.zeros(1, device="cuda")
            torch.cuda.synchronize()  # work enqueued before the region is not the region's
            self._sub.start()
            self.backend = "cupti-callbacks"
            return self
        if self._want == "callbacks":
            raise RuntimeError("CUPTI callbacks are not available in this process")
        from torch.profiler import ProfilerActivity, profile

        self._prof = profile(activities=[ProfilerActivity.CUDA])
        self._prof.__enter__()
        self.backend = "torch-profiler"
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._sub is not None:
            rec = self._sub.records
            try:
                torch.cuda.synchronize()
                # A launch of the harness's own on the caller's stream must be seen: if it is not, the
                # candidate switched the callbacks off (cuptiFinalize, an unsubscribe) and saw nothing.
                n0 = len(rec.kernels)
                self._canary.add_(1)
                torch.cuda.synchronize()
                self.blinded = len(rec.kernels) == n0
                del rec.kernels[n0:]
            finally:
                self._sub.stop()
            self.kernels += rec.kernels
            self.streams |= rec.streams
            self.unparsed += rec.unparsed
            self.unreadable_launches += rec.unreadable_launches
            self.errors += rec.errors
            self._sub = None
            return
        if self._prof is None:
            return
        torch.cuda.synchronize()
        self._prof.__exit__(*exc)
        from torch.autograd import DeviceType

        for ev in self._prof.events():
            if _getattr(ev, "device_type", None) == DeviceType.CUDA:
                self.kernels.append(ev.name)
                sid = _getattr(ev, "device_resource_id", None)
                if sid is not None:
                    self.streams.add(int(sid))
        self._prof = None

    @property
    def count(self) -> int:
        return sum(1 for k in self.kernels if any(n in k for n in self.own_names))

    @property
    def total(self) -> int:
        return _len(self.kernels)


def side_stream_check(counter: CudaLaunchCounter) -> list[Finding]:
    """Findings when the GPU work of one observed call left the caller's stream (GPU only): work on a
    stream other than the caller's (callbacks know the caller's stream handle; the profiler backend
    only its ids, so there: more than one stream), a launch whose stream could not be read, or an
    observer the candidate switched off.

    Wrap exactly the candidate's call (not the harness's L2 flush or input refresh) in the counter."""
    if not counter.available:
        return []
    out = []
    if counter.blinded:
        out.append(_finding("runtime-observer-blinded", "the observer's own launch after the call was not seen: the CUPTI callbacks were switched off during the call"))
    if counter.expected_stream is not None:
        other = sorted(s for s in counter.streams if s != counter.expected_stream)
        if other:
            out.append(_finding("runtime-side-stream", f"the call's GPU work went to stream(s) {[hex(s) for s in other]}, not the caller's ({hex(counter.expected_stream)})"))
    elif _len(counter.streams) > 1:
        out.append(_finding("runtime-side-stream", f"the call's GPU work ran on {_len(counter.streams)} streams {sorted(counter.streams)}"))
    if counter.unreadable_launches:
        out.append(_finding("runtime-side-stream", f"the call launched work through {sorted(set(counter.unreadable_launches))[:3]}, whose stream the observer cannot read"))
    return out


_GLOBAL_FN = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:[\w:<>,\s\*&]+?)\s+(\w+)\s*\(")


def kernel_names_in(sources: Iterable[str]) -> list[str]:
    """Names of ``__global__`` functions in C/CUDA source texts (also inside Python strings)."""
    names: list[str] = []
    for text in sources:
        for m in _GLOBAL_FN.finditer(text):
            if m.group(1) not in names:
                names.append(m.group(1))
    return names


def kernel_launch_check(counter: LaunchCounter | CudaLaunchCounter) -> list[Finding]:
    """A finding when no kernel of the solution's own was launched (or the counter was tampered with)."""
    if _isinstance(counter, CudaLaunchCounter):
        if not counter.available:
            return []
        if counter.count == 0:
            seen = ", ".join(counter.kernels[:5]) or "none"
            return [_finding("no-own-kernel", f"no kernel named like the solution's {list(counter.own_names)[:5]} ran (kernels seen: {seen})")]
        return []
    if counter._wrappers and not counter.installed:
        return [_finding("runtime-patch", "the Triton launch counter was removed or replaced while the candidate ran")]
    if counter.count == 0:
        other = sorted({f"{x.module}.{x.name}" for x in counter.launches})[:5]
        return [_finding("no-own-kernel", "no Triton kernel of the solution's own was launched"
                                          + (f" (only library kernels: {other})" if other else ""))]
    return []


__all__ = [
    "IntegritySnapshot", "ThreadCount", "ThreadOrigins", "thread_count", "check_threads", "check_output", "status_for",
    "roofline_floor_check", "LaunchCounter", "CudaLaunchCounter", "Launch", "kernel_names_in",
    "kernel_launch_check", "side_stream_check", "resolve_dotted", "DEFAULT_TARGETS",
]
