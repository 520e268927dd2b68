"""How long each timed call kept the GPU busy, from CUPTI activity records: the kernel-time figure that
sits beside the event-timed latency in every GPU report.

Why: an event-timed median carries a per-process offset of a few hundred ns. On the H200 an empty
kernel between two events reads ~3.36 or ~3.50 µs depending on the process (scripts/gpu/launch_floor.py),
so a 5 µs kernel's event median moves 3-20 % between processes. CUPTI stamps each kernel's own start
and end on the GPU; the shipped rmsnorm kernel's CUPTI medians agreed across processes within 0-2 ticks
of the 32 ns clock, and within 0.85 % from 512 rows up (docs/measurements.md, recordings 16-20).

How a record finds its call: by time, between two kernels of the harness's own. Every timed call sits
on the GPU between its hold (a spin kernel of many cycles, already there for the event protocol) and a
short spin kernel the timer enqueues right after the end event, all on one stream, so the GPU runs them
in that order. A call's GPU time is the span from the first start to the last end of the operations
(kernels, copies, fills) that start inside its window, gaps included. Only kernel, memcpy and memset
records are enabled: H200 runs with these alone left event times where they were, while adding
driver/runtime API records and external correlation ids (the first design) slowed every timed
iteration ~3x and moved few-µs event medians by 5-8 % (docs/measurements.md, recording 15).

What withholds the figure instead of letting it come out small: spin kernels that do not pair up one
hold and one marker per call (a candidate launching the same spin kernel), a call whose window holds no
operation, an operation CUPTI could not time, work on another stream outside the windows (started
while a hold spun and joined inside a window, it would be hidden), an operation still running when the
marker started, a record layout this module cannot read. The parent checks the figure once more
against the event time and the physical floor (harness.runner.check_kernel_time).

Record layouts (cupti_activity.h, unchanged from CUDA 11 to 13 where read here): kernel records
(CUpti_ActivityKernel4..N) start @16, end @24, streamId @48, correlationId @92, name @104; memcpy and
memset records start @16, end @24, streamId @40, correlationId @44. ``scripts/gpu/cupti_timing.py``
checked the kernel prefix on the H200 against grid sizes and names it launched. Nothing here needs
torch.
"""

from __future__ import annotations

import atexit
import ctypes
import struct
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

KIND_MEMCPY, KIND_MEMSET, KIND_KERNEL = 1, 2, 10
ENABLED_KINDS = (KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET)
# One unpack per record (reading ~10k records per candidate is the tracer's main host cost). Kernel:
# start @16, end @24, streamId @48, correlationId @92, name @104 (112 bytes). Memcpy/memset: start @16,
# end @24, streamId @40, correlationId @44 (48 bytes).
_KERNEL = struct.Struct("<I12xQQ16xI40xI8xQ")
_COPY = struct.Struct("<I12xQQ8xII")
_LAYOUT = {KIND_KERNEL: _KERNEL, KIND_MEMCPY: _COPY, KIND_MEMSET: _COPY}
# Large enough for a whole timed run (5000 iterations x 2 callables x ~7 records x <=144 bytes), so
# buffers come back when the timer flushes, on its own thread, not from CUPTI's thread mid-run.
_BUFFER_BYTES = 16 << 20


class GpuOp(NamedTuple):
    kind: int
    start_ns: int
    end_ns: int
    stream: int
    correlation: int
    name: str = ""  # kernels only


def parse_record(raw: bytes, read_name: Callable[[int], str] | None = None) -> GpuOp | None:
    """One activity record (its leading bytes): a GPU operation, or None for kinds this module does not
    read. ``read_name`` turns a kernel record's name pointer into text (not called for a NULL one)."""
    return parse_at(raw, 0, read_name)


