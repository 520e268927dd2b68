"""The CUPTI callback observer's pure parts: parameter-struct offsets, the records a call adds, and the
callback path driven with a fake libcupti. The GPU run is in test_guard_runtime.py (-m gpu)."""

import ctypes

import pytest

from harness.guard import cupti_callbacks as cc

P, U, S, B = ctypes.c_void_p, ctypes.c_uint, ctypes.c_size_t, ctypes.c_ubyte

# The driver prototypes (cuda.h) as ctypes structs: ctypes lays fields out by the platform's C rules,
# so each hStream offset here is what the compiler gives the driver's parameter struct.
PROTOTYPES = {
    "cuLaunchKernel": [("f", P), ("gx", U), ("gy", U), ("gz", U), ("bx", U), ("by", U), ("bz", U), ("shmem", U), ("hStream", P), ("params", P), ("extra", P)],
    "cuLaunchCooperativeKernel": [("f", P), ("gx", U), ("gy", U), ("gz", U), ("bx", U), ("by", U), ("bz", U), ("shmem", U), ("hStream", P), ("params", P)],
    "cuLaunchHostFunc": [("hStream", P), ("fn", P), ("user", P)],
    "cuGraphLaunch": [("exec", P), ("hStream", P)],
    "cuMemcpyAsync": [("dst", P), ("src", P), ("n", S), ("hStream", P)],
    "cuMemcpyHtoDAsync": [("dst", P), ("src", P), ("n", S), ("hStream", P)],
    "cuMemcpyDtoHAsync": [("dst", P), ("src", P), ("n", S), ("hStream", P)],
    "cuMemcpyDtoDAsync": [("dst", P), ("src", P), ("n", S), ("hStream", P)],
    "cuMemcpyPeerAsync": [("dst", P), ("dctx", P), ("src", P), ("sctx", P), ("n", S), ("hStream", P)],
    "cuMemcpy2DAsync": [("copy", P), ("hStream", P)],
    "cuMemcpy3DAsync": [("copy", P), ("hStream", P)],
    "cuMemcpy3DPeerAsync": [("copy", P), ("hStream", P)],
    "cuMemcpyHtoAAsync": [("arr", P), ("off", S), ("src", P), ("n", S), ("hStream", P)],
    "cuMemcpyAtoHAsync": [("dst", P), ("arr", P), ("off", S), ("n", S), ("hStream", P)],
    "cuMemsetD8Async": [("dst", P), ("v", B), ("n", S), ("hStream", P)],
    "cuMemsetD16Async": [("dst", P), ("v", ctypes.c_ushort), ("n", S), ("hStream", P)],
    "cuMemsetD32Async": [("dst", P), ("v", U), ("n", S), ("hStream", P)],
    "cuMemsetD2D8Async": [("dst", P), ("pitch", S), ("v", B), ("w", S), ("h", S), ("hStream", P)],
    "cuMemsetD2D16Async": [("dst", P), ("pitch", S), ("v", ctypes.c_ushort), ("w", S), ("h", S), ("hStream", P)],
    "cuMemsetD2D32Async": [("dst", P), ("pitch", S), ("v", U), ("w", S), ("h", S), ("hStream", P)],
    "cuStreamWriteValue32": [("hStream", P), ("addr", P), ("v", U), ("flags", U)],
    "cuStreamWriteValue64": [("hStream", P), ("addr", P), ("v", ctypes.c_uint64), ("flags", U)],
    "cuStreamWaitValue32": [("hStream", P), ("addr", P), ("v", U), ("flags", U)],
    "cuStreamWaitValue64": [("hStream", P), ("addr", P), ("v", ctypes.c_uint64), ("flags", U)],
    "cuStreamBatchMemOp": [("hStream", P), ("count", U), ("ops", P), ("flags", U)],
    "cuLaunchGridAsync": [("f", P), ("gw", ctypes.c_int), ("gh", ctypes.c_int), ("hStream", P)],
    "cuMemAllocAsync": [("dptr", P), ("n", S), ("hStream", P)],
    "cuMemFreeAsync": [("dptr", P), ("hStream", P)],
}


class LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("gx", U), ("gy", U), ("gz", U), ("bx", U), ("by", U), ("bz", U), ("shmem", U), ("hStream", P), ("attrs", P), ("nattrs", U)]


class LaunchExParams(ctypes.Structure):  # cuLaunchKernelEx_params
    _fields_ = [("config", ctypes.POINTER(LaunchConfig)), ("f", P), ("params", P), ("extra", P)]


def test_every_stream_offset_is_where_the_c_abi_puts_hstream():
    assert set(PROTOTYPES) | {"cuLaunchKernelEx"} == set(cc.STREAM_ARG)
    for name, fields in PROTOTYPES.items():
        struct = type(name, (ctypes.Structure,), {"_fields_": fields})
        assert cc.STREAM_ARG[name] == struct.hStream.offset, name
    assert cc.STREAM_ARG["cuLaunchKernelEx"] == ("config", LaunchConfig.hStream.offset)


def _params(name: str, stream: int):
    struct = type(name, (ctypes.Structure,), {"_fields_": PROTOTYPES[name]})
    return struct(hStream=stream)


@pytest.mark.parametrize("name", ["cuLaunchKernel", "cuLaunchKernel_ptsz", "cuMemcpyHtoDAsync_v2", "cuMemsetD2D8Async_ptsz", "cuGraphLaunch"])
def test_stream_argument_reads_the_handle_through_suffixed_names(name):
    p = _params(cc.base_name(name), 0xABC000)
    assert cc.stream_argument(name, ctypes.addressof(p)) == 0xABC000


def test_null_is_the_legacy_stream_except_in_a_per_thread_call():
    null = _params("cuLaunchKernel", 0)
    assert cc.stream_argument("cuLaunchKernel", ctypes.addressof(null)) == 0
    assert cc.stream_argument("cuLaunchKernel_ptsz", ctypes.addressof(null)) == cc.CU_STREAM_PER_THREAD
    assert cc.stream_argument("cuLaunchKernel", ctypes.addressof(_params("cuLaunchKernel", 0x1))) == 0  # CU_STREAM_LEGACY


def test_launch_ex_reads_the_stream_through_the_config_pointer_and_legacy_is_the_default_stream():
    cfg = LaunchConfig(hStream=0x1)  # CU_STREAM_LEGACY
    p = LaunchExParams(config=ctypes.pointer(cfg))
    assert cc.stream_argument("cuLaunchKernelEx", ctypes.addressof(p)) == 0
    cfg.hStream = 0x7F00
    assert cc.stream_argument("cuLaunchKernelEx", ctypes.addressof(p)) == 0x7F00
    assert cc.stream_argument("cuLaunchKernelEx", ctypes.addressof(LaunchExParams())) is None  # NULL config
    assert cc.stream_argument("cuCtxSynchronize", ctypes.addressof(p)) is None
    assert cc.stream_argument("cuLaunchKernel", None) is None


def test_records_name_launches_only_and_list_enqueuing_calls_they_cannot_read():
    rec = cc.Records()
    launch, copy = _params("cuLaunchKernel", 0), _params("cuMemcpyDtoDAsync", 0x5000)
    cc.on_driver_call(rec, "cuLaunchKernel", ctypes.addressof(launch), "rms_kernel")
    cc.on_driver_call(rec, "cuMemcpyDtoDAsync_v2", ctypes.addressof(copy), None)
    cc.on_driver_call(rec, "cuCtxSynchronize", None, None)  # enqueues nothing: ignored
    cc.on_driver_call(rec, "cuMemcpyBatchAsync", ctypes.addressof(copy), None)  # enqueues; not in the table
    cc.on_driver_call(rec, "cuLaunchCooperativeKernelMultiDevice", ctypes.addressof(copy), "k")  # streams inside a list
    assert rec.kernels == ["rms_kernel"]
    assert rec.streams == {0, 0x5000}
    assert rec.unparsed == ["cuMemcpyBatchAsync", "cuLaunchCooperativeKernelMultiDevice"]
    assert rec.unreadable_launches == ["cuLaunchCooperativeKernelMultiDevice"]


