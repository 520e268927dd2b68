"""Kernel time from CUPTI activity records (harness.cupti_activity and the timer's use of it): record
layouts, linking records to timed calls, the tracer's buffer handling against a stand-in CUPTI library,
and every way the figure must be withheld rather than come out small. The GPU half (real records on the
H200) is scripts/gpu/cupti_timing.py and tests/harness/test_gpu_eval.py."""

import ctypes
import struct

import pytest
import torch

from harness import cupti_activity as ca
from harness import measure
from harness.cupti_activity import External, GpuOp, attribute, parse_record
from harness.measure import Refresher, Samples, Timer
from harness.timing_config import TimingConfig
from harness.worker import kernel_time


def kernel_record(start: int, end: int, stream: int, corr: int, size: int = 112) -> bytes:
    b = bytearray(size)
    struct.pack_into("<I", b, 0, ca.KIND_KERNEL)
    struct.pack_into("<QQ", b, 16, start, end)
    struct.pack_into("<I", b, 48, stream)
    struct.pack_into("<i", b, 52, 128)  # gridX, between the stream and the correlation id
    struct.pack_into("<I", b, 92, corr)
    return bytes(b)


def memset_record(start: int, end: int, stream: int, corr: int, kind: int = ca.KIND_MEMSET) -> bytes:
    b = bytearray(56)
    struct.pack_into("<IIQQQ", b, 0, kind, 0xAB, 4096, start, end)
    struct.pack_into("<III", b, 32, 0, 1, stream)
    struct.pack_into("<I", b, 44, corr)
    return bytes(b)


def external_record(corr: int, ours: int, ext_kind: int = ca.EXTERNAL_KIND) -> bytes:
    return struct.pack("<IIQII", ca.KIND_EXTERNAL, ext_kind, ours, corr, 0)


def api_record(corr: int) -> bytes:
    return struct.pack("<IIQQIIII", ca.KIND_RUNTIME, 211, 1, 2, 10, 11, corr, 0)


# ---- layouts ------------------------------------------------------------------------------------

def test_kernel_memcpy_and_memset_records_give_their_times_stream_and_correlation():
    assert parse_record(kernel_record(1_000, 5_250, 7, 42)) == GpuOp(ca.KIND_KERNEL, 1_000, 5_250, 7, 42)
    assert parse_record(memset_record(10, 20, 3, 9)) == GpuOp(ca.KIND_MEMSET, 10, 20, 3, 9)
    assert parse_record(memset_record(10, 20, 3, 9, kind=ca.KIND_MEMCPY)) == GpuOp(ca.KIND_MEMCPY, 10, 20, 3, 9)


def test_only_our_external_links_are_read():
    assert parse_record(external_record(42, 77)) == External(42, 77)
    assert parse_record(external_record(42, 77, ext_kind=3)) is None  # kineto's CUSTOM0
    assert parse_record(api_record(42)) is None


@pytest.mark.parametrize("raw", [b"\x0a\x00", kernel_record(1, 2, 3, 4)[:90], external_record(1, 2)[:16]])
def test_short_records_are_refused(raw):
    with pytest.raises(ValueError):
        parse_record(raw)


def test_record_bytes_covers_what_parse_reads():
    for kind, raw in ((ca.KIND_KERNEL, kernel_record(1, 2, 3, 4)), (ca.KIND_MEMSET, memset_record(1, 2, 3, 4)), (ca.KIND_EXTERNAL, external_record(1, 2))):
        assert parse_record(raw[: ca.record_bytes(kind)]) == parse_record(raw)
    assert ca.record_bytes(ca.KIND_DRIVER) == 4


# ---- linking records to calls -------------------------------------------------------------------

def test_a_call_spans_from_its_first_start_to_its_last_end_gaps_included():
    ops = [GpuOp(10, 100, 200, 7, 1), GpuOp(10, 260, 300, 7, 2), GpuOp(2, 150, 170, 7, 3), GpuOp(10, 0, 90, 7, 4)]
    a = attribute(ops, {1: 5, 2: 5, 3: 5, 4: 0})
    assert a.spans == {5: (100, 300, 3), 0: (0, 90, 1)} and a.foreign == 0