def parse_at(buf: bytes, off: int, read_name: Callable[[int], str] | None = None) -> GpuOp | None:
    """``parse_record`` for the record at byte ``off`` of ``buf`` (a whole CUPTI buffer, copied once)."""
    if len(buf) - off < 4:
        raise ValueError(f"activity record of {len(buf) - off} bytes has no kind")
    kind = int.from_bytes(buf[off:off + 4], "little")
    layout = _LAYOUT.get(kind)
    if layout is None:
        return None
    if len(buf) - off < layout.size:
        raise ValueError(f"activity record of kind {kind} is {len(buf) - off} bytes, shorter than the {layout.size} read")
    if layout is _KERNEL:
        _, start, end, stream, corr, ptr = layout.unpack_from(buf, off)
        # The name pointer is followed only in a record that reads like one (stamped, start <= end): a
        # layout this module got wrong must cost the figure, never a read through a garbage pointer.
        sane = ptr and read_name is not None and 0 < start <= end
        return GpuOp(kind, start, end, stream, corr, read_name(ptr) if sane else "")
    _, start, end, stream, corr = layout.unpack_from(buf, off)
    return GpuOp(kind, start, end, stream, corr)


def record_bytes(kind: int) -> int:
    """How many leading bytes of a record of ``kind`` ``parse_record`` reads (4 for kinds it skips)."""
    layout = _LAYOUT.get(kind)
    return layout.size if layout is not None else 4


@dataclass
class Windows:
    """Each call's GPU span in ns (None: nothing ran in its window), in the order the calls were enqueued,
    and what makes the whole set untrustworthy (empty when it can be used)."""

    spans: list[int | None] = field(default_factory=list)
    over: list[bool] = field(default_factory=list)  # an operation of the call was still running at its marker
    problem: str = ""


def attribute(ops: list[GpuOp], spin_name: str, calls: int) -> Windows:
    """Split a timed run's operations into its ``calls`` windows, each opened by the end of a hold and
    closed by the start of the marker after it (both kernels named ``spin_name``)."""
    ops = sorted(ops, key=lambda o: (o.start_ns, o.end_ns))
    unstamped = sum(1 for o in ops if o.start_ns == 0 or o.end_ns < o.start_ns)
    if unstamped:
        return Windows(problem=f"{unstamped} operations CUPTI could not time")
    spins = [o for o in ops if o.kind == KIND_KERNEL and o.name == spin_name]
    if len(spins) != 2 * calls:
        return Windows(problem=f"{len(spins)} spin kernels for {calls} timed calls (expected a hold and a marker each)")
    if not spins:
        return Windows()
    stream = spins[0].stream  # the caller's stream: the harness's own work all runs there
    if any(sp.stream != stream for sp in spins):
        return Windows(problem="the timer's spin kernels ran on more than one stream")
    out = Windows()
    rest = [o for o in ops if not (o.kind == KIND_KERNEL and o.name == spin_name)]

    def outside(o: GpuOp) -> str:
        # Between windows only the harness works, on the caller's stream. Work elsewhere there (started
        # while a hold spun, say, and joined by a tiny kernel inside the window) would be hidden.
        return f"GPU work on stream {o.stream} outside the timed calls' windows" if o.stream != stream else ""

    i = 0
    for c in range(calls):
        hold, marker = spins[2 * c], spins[2 * c + 1]
        if marker.start_ns < hold.end_ns:
            return Windows(problem=f"call {c}: its marker started before its hold ended (spin kernels out of order)")
        while i < len(rest) and rest[i].start_ns < hold.end_ns:
            if outside(rest[i]):
                return Windows(problem=outside(rest[i]))
            i += 1
        mine = []
        while i < len(rest) and rest[i].start_ns <= marker.start_ns:
            mine.append(rest[i])
            i += 1
        if mine:
            out.spans.append(max(o.end_ns for o in mine) - mine[0].start_ns)
            out.over.append(any(o.end_ns > marker.start_ns for o in mine))
        else:
            out.spans.append(None)
            out.over.append(False)
    for o in rest[i:]:
        if outside(o):
            return Windows(problem=outside(o))
    return out


