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
from harness.cupti_activity import GpuOp, attribute, parse_record
from harness.measure import Refresher, Samples, Timer
from harness.timing_config import TimingConfig
from harness.worker import kernel_time

_NAMES: list = []  # kernel names the synthetic records point at, kept alive


def kernel_record(start: int, end: int, stream: int, corr: int, name: str = "rms", size: int = 112) -> bytes:
    b = bytearray(size)
    struct.pack_into("<I", b, 0, ca.KIND_KERNEL)
    struct.pack_into("<QQ", b, 16, start, end)
    struct.pack_into("<I", b, 48, stream)
    struct.pack_into("<i", b, 52, 128)  # gridX, between the stream and the correlation id
    struct.pack_into("<I", b, 92, corr)
    if name:
        _NAMES.append(ctypes.create_string_buffer(name.encode()))
        struct.pack_into("<Q", b, 104, ctypes.addressof(_NAMES[-1]))
    return bytes(b)


def memset_record(start: int, end: int, stream: int, corr: int, kind: int = ca.KIND_MEMSET) -> bytes:
    b = bytearray(56)
    struct.pack_into("<IIQQQ", b, 0, kind, 0xAB, 4096, start, end)
    struct.pack_into("<III", b, 32, 0, 1, stream)
    struct.pack_into("<I", b, 44, corr)
    return bytes(b)


def api_record(corr: int) -> bytes:
    return struct.pack("<IIQQIIII", 5, 211, 1, 2, 10, 11, corr, 0)  # CUPTI_ACTIVITY_KIND_RUNTIME


# ---- layouts ------------------------------------------------------------------------------------

def test_kernel_memcpy_and_memset_records_give_their_times_stream_and_correlation():
    assert parse_record(kernel_record(1_000, 5_250, 7, 42), ca._read_name) == GpuOp(ca.KIND_KERNEL, 1_000, 5_250, 7, 42, "rms")
    assert parse_record(kernel_record(1_000, 5_250, 7, 42, name="")) == GpuOp(ca.KIND_KERNEL, 1_000, 5_250, 7, 42, "")
    assert parse_record(memset_record(10, 20, 3, 9)) == GpuOp(ca.KIND_MEMSET, 10, 20, 3, 9)
    assert parse_record(memset_record(10, 20, 3, 9, kind=ca.KIND_MEMCPY)) == GpuOp(ca.KIND_MEMCPY, 10, 20, 3, 9)
    assert parse_record(api_record(42)) is None


@pytest.mark.parametrize("raw", [b"\x0a\x00", kernel_record(1, 2, 3, 4)[:100], memset_record(1, 2, 3, 4)[:40]])
def test_short_records_are_refused(raw):
    with pytest.raises(ValueError):
        parse_record(raw)


def test_record_bytes_covers_what_parse_reads():
    for kind, raw in ((ca.KIND_KERNEL, kernel_record(1, 2, 3, 4)), (ca.KIND_MEMSET, memset_record(1, 2, 3, 4))):
        assert parse_record(raw[: ca.record_bytes(kind)], ca._read_name) == parse_record(raw, ca._read_name)
    assert ca.record_bytes(5) == 4


# ---- windows: from the end of a hold to the start of its marker ------------------------------------

T0 = 1_000_000  # CUPTI stamps are never 0 (0 means "not stamped")


def K(start, end, name="rms", stream=7):
    return GpuOp(ca.KIND_KERNEL, T0 + start, T0 + end, stream, 0, name)


def spins(*pairs):
    return [K(a, b, "spin") for a, b in pairs]


def test_a_call_spans_from_its_first_start_to_its_last_end_gaps_included():
    ops = spins((0, 100), (400, 401), (500, 600), (900, 901)) + [K(110, 200), K(260, 300), GpuOp(ca.KIND_MEMSET, T0 + 210, T0 + 220, 7, 0), K(620, 700),
                                                               K(402, 450, "fill"), K(50, 60, "fill")]  # the harness's flush and refresh sit outside
    w = attribute(ops, "spin", 2)
    assert w.problem == "" and w.spans == [190, 80] and w.over == [False, False]