def test_operations_with_no_link_are_foreign_and_untimed_ones_are_counted():
    a = attribute([GpuOp(10, 100, 200, 7, 1), GpuOp(10, 0, 0, 7, 2)], {2: 5})
    assert a.foreign == 1 and a.unstamped == 1 and a.spans == {}


# ---- the tracer against a stand-in CUPTI ----------------------------------------------------------

class FakeCupti:
    """The C entry points the tracer calls, in Python: buffers come from the tracer's request callback
    and go back through its completion callback, as CUPTI does."""

    def __init__(self):
        self.enabled: set[int] = set()
        self.stack: list[int] = []
        self.pending: list[bytes] = []
        self.cursor: list[int] = []

    def cuptiActivityRegisterCallbacks(self, req, done):
        self.req, self.done = req, done
        return 0

    def cuptiActivityEnable(self, kind):
        self.enabled.add(kind)
        return 0

    def cuptiActivityDisable(self, kind):
        self.enabled.discard(kind)
        return 0

    def cuptiActivityPushExternalCorrelationId(self, kind, ours):
        assert kind == ca.EXTERNAL_KIND
        self.stack.append(ours)
        return 0

    def cuptiActivityPopExternalCorrelationId(self, kind, out):
        self.stack.pop()
        return 0

    def cuptiActivityFlushAll(self, flag):
        if not self.pending:
            return 0
        buf, size, maxrec = ctypes.POINTER(ctypes.c_uint8)(), ctypes.c_size_t(), ctypes.c_size_t()
        self.req(ctypes.byref(buf), ctypes.byref(size), ctypes.byref(maxrec))
        base = ctypes.addressof(buf.contents)
        off, self.cursor = 0, []
        for raw in self.pending:
            ctypes.memmove(base + off, raw, len(raw))
            self.cursor.append(base + off)
            off += (len(raw) + 7) // 8 * 8
        self.pending = []
        self.done(None, 0, buf, size.value, off)
        return 0

    def cuptiActivityGetNextRecord(self, buf, valid, rec_ref):
        if not self.cursor:
            return 12  # CUPTI_ERROR_MAX_LIMIT_REACHED
        rec_ref._obj.contents = ctypes.c_uint8.from_address(self.cursor.pop(0))
        return 0


def test_the_tracer_reads_buffers_links_records_and_hands_buffers_back():
    lib = FakeCupti()
    t = ca.Tracer(lib)
    t.start()
    assert set(ca.ENABLED_KINDS) <= lib.enabled
    lib.pending = [api_record(1), external_record(1, 9), kernel_record(100, 400, 7, 1), external_record(2, 3, ext_kind=3),
                   memset_record(500, 600, 7, 2), kernel_record(700, 800, 7, 1)]
    ops, links = t.collect()
    assert links == {1: 9}
    assert [o.correlation for o in ops] == [1, 2, 1]
    assert attribute(ops, links).spans == {9: (100, 800, 2)} and attribute(ops, links).foreign == 1
    assert t._buffers == {} and t.errors == []
    assert t.collect() == ([], {})  # what was handed over is not handed over again
    t.stop()
    assert not lib.enabled


def test_a_bad_record_is_an_error_the_run_sees_not_an_exception_in_cuptis_thread(monkeypatch):
    lib = FakeCupti()
    t = ca.Tracer(lib)

    def refuse(raw):
        raise ValueError("layout")

    monkeypatch.setattr(ca, "parse_record", refuse)
    lib.pending = [kernel_record(1, 2, 3, 4)]
    assert t.collect() == ([], {})
    assert t.errors == ["ValueError: layout"] and t._buffers == {}


def test_a_refused_registration_is_an_error():
    lib = FakeCupti()
    lib.cuptiActivityRegisterCallbacks = lambda req, done: 17
    with pytest.raises(OSError, match="17"):
        ca.Tracer(lib)


# ---- the timer with a stand-in GPU and tracer ---------------------------------------------------

