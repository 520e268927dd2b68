"""Which kernels, copies and fills a region of code enqueues, and on which streams: CUPTI's callback API
through ctypes, for the guard's observer.

Why not the torch profiler: starting it costs 4.4-5.3 s on the H200 (kineto sets up CUPTI's activity
tracing), once per observed candidate, and that was the long pole of every GPU evaluation. Subscribing
to CUPTI callbacks costs ~14 ms and enabling them nothing measurable (scripts/gpu/observer_cost.py,
docs/measurements.md). A callback sees each driver call that enqueues work, with its arguments; it is
recorded at the call's exit when the call succeeded: the stream is read from the call's parameter
struct and, for launches, CUPTI names the kernel. Runtime-API launches (``cudaLaunchKernel``) reach the
driver and are seen there too.

What it does not see by name: kernels inside a CUDA graph (the launch is one ``cuGraphLaunch``, whose
stream is still read). Calls that enqueue work but are not in ``STREAM_ARG`` are listed in
``unparsed`` rather than guessed at.

Only one CUPTI subscriber may exist per process, so the subscription is made once and kept (the
observer makes it before the candidate is imported: a candidate loaded first could otherwise subscribe
itself, or put a look-alike libcupti in the process for ``find_library`` to pick up); regions enable
and disable the callbacks around them. Nothing here needs torch.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
from dataclasses import dataclass, field
from typing import Any

DOMAIN_DRIVER, DOMAIN_RUNTIME = 1, 2
_SITE_ENTER, _SITE_EXIT = 0, 1
_CU_STREAM_LEGACY = 0x1  # the legacy default stream by name: the same stream as NULL (from a non-_ptsz call)
CU_STREAM_PER_THREAD = 0x2  # the per-thread default stream: what NULL means in a _ptsz/_ptds call


class CallbackData(ctypes.Structure):
    """``CUpti_CallbackData`` (cupti_callbacks.h), unchanged since CUDA 4."""

    _fields_ = [("callbackSite", ctypes.c_int), ("functionName", ctypes.c_char_p), ("functionParams", ctypes.c_void_p),
                ("functionReturnValue", ctypes.c_void_p), ("symbolName", ctypes.c_char_p), ("context", ctypes.c_void_p),
                ("contextUid", ctypes.c_uint32), ("correlationData", ctypes.c_void_p), ("correlationId", ctypes.c_uint32)]


# Byte offset of the ``hStream`` argument in each driver call's parameter struct: the C arguments in
# order, each naturally aligned (pointers and size_t 8 bytes, unsigned int 4, unsigned char padded to
# the next 8-byte argument). ("config", k): the stream sits at byte k of the CUlaunchConfig that the
# first argument points to. Names are matched without their _v2/_ptsz/_ptds suffixes.
STREAM_ARG: dict[str, int | tuple[str, int]] = {
    "cuLaunchKernel": 40,  # f, gridDim x3, blockDim x3, sharedMemBytes (7 x 4 bytes, padded), hStream
    "cuLaunchCooperativeKernel": 40,
    "cuLaunchKernelEx": ("config", 32),  # CUlaunchConfig: 7 x unsigned int, padded, then hStream
    "cuLaunchHostFunc": 0,
    "cuLaunchGridAsync": 16,  # f, grid_width (int), grid_height (int), hStream
    "cuGraphLaunch": 8,
    "cuMemcpyAsync": 24,
    "cuMemcpyHtoDAsync": 24,
    "cuMemcpyDtoHAsync": 24,
    "cuMemcpyDtoDAsync": 24,
    "cuMemcpyPeerAsync": 40,
    "cuMemcpy2DAsync": 8,
    "cuMemcpy3DAsync": 8,
    "cuMemcpy3DPeerAsync": 8,
    "cuMemcpyHtoAAsync": 32,
    "cuMemcpyAtoHAsync": 32,
    "cuMemsetD8Async": 24,
    "cuMemsetD16Async": 24,
    "cuMemsetD32Async": 24,
    "cuMemsetD2D8Async": 40,
    "cuMemsetD2D16Async": 40,
    "cuMemsetD2D32Async": 40,
    "cuStreamWriteValue32": 0,
    "cuStreamWriteValue64": 0,
    "cuStreamWaitValue32": 0,
    "cuStreamWaitValue64": 0,
    "cuStreamBatchMemOp": 0,
    "cuMemAllocAsync": 16,  # dptr*, bytesize, hStream
    "cuMemFreeAsync": 8,  # dptr, hStream
}
_LAUNCHES = ("cuLaunchKernel", "cuLaunchCooperativeKernel", "cuLaunchKernelEx", "cuLaunchGridAsync")
_SUFFIX = re.compile(r"(_v\d+)?(_ptsz|_ptds)?$")
_ENQUEUES = re.compile(r"Async|Launch|StreamWriteValue|StreamWaitValue|BatchMemOp")


def base_name(function_name: str) -> str:
    """``cuMemcpyHtoDAsync_v2_ptsz`` -> ``cuMemcpyHtoDAsync``."""
    return _SUFFIX.sub("", function_name)


def _u64(addr: int) -> int:
    return ctypes.c_uint64.from_address(addr).value


def stream_argument(function_name: str, params: int | None) -> int | None:
    """The stream handle a driver call enqueues on, or None when the call is not one this module knows
    how to read. NULL and CU_STREAM_LEGACY read 0 (the legacy default stream); NULL in a per-thread
    (``_ptsz``/``_ptds``) call reads CU_STREAM_PER_THREAD, which is another stream."""
    where = STREAM_ARG.get(base_name(function_name))
    if where is None or not params:
        return None
    if isinstance(where, tuple):
        config = _u64(params)
        if not config:
            return None
        handle = _u64(config + where[1])
    else:
        handle = _u64(params + where)
    if handle == 0 and function_name.endswith(("_ptsz", "_ptds")):
        return CU_STREAM_PER_THREAD
    return 0 if handle == _CU_STREAM_LEGACY else handle


@dataclass
class Records:
    kernels: list[str] = field(default_factory=list)
    streams: set[int] = field(default_factory=set)
    unparsed: list[str] = field(default_factory=list)  # enqueuing calls whose stream this module cannot read
    unreadable_launches: list[str] = field(default_factory=list)  # launches among them: GPU work on an unknown stream
    errors: list[str] = field(default_factory=list)

    def clear(self) -> None:
        self.kernels.clear()
        self.streams.clear()
        self.unparsed.clear()
        self.unreadable_launches.clear()
        self.errors.clear()


def on_driver_call(rec: Records, function_name: str, params: int | None, symbol: str | None) -> None:
    """What one driver-API call that returned successfully adds to the records."""
    if not _ENQUEUES.search(function_name):
        return
    base = base_name(function_name)
    stream = stream_argument(function_name, params)
    if stream is None:
        if base not in STREAM_ARG:
            rec.unparsed.append(function_name)
            if "Launch" in base:  # e.g. cuLaunchCooperativeKernelMultiDevice: streams inside a list
                rec.unreadable_launches.append(function_name)
        return
    rec.streams.add(stream)
    if base in _LAUNCHES:
        rec.kernels.append(symbol or "?")


def find_library(maps: str | None = None) -> str | None:
    """libcupti: the copy this process already loaded (torch links it), else one beside the CUDA
    packages or toolkit. ``maps``: the text of /proc/self/maps (read when not given)."""
    if maps is None:
        try:
            with open("/proc/self/maps") as f:
                maps = f.read()
        except OSError:
            maps = ""
    for line in maps.splitlines():
        path = line.split()[-1] if line.split() else ""
        if re.fullmatch(r"libcupti\.so(\.\d+)*", os.path.basename(path)):
            return path
    roots = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    pats = [f"{r}/extras/CUPTI/lib64/libcupti.so*" for r in roots if r]
    try:
        import site

        pats += [f"{d}/nvidia/**/libcupti.so*" for d in site.getsitepackages()]
    except Exception:  # noqa: BLE001 — an embedded interpreter without site: the toolkit paths remain
        pass
    for pat in pats:
        hits = sorted(glob.glob(pat, recursive=True))
        if hits:
            return hits[0]
    return None


_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)


class Subscription:
    """The process's one CUPTI subscriber; ``region()`` records between ``start`` and ``stop``."""

    def __init__(self, lib: Any):
        self.lib = lib
        self.records = Records()
        self._active = False
        self._symbols: dict[int, str] = {}  # launch names taken at entry, by correlation id, for the exit
        self._handle = ctypes.c_void_p()
        self._cb = _CALLBACK(self._on_callback)  # kept referenced: CUPTI holds the bare pointer
        rc = lib.cuptiSubscribe(ctypes.byref(self._handle), self._cb, None)
        if rc != 0:
            raise OSError(f"cuptiSubscribe returned {rc} (another CUPTI subscriber in this process?)")

    def _on_callback(self, _user: Any, domain: int, _cbid: int, data: Any) -> None:
        try:
            if not self._active or not data:
                return
            d = CallbackData.from_address(data)
            if domain != DOMAIN_DRIVER or not d.functionName:
                return
            name = d.functionName.decode(errors="replace")
            launch = name.startswith(_LAUNCHES)
            if d.callbackSite == _SITE_ENTER:
                # The kernel's name is certain at entry; the call is judged at its exit (below).
                if launch and d.symbolName:
                    self._symbols[d.correlationId] = d.symbolName.decode(errors="replace")
                return
            symbol = self._symbols.pop(d.correlationId, None) if launch else None
            if d.callbackSite != _SITE_EXIT:
                return
            # Only a call that succeeded: a launch that failed (a bad grid, the error then cleared) ran
            # nothing and must not count as the solution's kernel.
            if d.functionReturnValue and ctypes.c_int.from_address(d.functionReturnValue).value != 0:
                return
            if launch and d.symbolName:
                symbol = d.symbolName.decode(errors="replace")
            on_driver_call(self.records, name, d.functionParams, symbol)
        except Exception as e:  # noqa: BLE001 — an exception cannot cross back into the driver
            self.records.errors.append(f"{type(e).__name__}: {e}"[:200])

    def start(self) -> None:
        self.records.clear()
        self._symbols.clear()
        rc = self.lib.cuptiEnableDomain(1, self._handle, DOMAIN_DRIVER)
        if rc != 0:
            raise OSError(f"cuptiEnableDomain returned {rc}")
        self._active = True

    def stop(self) -> Records:
        self._active = False
        self.lib.cuptiEnableDomain(0, self._handle, DOMAIN_DRIVER)
        return self.records


_SUBSCRIPTION: list[Subscription | None] = []  # [] not tried yet; [None] unavailable in this process


def subscription() -> Subscription | None:
    """The process's subscription, made on first use; None when libcupti cannot be found or refuses."""
    if not _SUBSCRIPTION:
        sub = None
        path = find_library()
        if path:
            try:
                sub = Subscription(ctypes.CDLL(path))
            except OSError:
                sub = None
        _SUBSCRIPTION.append(sub)
    return _SUBSCRIPTION[0]