def test_a_window_with_nothing_in_it_is_a_missing_call():
    w = attribute(spins((0, 100), (150, 151), (200, 300), (400, 401)) + [K(310, 390)], "spin", 2)
    assert w.spans == [None, 80]


def test_work_still_running_at_the_marker_is_flagged():
    w = attribute(spins((0, 100), (150, 151)) + [K(110, 400, stream=9)], "spin", 1)
    assert w.over == [True]


def test_spin_kernels_that_do_not_pair_up_withhold_everything():
    assert "5 spin kernels for 2" in attribute(spins((0, 100), (150, 151), (200, 300), (400, 401), (120, 130)), "spin", 2).problem
    assert "more than one stream" in attribute(spins((0, 100)) + [K(150, 151, "spin", stream=9)], "spin", 1).problem


@pytest.mark.parametrize(
    "bad", [GpuOp(ca.KIND_KERNEL, 0, 0, 7, 0, "rms"), GpuOp(ca.KIND_KERNEL, T0 + 120, 0, 7, 0, "rms"), GpuOp(ca.KIND_MEMSET, 0, T0 + 130, 7, 0)]
)
def test_an_operation_without_both_stamps_withholds_everything(bad):
    w = attribute(spins((0, 100), (150, 151)) + [K(110, 120), bad], "spin", 1)
    assert "could not time" in w.problem and w.spans == []


def test_side_stream_work_outside_the_windows_withholds_everything():
    # heavy work started on another stream while the hold spun, joined by a tiny kernel in the window
    w = attribute(spins((0, 100), (150, 151)) + [K(50, 140, stream=9), K(141, 145)], "spin", 1)
    assert "stream 9 outside" in w.problem
    w = attribute(spins((0, 100), (150, 151)) + [K(110, 120), K(160, 900, stream=9)], "spin", 1)  # after the last marker
    assert "stream 9 outside" in w.problem
    # the harness's own work between windows, on the caller's stream, is not a problem
    assert attribute(spins((0, 100), (150, 151)) + [K(40, 60, "fill"), K(110, 120), K(160, 170, "fill")], "spin", 1).spans == [10]


# ---- the tracer against a stand-in CUPTI ----------------------------------------------------------


class FakeCupti:
    """The C entry points the tracer calls, in Python: buffers come from the tracer's request callback
    and go back through its completion callback, as CUPTI does."""

    def __init__(self):
        self.enabled: set[int] = set()
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
        self.next_calls = getattr(self, "next_calls", 0) + 1
        if not self.cursor:
            return 12  # CUPTI_ERROR_MAX_LIMIT_REACHED
        rec_ref._obj.contents = ctypes.c_uint8.from_address(self.cursor.pop(0))
        return 0


def test_the_tracer_reads_buffers_and_hands_them_back():
    lib = FakeCupti()
    t = ca.Tracer(lib)
    t.start()
    assert set(ca.ENABLED_KINDS) == lib.enabled
    lib.pending = [api_record(1), kernel_record(100, 400, 7, 1, name="spin"), memset_record(500, 600, 7, 2), kernel_record(700, 800, 7, 3)]
    ops = t.collect()
    assert ops == [GpuOp(ca.KIND_KERNEL, 100, 400, 7, 1, "spin"), GpuOp(ca.KIND_MEMSET, 500, 600, 7, 2), GpuOp(ca.KIND_KERNEL, 700, 800, 7, 3, "rms")]
    assert t._buffers == {} and t.errors == []
    assert t.collect() == []  # what was handed over is not handed over again
    t.stop()
    assert not lib.enabled


def test_after_the_first_buffer_records_are_walked_without_a_call_per_record():
    lib = FakeCupti()
    t = ca.Tracer(lib)
    lib.pending = [kernel_record(1, 2, 7, 1, name="spin"), memset_record(3, 4, 7, 2), api_record(3)]
    t.collect()
    assert t._sizes == {ca.KIND_KERNEL: 112, ca.KIND_MEMSET: 56, 5: 40}
    lib.next_calls = 0
    lib.pending = [memset_record(5, 6, 7, 4), kernel_record(7, 9, 7, 5), kernel_record(10, 12, 7, 6, name="spin")]
    assert t.collect() == [GpuOp(ca.KIND_MEMSET, 5, 6, 7, 4), GpuOp(ca.KIND_KERNEL, 7, 9, 7, 5, "rms"), GpuOp(ca.KIND_KERNEL, 10, 12, 7, 6, "spin")]
    assert lib.next_calls == 0