class FakeTracer:
    """Records a GPU operation for each launch, linked to the id on top of the push stack (or to none,
    for a launch made 'from another thread')."""

    def __init__(self, clock):
        self.clock, self.stack, self.ops, self.links, self.corr, self.errors = clock, [], [], {}, 0, []
        self.started = self.stopped = 0
        self.on = False

    def start(self):
        self.started += 1
        self.on = True

    def stop(self):
        self.stopped += 1
        self.on = False

    def push(self, ours):
        self.stack.append(ours)

    def pop(self):
        if self.stack:  # CUPTI answers an empty stack with an error code
            self.stack.pop()

    def launch(self, ms: float, other_thread: bool = False) -> None:
        self.corr += 1
        if self.stack and not other_thread:
            self.links[self.corr] = self.stack[-1]
        t0 = int(self.clock["ms"] * 1e6)
        self.clock["ms"] += ms
        if self.on:
            self.ops.append(GpuOp(ca.KIND_KERNEL, t0, t0 + int(ms * 1e6), 7, self.corr))

    def collect(self):
        ops, links, self.ops, self.links = self.ops, self.links, [], {}
        return ops, links


@pytest.fixture
def gpu(monkeypatch):
    """The timer's CUDA path on the CPU: events read a shared clock that the hold and the calls advance."""
    clock = {"ms": 0.0}
    tracer = FakeTracer(clock)

    class FakeEvent:
        def __init__(self, enable_timing=True):
            self.t = None

    monkeypatch.setattr(measure, "_Event", FakeEvent)
    monkeypatch.setattr(measure, "_event_record", lambda ev: setattr(ev, "t", clock["ms"]))
    monkeypatch.setattr(measure, "_event_elapsed", lambda a, b: b.t - a.t)
    monkeypatch.setattr(measure, "_gpu_sleep", lambda cycles: tracer.launch(cycles / 2e6))  # the hold is the harness's own work
    monkeypatch.setattr(measure, "_cuda_sync", lambda: None)
    monkeypatch.setattr(measure, "_zero", lambda t: t)

    def timer(**cfg):
        t = Timer(torch.device("cpu"), TimingConfig(**cfg), Refresher([]), 0)
        t.cuda, t._flush, t.tracer = True, torch.empty(1), tracer
        return t

    return timer, tracer


def _run(timer, calls, **kw):
    return timer.run(calls, {}, [None] * len(calls), budget_s=0.05, min_iters=30, recheck=0, warmup=1, **kw)


def test_each_kept_call_gets_its_gpu_span_beside_its_event_time(gpu):
    make, tracer = gpu

    def call():
        tracer.launch(0.003)  # two kernels with a host-side gap: the span keeps the gap
        tracer.clock["ms"] += 0.001
        tracer.launch(0.002)
        return {}

    s = _run(make(), [call])[0]
    times, why = s.kernel_time()
    assert why == "" and len(times) == len(s.times_ms) >= 30
    assert all(abs(g - 0.006) < 1e-5 for g in times) and all(abs(ms - 0.006) < 1e-9 for ms in s.times_ms)  # ns stamps
    assert tracer.started == tracer.stopped == 1 and s.gpu_foreign == 0


def test_interleaved_calls_get_their_own_spans(gpu):
    make, tracer = gpu
    a = lambda: (tracer.launch(0.004), {})[1]  # noqa: E731
    b = lambda: (tracer.launch(0.010), {})[1]  # noqa: E731
    sa, sb = _run(make(), [a, b])
    assert set(round(g, 5) for g in sa.kernel_time()[0]) == {0.004} and set(round(g, 5) for g in sb.kernel_time()[0]) == {0.010}


def test_work_from_another_thread_withholds_the_figure(gpu):
    make, tracer = gpu
    n = {"i": 0}

    def call():
        n["i"] += 1
        tracer.launch(0.004, other_thread=n["i"] == 20)  # once, on a thread without our id
        return {}

    times, why = _run(make(), [call])[0].kernel_time()
    assert times is None and "another thread" in why


def test_a_call_that_drops_our_id_withholds_the_figure(gpu):
    make, tracer = gpu

    def call():
        tracer.pop()  # a candidate popping the harness's id: its work links to the harness, not to it
        tracer.launch(0.004)
        tracer.push(123456)
        return {}

    times, why = _run(make(), [call])[0].kernel_time()
    assert times is None and "no GPU operation" in why