class FakeCupti:
    """Stands in for libcupti: keeps the callback and the enabled domains, and can refuse."""

    def __init__(self, subscribe_rc=0):
        self.subscribe_rc = subscribe_rc
        self.cb = None
        self.enabled = set()

    def cuptiSubscribe(self, handle, cb, user):  # noqa: N802 — CUPTI's names
        self.cb = cb
        return self.subscribe_rc

    def cuptiEnableDomain(self, on, handle, domain):  # noqa: N802
        (self.enabled.add if on else self.enabled.discard)(domain)
        return 0

    def call(self, name: bytes, params, symbol: bytes | None = None, site=1, domain=cc.DOMAIN_DRIVER, result: int | None = 0, correlation=0):
        ret = ctypes.c_int(result or 0)
        data = cc.CallbackData(callbackSite=site, functionName=name, functionParams=ctypes.addressof(params), symbolName=symbol,
                               functionReturnValue=ctypes.addressof(ret) if result is not None else None, correlationId=correlation)
        self.cb(None, domain, 0, ctypes.addressof(data))


def test_subscription_records_only_inside_a_region_and_only_calls_that_succeeded():
    lib = FakeCupti()
    sub = cc.Subscription(lib)
    side = _params("cuLaunchKernel", 0xBEEF)
    lib.call(b"cuLaunchKernel", side, b"before")  # no region yet: not recorded
    sub.start()
    assert lib.enabled == {cc.DOMAIN_DRIVER}
    lib.call(b"cuLaunchKernel", _params("cuLaunchKernel", 0), b"mine")
    lib.call(b"cuLaunchKernel", side, b"entry", site=0)  # the entry site: the call has not happened yet
    lib.call(b"cuLaunchKernel", side, b"failed", result=1)  # CUDA_ERROR_INVALID_VALUE: nothing ran
    lib.call(b"cuLaunchKernel_ptsz", side, b"on_side", result=None)  # no return value to read: counted
    rec = sub.stop()
    assert lib.enabled == set()
    assert rec.kernels == ["mine", "on_side"] and rec.streams == {0, 0xBEEF} and not rec.errors
    lib.call(b"cuLaunchKernel", side, b"after")
    assert rec.kernels == ["mine", "on_side"]
    sub.start()  # a new region starts empty
    assert sub.records.kernels == []


def test_a_refused_subscription_is_an_error_not_a_silent_observer():
    with pytest.raises(OSError, match="cuptiSubscribe returned 39"):
        cc.Subscription(FakeCupti(subscribe_rc=39))


def test_find_library_takes_a_loaded_libcupti_by_its_exact_name_only():
    maps = "7e00-7e10 r-xp 0 0:0 1 /tmp/x/libcupti.so.evil\n7f00-7f10 r-xp 0 0:0 1 /venv/nvidia/cu13/lib/libcupti.so.13\n"
    assert cc.find_library(maps) == "/venv/nvidia/cu13/lib/libcupti.so.13"
    assert cc.find_library("7e00-7e10 r-xp 0 0:0 1 /tmp/x/libcupti.so.evil\n") != "/tmp/x/libcupti.so.evil"


def test_a_launch_named_only_at_entry_keeps_its_name_at_exit():
    lib = FakeCupti()
    sub = cc.Subscription(lib)
    sub.start()
    params = _params("cuLaunchKernel", 0)
    lib.call(b"cuLaunchKernel", params, b"rms_kernel", site=0, correlation=7)
    lib.call(b"cuLaunchKernel", params, None, site=1, correlation=7)  # no symbol at the exit site
    lib.call(b"cuLaunchKernel", params, b"other", site=0, correlation=8)
    lib.call(b"cuLaunchKernel", params, None, site=1, correlation=8, result=2)  # failed: not counted
    rec = sub.stop()
    assert rec.kernels == ["rms_kernel"] and sub._symbols == {}