def record_sizes(data: bytes, offsets: list[int]) -> dict[int, int] | None:
    """Bytes from each record to the next, by kind, from the offsets CUPTI's own walk gave (the last
    record runs to the end of the data); None when a kind's records are not all one size."""
    sizes: dict[int, int] = {}
    for a, b in zip(offsets, offsets[1:] + [len(data)]):
        kind = int.from_bytes(data[a:a + 4], "little")
        if sizes.setdefault(kind, b - a) != b - a:
            return None
    return sizes or None


def walk(data: bytes, sizes: dict[int, int], read_name: Callable[[int], str] | None = None) -> list[GpuOp] | None:
    """The operations in a buffer walked with known record sizes; None when a kind is unknown or the
    walk does not end exactly at the end of the data (then CUPTI's walk is used)."""
    offsets = []
    off, end = 0, len(data)
    while off < end:  # the whole walk must add up before any record is read (and a name followed)
        kind = int.from_bytes(data[off:off + 4], "little")
        step = sizes.get(kind)
        if step is None or step <= 0 or off + record_bytes(kind) > end:
            return None
        offsets.append(off)
        off += step
    if off != end:
        return None
    ops = []
    for off in offsets:
        op = parse_at(data, off, read_name)
        if op is not None:
            ops.append(op)
    return ops


_REQUESTED = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.POINTER(ctypes.c_uint8)), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t))
_COMPLETED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t, ctypes.c_size_t)


def _read_name(ptr: int) -> str:
    return ctypes.string_at(ptr).decode(errors="replace")