def test_a_buffer_the_learnt_sizes_do_not_fit_is_walked_by_cupti():
    lib = FakeCupti()
    t = ca.Tracer(lib)
    lib.pending = [kernel_record(1, 2, 7, 1)]
    t.collect()
    lib.next_calls = 0
    lib.pending = [kernel_record(7, 9, 7, 5, size=128), memset_record(1, 2, 7, 6, kind=ca.KIND_MEMCPY)]  # a longer kernel record, an unseen kind
    assert t.collect() == [GpuOp(ca.KIND_KERNEL, 7, 9, 7, 5, "rms"), GpuOp(ca.KIND_MEMCPY, 1, 2, 7, 6)]
    assert lib.next_calls > 0


def test_walk_refuses_what_does_not_add_up():
    data = kernel_record(1, 2, 7, 1) + memset_record(3, 4, 7, 2)
    assert ca.walk(data, {ca.KIND_KERNEL: 112, ca.KIND_MEMSET: 56}) == [GpuOp(ca.KIND_KERNEL, 1, 2, 7, 1), GpuOp(ca.KIND_MEMSET, 3, 4, 7, 2)]
    assert ca.walk(data, {ca.KIND_KERNEL: 112}) is None  # an unknown kind
    assert ca.walk(data, {ca.KIND_KERNEL: 104, ca.KIND_MEMSET: 56}) is None  # lands mid-record
    assert ca.walk(data[:-8], {ca.KIND_KERNEL: 112, ca.KIND_MEMSET: 56}) is None  # overruns the end
    assert ca.record_sizes(data, [0, 112]) == {ca.KIND_KERNEL: 112, ca.KIND_MEMSET: 56}
    assert ca.record_sizes(data + kernel_record(1, 2, 7, 1, size=120), [0, 112, 168]) is None  # one kind, two sizes


def test_a_bad_record_is_an_error_the_run_sees(monkeypatch):
    lib = FakeCupti()
    t = ca.Tracer(lib)

    def refuse(buf, off, read_name=None):
        raise ValueError("layout")

    monkeypatch.setattr(ca, "parse_at", refuse)
    lib.pending = [kernel_record(1, 2, 3, 4)]
    assert t.collect() == []
    assert t.errors == ["ValueError: layout"] and t._buffers == {}


def test_a_refused_registration_or_enable_is_an_error():
    lib = FakeCupti()
    lib.cuptiActivityRegisterCallbacks = lambda req, done: 17
    with pytest.raises(OSError, match="17"):
        ca.Tracer(lib)
    lib = FakeCupti()
    t = ca.Tracer(lib)
    lib.cuptiActivityEnable = lambda kind: 1 if kind == ca.KIND_MEMSET else 0
    with pytest.raises(OSError, match="returned CUPTI error 1"):
        t.start()


# ---- the timer with a stand-in GPU and tracer ---------------------------------------------------


class FakeTracer:
    """A stand-in GPU: every launch (the timer's spin kernels included) becomes an operation on a clock
    the events also read."""

    def __init__(self, clock):
        self.clock, self.ops, self.errors = clock, [], []
        self.spin_name = None
        self.started = self.stopped = 0
        self.on = False

    def start(self):
        self.started += 1
        self.ops = []  # the real tracer drops what is left from outside a run
        self.on = True

    def stop(self):
        self.stopped += 1
        self.on = False

    def launch(self, ms: float, name: str = "rms", stream: int = 7, tail_ms: float = 0.0) -> None:
        t0 = self.clock["ns"]
        self.clock["ns"] += max(1, round(ms * 1e6))
        if self.on:
            self.ops.append(K(t0, t0 + max(1, round((ms + tail_ms) * 1e6)), name, stream))

    def collect(self):
        ops, self.ops = self.ops, []
        return ops