def test_gpu_work_longer_than_the_events_withholds_the_figure(gpu):
    make, tracer = gpu

    def call():
        tracer.launch(0.004)
        if tracer.on:
            tracer.ops[-1] = GpuOp(ca.KIND_KERNEL, tracer.ops[-1].start_ns, tracer.ops[-1].end_ns + 50_000, 9, tracer.ops[-1].correlation)  # still running after the end event
        return {}

    s = _run(make(), [call])[0]
    assert s.gpu_over == len(s.times_ms) and "longer than their events" in s.kernel_time()[1]


def test_a_tracer_that_fails_to_start_leaves_event_timing_alone(gpu):
    make, tracer = gpu

    def boom():
        raise OSError("CUPTI_ERROR_NOT_INITIALIZED")

    tracer.start = boom
    s = _run(make(), [lambda: (tracer.launch(0.004), {})[1]])[0]
    assert len(s.times_ms) >= 30 and s.kernel_time() == (None, "CUPTI tracing did not start: OSError: CUPTI_ERROR_NOT_INITIALIZED")


def test_kernel_time_off_means_no_tracer():
    t = Timer(torch.device("cpu"), TimingConfig(kernel_time=False), Refresher([]), 0, tracer=object())
    assert t.tracer is None
    assert Timer(torch.device("cpu"), TimingConfig(), Refresher([]), 0, tracer=object()).tracer is None  # GPU only


# ---- the report's figures -------------------------------------------------------------------------

def _samples(times, gpu=None, **counts):
    s = Samples(times_ms=list(times), gpu_ms=list(gpu if gpu is not None else times))
    for k, v in counts.items():
        setattr(s, k, v)
    return s


def test_kernel_time_reports_candidate_baseline_and_reference():
    cand = _samples([0.007] * 50, [0.004] * 50)
    base = _samples([0.009] * 50, [0.006] * 50)
    ref = _samples([0.020] * 20, [0.016] * 20)
    kt = kernel_time([cand, base], ref, traced=True)
    assert kt.latency_ms.median == 0.004 and kt.baseline_latency_ms.median == 0.006
    assert kt.speedup_vs_baseline.median == pytest.approx(1.5) and kt.speedup_vs_reference == pytest.approx(4.0) and kt.withheld == ""


def test_kernel_time_says_what_is_missing():
    assert kernel_time([_samples([0.007] * 5)], None, traced=False).withheld.startswith("CUPTI unavailable")
    kt = kernel_time([_samples([0.007] * 5, gpu_foreign=2)], None, traced=True)
    assert kt.latency_ms is None and "another thread" in kt.withheld
    kt = kernel_time([_samples([0.007] * 5), _samples([0.008] * 5, gpu_missing=1)], None, traced=True)
    assert kt.latency_ms is not None and kt.baseline_latency_ms is None and "baseline:" in kt.withheld and "reference:" in kt.withheld


def test_the_table_shows_gpu_time_and_says_why_it_is_withheld(tmp_path):
    from io import StringIO

    from rich.console import Console

    from harness.render import print_report
    from harness.report import DeviceInfo, KernelTime, Report, WorkloadResult
    from harness.schema import Status
    from harness.stats import summarize

    rep = Report(run_id="r", definition="d", solution="s", solution_hash="h", started="2026-11-29T00:00:00Z", device=DeviceInfo(kind="cuda", name="H200", timer="cuda_events"))
    rep.workloads = [
        WorkloadResult(uuid="aaaa1111", axes={"b": 1}, status=Status.PASSED, latency_ms=summarize([0.0071] * 9), kernel_time=KernelTime(latency_ms=summarize([0.0042] * 9))),
        WorkloadResult(uuid="bbbb2222", axes={"b": 2}, status=Status.PASSED, latency_ms=summarize([0.0075] * 9), kernel_time=KernelTime(withheld="3 GPU operations from another thread")),
    ]
    buf = StringIO()
    print_report(rep, tmp_path, Console(file=buf, width=220))
    text = buf.getvalue()
    assert "GPU time (CUPTI)" in text and "withheld" in text and "bbbb2222 GPU time: 3 GPU operations from another thread" in text
    assert "4.2" in text  # the CUPTI median in µs beside the event one