class Tracer:
    """The process's CUPTI activity client. ``start``/``stop`` bracket a timed run; ``collect`` flushes
    and returns the operations recorded since the last call.

    Buffers are ctypes arrays kept alive in ``_buffers`` until CUPTI hands them back. The completion
    callback may run on a CUPTI thread while the timer enqueues work: it only files the buffer, and
    ``collect`` (on the timer's thread, after a synchronize) reads it."""

    def __init__(self, lib: Any):
        self.lib = lib
        self._buffers: dict[int, Any] = {}
        self._done_buffers: list[tuple[Any, int]] = []
        self._lock = threading.Lock()
        self.errors: list[str] = []
        self.spin_name: str | None = None  # the hold's kernel name, learnt by the timer on first use
        self._names: dict[int, str] = {}  # CUPTI's name strings by address: one read per kernel, not per record
        self._sizes: dict[int, int] | None = None  # bytes from one record to the next, by kind (learnt)
        self._req = _REQUESTED(self._on_request)  # kept referenced: CUPTI holds the bare pointers
        self._done = _COMPLETED(self._on_complete)
        fn = self.lib.cuptiActivityGetNextRecord
        if hasattr(fn, "argtypes"):  # a ctypes function (tests pass Python stand-ins)
            fn.argtypes = [ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t, ctypes.POINTER(ctypes.POINTER(ctypes.c_uint8))]
        rc = self.lib.cuptiActivityRegisterCallbacks(self._req, self._done)
        if rc != 0:
            raise OSError(f"cuptiActivityRegisterCallbacks returned CUPTI error {rc}")

    def start(self) -> None:
        self.collect()  # drop anything left from outside a timed run
        for k in ENABLED_KINDS:
            rc = self.lib.cuptiActivityEnable(k)
            if rc != 0:
                self.stop()
                raise OSError(f"cuptiActivityEnable({k}) returned CUPTI error {rc}")

    def stop(self) -> None:
        for k in ENABLED_KINDS:
            self.lib.cuptiActivityDisable(k)

    def close(self) -> None:
        try:
            self.stop()
            self.lib.cuptiActivityFlushAll(1)  # CUPTI_ACTIVITY_FLAG_FLUSH_FORCED
            with self._lock:
                self._done_buffers = []  # (the arrays stay referenced: CUPTI is done with them only at exit)
        except Exception:  # noqa: BLE001 — at exit: nothing left to report to
            pass

    def collect(self) -> list[GpuOp]:
        """Everything CUPTI has finished recording (call after a device synchronize)."""
        self.lib.cuptiActivityFlushAll(0)
        with self._lock:
            done, self._done_buffers = self._done_buffers, []
        ops: list[GpuOp] = []
        for buf, valid in done:
            try:
                ops.extend(self._read(buf, valid))
            except Exception as e:  # noqa: BLE001 — a layout we cannot read: the run says so
                self.errors.append(f"{type(e).__name__}: {e}")
            finally:
                self._buffers.pop(ctypes.addressof(buf), None)
        return ops

    def _read(self, buf: Any, valid: int) -> list[GpuOp]:
        """The operations in one completed buffer, copied out once. The first buffer is walked with
        ``cuptiActivityGetNextRecord`` (record sizes are CUPTI's business), which also shows how far
        apart records of each kind sit; later buffers are walked with those sizes in Python (a ctypes
        call per record was half the tracer's cost), and go back to CUPTI's walk whenever a kind is
        unknown or the walk does not end exactly at the buffer's end."""
        data = ctypes.string_at(ctypes.addressof(buf), valid)
        if self._sizes:
            ops = walk(data, self._sizes, self._name)
            if ops is not None:
                return ops
        ops, sizes = self._read_with_cupti(buf, data)
        if sizes:
            merged = {**(self._sizes or {}), **sizes}
            self._sizes = merged if all((self._sizes or {}).get(k, v) == v for k, v in sizes.items()) else sizes
        return ops

    def _read_with_cupti(self, buf: Any, data: bytes) -> tuple[list[GpuOp], dict[int, int] | None]:
        ops = []
        base = ctypes.addressof(buf)
        rec = ctypes.POINTER(ctypes.c_uint8)()
        start = ctypes.cast(buf, ctypes.POINTER(ctypes.c_uint8))
        size = ctypes.c_size_t(len(data))
        ref = ctypes.byref(rec)
        next_record = self.lib.cuptiActivityGetNextRecord
        offsets = []
        while next_record(start, size, ref) == 0:
            off = ctypes.cast(rec, ctypes.c_void_p).value - base
            offsets.append(off)
            op = parse_at(data, off, self._name)
            if op is not None:
                ops.append(op)
        return ops, record_sizes(data, offsets)

    def _name(self, ptr: int) -> str:
        name = self._names.get(ptr)
        if name is None:
            name = self._names[ptr] = _read_name(ptr)
        return name

    def _on_request(self, buf: Any, size: Any, max_records: Any) -> None:
        b = (ctypes.c_uint64 * (_BUFFER_BYTES // 8))()  # 8-byte aligned, as CUPTI requires
        self._buffers[ctypes.addressof(b)] = b
        buf[0] = ctypes.cast(b, ctypes.POINTER(ctypes.c_uint8))
        size[0] = ctypes.sizeof(b)
        max_records[0] = 0

    def _on_complete(self, ctx: Any, stream: int, buf: Any, size: int, valid: int) -> None:
        b = self._buffers.get(ctypes.cast(buf, ctypes.c_void_p).value or 0)
        if b is None:  # not one of ours: nothing to read or keep
            return
        with self._lock:
            self._done_buffers.append((b, valid))


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
            t = Tracer(ctypes.CDLL(path))
            # Once now, so whatever CUPTI starts on first use (a thread) exists before the guard counts
            # the process's threads; and at exit, recording off and buffers drained while Python still
            # runs, so CUPTI's own teardown has nothing to hand to a finalizing interpreter.
            t.start()
            t.stop()
            atexit.register(t.close)
            _TRACER.append(t)
        except (OSError, AttributeError) as e:
            _TRACER.append(None)
            _WHY_NOT.append(f"{type(e).__name__}: {e}")
    return _TRACER[0]


def unavailable() -> str:
    return _WHY_NOT[0] if _WHY_NOT else ""