@pytest.fixture
def gpu(monkeypatch):
    """The timer's CUDA path on the CPU: events read a shared clock that the hold and the calls advance."""
    clock = {"ns": T0}  # integer ns, as CUPTI stamps them
    tracer = FakeTracer(clock)

    class FakeEvent:
        def __init__(self, enable_timing=True):
            self.t = None

    monkeypatch.setattr(measure, "_Event", FakeEvent)
    monkeypatch.setattr(measure, "_event_record", lambda ev: setattr(ev, "t", clock["ns"] / 1e6))
    monkeypatch.setattr(measure, "_event_elapsed", lambda a, b: b.t - a.t)
    monkeypatch.setattr(measure, "_gpu_sleep", lambda cycles: tracer.launch(cycles / 2e6, name="spin"))
    monkeypatch.setattr(measure, "_cuda_sync", lambda: None)
    monkeypatch.setattr(measure, "_zero", lambda t: (tracer.launch(0.02, name="fill"), t)[1])  # the L2 flush

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
        tracer.clock["ns"] += 1000
        tracer.launch(0.002)
        return {}

    s = _run(make(), [call])[0]
    times, why = s.kernel_time()
    assert why == "" and len(times) == len(s.times_ms) >= 30 and tracer.spin_name == "spin"
    assert all(abs(g - 0.006) < 1e-5 for g in times) and all(abs(ms - 0.006) < 1e-9 for ms in s.times_ms)
    assert tracer.started == tracer.stopped == 1 and s.cupti_s > 0


def test_interleaved_calls_get_their_own_spans(gpu):
    make, tracer = gpu
    a = lambda: (tracer.launch(0.004), {})[1]  # noqa: E731
    b = lambda: (tracer.launch(0.010), {})[1]  # noqa: E731
    sa, sb = _run(make(), [a, b])
    assert set(round(g, 5) for g in sa.kernel_time()[0]) == {0.004} and set(round(g, 5) for g in sb.kernel_time()[0]) == {0.010}


def test_late_dropped_calls_are_left_out_of_the_gpu_times_too(gpu):
    import time

    make, tracer = gpu
    n = {"i": 0}

    def call():
        n["i"] += 1
        if n["i"] in (4, 5, 6):  # a slow host once: these arrive after their (1 ms) hold ended
            time.sleep(0.003)
            tracer.launch(0.009)
        else:
            tracer.launch(0.004)
        return {}

    s = _run(make(hold_cycles=2_000_000), [call])[0]
    times, why = s.kernel_time()
    assert s.late_dropped == 3 and why == "" and len(times) == len(s.times_ms)
    assert {round(g, 5) for g in times} == {0.004}  # the dropped calls' spans went with them


def test_a_candidate_launching_the_spin_kernel_withholds_the_figure(gpu):
    make, tracer = gpu

    def call():
        tracer.launch(0.004)
        measure._gpu_sleep(10)  # the same kernel as the timer's holds
        return {}

    times, why = _run(make(), [call])[0].kernel_time()
    assert times is None and "spin kernels" in why


def test_a_call_that_runs_nothing_on_the_gpu_withholds_the_figure(gpu):
    make, tracer = gpu
    n = {"i": 0}

    def call():
        n["i"] += 1
        if n["i"] % 7:
            tracer.launch(0.004)
        return {}

    times, why = _run(make(), [call])[0].kernel_time()
    assert times is None and "no GPU operation" in why


def test_gpu_work_left_running_on_another_stream_withholds_the_figure(gpu):
    make, tracer = gpu
    s = _run(make(), [lambda: (tracer.launch(0.004, stream=9, tail_ms=0.05), {})[1]])[0]  # still running after the end event
    assert s.gpu_over == len(s.times_ms) and "longer than their events" in s.kernel_time()[1]


def test_a_tracer_that_fails_to_start_leaves_event_timing_alone(gpu):
    make, tracer = gpu

    def boom():
        raise OSError("CUPTI_ERROR_NOT_INITIALIZED")

    tracer.start = boom
    s = _run(make(), [lambda: (tracer.launch(0.004), {})[1]])[0]
    assert len(s.times_ms) >= 30 and s.kernel_time() == (None, "CUPTI tracing did not start: OSError: CUPTI_ERROR_NOT_INITIALIZED")


