"""How long each timed call kept the GPU busy, from CUPTI activity records: the kernel-time figure that
sits beside the event-timed latency in every GPU report.

Why: an event-timed median carries a per-process offset of a few hundred ns. On the H200 an empty
kernel between two events reads ~3.36 or ~3.50 µs depending on the process (scripts/gpu/launch_floor.py),
so a 5 µs kernel's event median moves 5-20 % between processes. CUPTI stamps each kernel's own start
and end on the GPU; the same rmsnorm kernels' CUPTI medians reproduced within 0-0.3 % across processes
where their event medians did not (scripts/gpu/cupti_timing.py, docs/measurements.md).

How a record finds its call: around each timed call the timer pushes an id of its own
(``cuptiActivityPushExternalCorrelationId``, kind CUSTOM2; kineto uses CUSTOM0/1). CUPTI then writes,
before each driver or runtime API record made on that thread, an external-correlation record linking
our id to CUPTI's correlation id, which the kernel, memcpy and memset records carry. A call's GPU time
is the span from the start of its first operation to the end of its last, gaps included; work a call
left on another thread is not ours to attribute, so any operation with no id during a timed run makes
the figure withheld (``foreign``), never quietly smaller.

Record layouts (cupti_activity.h, unchanged from CUDA 11 to 13 where read here): kernel records
(CUpti_ActivityKernel4..N) start @16, end @24, streamId @48, correlationId @92; memcpy and memset
records start @16, end @24, streamId @40, correlationId @44; external correlation externalKind @4,
externalId @8, correlationId @16. ``scripts/gpu/cupti_timing.py`` checked the kernel prefix on the
H200 against grid sizes and names it launched. Nothing here needs torch.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable

KIND_MEMCPY, KIND_MEMSET, KIND_DRIVER, KIND_RUNTIME, KIND_KERNEL, KIND_EXTERNAL = 1, 2, 4, 5, 10, 39
EXTERNAL_KIND = 5  # CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2
ENABLED_KINDS = (KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET, KIND_DRIVER, KIND_RUNTIME, KIND_EXTERNAL)
# kind -> (start, end, streamId, correlationId offsets, bytes needed)
_OP_LAYOUT = {KIND_KERNEL: (16, 24, 48, 92, 96), KIND_MEMCPY: (16, 24, 40, 44, 48), KIND_MEMSET: (16, 24, 40, 44, 48)}
_EXT_BYTES = 20
_BUFFER_BYTES = 4 << 20


@dataclass(frozen=True)
class GpuOp:
    kind: int
    start_ns: int
    end_ns: int
    stream: int
    correlation: int


@dataclass(frozen=True)
class External:
    correlation: int
    external_id: int


def parse_record(raw: bytes) -> GpuOp | External | None:
    """One activity record (its leading bytes): a GPU operation, an external-correlation link of ours
    (CUSTOM2), or None for kinds this module does not read (API records, other tools' links)."""
    if len(raw) < 4:
        raise ValueError(f"activity record of {len(raw)} bytes has no kind")
    kind = struct.unpack_from("<I", raw, 0)[0]
    if kind in _OP_LAYOUT:
        s, e, st, c, need = _OP_LAYOUT[kind]
        if len(raw) < need:
            raise ValueError(f"activity record of kind {kind} is {len(raw)} bytes, shorter than the {need} read")
        u64 = struct.unpack_from
        return GpuOp(kind, u64("<Q", raw, s)[0], u64("<Q", raw, e)[0], u64("<I", raw, st)[0], u64("<I", raw, c)[0])
    if kind == KIND_EXTERNAL:
        if len(raw) < _EXT_BYTES:
            raise ValueError(f"external-correlation record of {len(raw)} bytes is shorter than {_EXT_BYTES}")
        ext_kind, ext_id, corr = struct.unpack_from("<IQI", raw, 4)
        return External(corr, ext_id) if ext_kind == EXTERNAL_KIND else None
    return None


def record_bytes(kind: int) -> int:
    """How many leading bytes of a record of ``kind`` ``parse_record`` reads (4 for kinds it skips)."""
    if kind in _OP_LAYOUT:
        return _OP_LAYOUT[kind][4]
    return _EXT_BYTES if kind == KIND_EXTERNAL else 4


@dataclass
class Attribution:
    """Where a batch of records went: per id of ours, (first start ns, last end ns, operations)."""

    spans: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    foreign: int = 0  # operations linked to no id of ours (another thread's work)
    unstamped: int = 0  # operations CUPTI could not time (start and end 0)


def attribute(ops: Iterable[GpuOp], links: dict[int, int]) -> Attribution:
    """Group GPU operations by the id of ours that their CUPTI correlation id links to (``links``:
    correlation id -> our id)."""
    out = Attribution()
    for op in ops:
        ours = links.get(op.correlation)
        if ours is None:
            out.foreign += 1
            continue
        if op.start_ns == 0 and op.end_ns == 0:
            out.unstamped += 1
            continue
        first, last, n = out.spans.get(ours, (op.start_ns, op.end_ns, 0))
        out.spans[ours] = (min(first, op.start_ns), max(last, op.end_ns), n + 1)
    return out


_REQUESTED = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.POINTER(ctypes.c_uint8)), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t))
_COMPLETED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t, ctypes.c_size_t)