def test_a_tracer_that_cannot_tell_its_spin_kernel_gives_no_figure(gpu, monkeypatch):
    make, tracer = gpu
    real = measure._gpu_sleep

    def sleep_and_noise(cycles):
        real(cycles)
        if tracer.on and tracer.spin_name is None:  # another thread's kernel lands beside the lone spin kernel
            tracer.launch(0.001, name="other")

    monkeypatch.setattr(measure, "_gpu_sleep", sleep_and_noise)
    s = _run(make(), [lambda: (tracer.launch(0.004), {})[1]])[0]
    assert s.kernel_time()[0] is None and "cannot be told apart" in s.kernel_time()[1] and len(s.times_ms) >= 30


def test_a_run_that_fails_midway_leaves_the_next_run_on_the_same_tracer_whole(gpu):
    make, tracer = gpu
    n = {"i": 0}

    def dies():
        n["i"] += 1
        tracer.launch(0.004)
        if n["i"] == 12:
            raise RuntimeError("illegal memory access")
        return {}

    timer = make()
    with pytest.raises(RuntimeError):
        _run(timer, [dies])
    assert tracer.stopped == tracer.started == 1 and tracer.ops  # records of the failed run are still queued
    s = _run(timer, [lambda: (tracer.launch(0.007), {})[1]])[0]  # the reference's run, say
    times, why = s.kernel_time()
    assert why == "" and {round(g, 5) for g in times} == {0.007}


def test_a_failure_reading_the_records_withholds_the_figure_not_the_result(gpu):
    make, tracer = gpu

    def broken():
        raise MemoryError("buffer")

    tracer.spin_name = "spin"  # learnt already: the failure is in reading the run's records
    tracer.collect = broken
    s = _run(make(), [lambda: (tracer.launch(0.004), {})[1]])[0]
    assert len(s.times_ms) >= 30 and s.kernel_time() == (None, "reading CUPTI records failed: MemoryError: buffer")


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
    kt = kernel_time([_samples([0.007] * 5, gpu_error="3 spin kernels for 1 timed calls")], None, traced=True)
    assert kt.latency_ms is None and "spin kernels" in kt.withheld
    kt = kernel_time([_samples([0.007] * 5), _samples([0.008] * 5, gpu_missing=1)], None, traced=True)
    assert kt.latency_ms is not None and kt.baseline_latency_ms is None and "baseline:" in kt.withheld and "reference:" in kt.withheld


def test_the_table_shows_gpu_time_and_says_why_it_is_withheld(tmp_path):
    from io import StringIO

    from rich.console import Console

    from harness.report import DeviceInfo, KernelTime, Report, WorkloadResult
    from harness.report_table import print_report
    from harness.schema import Status
    from harness.stats import summarize

    rep = Report(
        run_id="r",
        definition="d",
        solution="s",
        solution_hash="h",
        started="2026-11-29T00:00:00Z",
        device=DeviceInfo(kind="cuda", name="H200", timer="cuda_events"),
    )
    rep.workloads = [
        WorkloadResult(
            uuid="aaaa1111", axes={"b": 1}, status=Status.PASSED, latency_ms=summarize([0.0071] * 9), kernel_time=KernelTime(latency_ms=summarize([0.0042] * 9))
        ),
        WorkloadResult(
            uuid="bbbb2222",
            axes={"b": 2},
            status=Status.PASSED,
            latency_ms=summarize([0.0075] * 9),
            kernel_time=KernelTime(withheld="3 spin kernels for 1 timed calls"),
        ),
    ]
    buf = StringIO()
    print_report(rep, tmp_path, Console(file=buf, width=220))
    text = buf.getvalue()
    assert "GPU time (CUPTI)" in text and "withheld" in text and "bbbb2222 GPU time: 3 spin kernels for 1 timed calls" in text
    assert "4.2 µs [4.2, 4.2]" in text and "7.1 µs [7.1, 7.1]" in text  # the CUPTI median beside the event one
    rep.workloads[0].status = Status.INCORRECT_NUMERICAL  # a failed row shows no GPU time
    buf = StringIO()
    print_report(rep, tmp_path, Console(file=buf, width=220))
    assert "4.2 µs" not in buf.getvalue()