class Tracer:
    """The process's CUPTI activity client. ``start``/``stop`` bracket a timed run; ``push``/``pop``
    bracket what belongs to one id; ``collect`` flushes and returns what arrived since the last call.

    Buffers are ctypes arrays kept alive in ``_buffers`` until CUPTI hands them back; the completion
    callback may run on a CUPTI thread, hence the lock."""

    def __init__(self, lib: Any):
        self.lib = lib
        self._buffers: dict[int, Any] = {}
        self._ops: list[GpuOp] = []
        self._links: dict[int, int] = {}
        self._lock = threading.Lock()
        self.errors: list[str] = []
        self._req = _REQUESTED(self._on_request)  # kept referenced: CUPTI holds the bare pointers
        self._done = _COMPLETED(self._on_complete)
        for name, types in (("cuptiActivityPushExternalCorrelationId", [ctypes.c_uint32, ctypes.c_uint64]),
                            ("cuptiActivityPopExternalCorrelationId", [ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint64)]),
                            ("cuptiActivityGetNextRecord", [ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t, ctypes.POINTER(ctypes.POINTER(ctypes.c_uint8))])):
            fn = getattr(self.lib, name)
            if hasattr(fn, "argtypes"):  # a ctypes function (tests pass Python stand-ins)
                fn.argtypes = types
        self._check("cuptiActivityRegisterCallbacks", self.lib.cuptiActivityRegisterCallbacks(self._req, self._done))
        self._popped = ctypes.c_uint64()
        self.active = False

    def _check(self, what: str, rc: int) -> None:
        if rc != 0:
            raise OSError(f"{what} returned CUPTI error {rc}")

    def start(self) -> None:
        self.collect()  # drop anything left from outside a timed run
        for k in ENABLED_KINDS:
            self._check(f"cuptiActivityEnable({k})", self.lib.cuptiActivityEnable(k))
        self.active = True

    def stop(self) -> None:
        self.active = False
        for k in ENABLED_KINDS:
            self.lib.cuptiActivityDisable(k)

    def push(self, ours: int) -> None:
        self.lib.cuptiActivityPushExternalCorrelationId(EXTERNAL_KIND, ours)

    def pop(self) -> None:
        self.lib.cuptiActivityPopExternalCorrelationId(EXTERNAL_KIND, ctypes.byref(self._popped))

    def collect(self) -> tuple[list[GpuOp], dict[int, int]]:
        """Everything CUPTI has finished recording (call after a device synchronize)."""
        self.lib.cuptiActivityFlushAll(0)
        with self._lock:
            ops, links = self._ops, self._links
            self._ops, self._links = [], {}
        return ops, links

    def _on_request(self, buf: Any, size: Any, max_records: Any) -> None:
        b = (ctypes.c_uint64 * (_BUFFER_BYTES // 8))()  # 8-byte aligned, as CUPTI requires
        self._buffers[ctypes.addressof(b)] = b
        buf[0] = ctypes.cast(b, ctypes.POINTER(ctypes.c_uint8))
        size[0] = ctypes.sizeof(b)
        max_records[0] = 0

    def _on_complete(self, ctx: Any, stream: int, buf: Any, size: int, valid: int) -> None:
        try:
            ops, links = [], {}
            rec = ctypes.POINTER(ctypes.c_uint8)()
            while self.lib.cuptiActivityGetNextRecord(buf, ctypes.c_size_t(valid), ctypes.byref(rec)) == 0:
                addr = ctypes.addressof(rec.contents)
                kind = ctypes.c_uint32.from_address(addr).value
                n = record_bytes(kind)
                if n == 4:
                    continue
                r = parse_record(ctypes.string_at(addr, n))
                if isinstance(r, GpuOp):
                    ops.append(r)
                elif isinstance(r, External):
                    links[r.correlation] = r.external_id
            with self._lock:
                self._ops.extend(ops)
                self._links.update(links)
        except Exception as e:  # noqa: BLE001 — never raise into CUPTI's thread; the run sees the error
            self.errors.append(f"{type(e).__name__}: {e}")
        finally:
            self._buffers.pop(ctypes.cast(buf, ctypes.c_void_p).value, None)


_TRACER: list[Tracer | None] = []
_WHY_NOT: list[str] = []


def tracer() -> Tracer | None:
    """The process's tracer, made on first use (before any candidate is imported: the library must be
    the one torch loaded, not a look-alike a candidate brought in). None when CUPTI is unavailable;
    ``unavailable()`` says why."""
    if not _TRACER:
        try:
            from .guard.cupti_callbacks import find_library

            path = find_library()
            if path is None:
                raise OSError("libcupti not found")
            _TRACER.append(Tracer(ctypes.CDLL(path)))
        except (OSError, AttributeError) as e:
            _TRACER.append(None)
            _WHY_NOT.append(f"{type(e).__name__}: {e}")
    return _TRACER[0]


def unavailable() -> str:
    return _WHY_NOT[0] if _WHY_NOT else ""
