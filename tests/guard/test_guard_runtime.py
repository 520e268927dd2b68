"""Runtime guard: integrity snapshot, thread counts, output checks, roofline floor, launch counting."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import types
from pathlib import Path

import pytest
import torch

from harness.guard import runtime as rt
from harness.schema import Status

REPO = Path(__file__).resolve().parents[2]


def rules(findings) -> set[str]:
    return {f.rule for f in findings}


# ------------------------------------------------------------------------------ integrity snapshot


def test_snapshot_clean_and_fast():
    snap = rt.IntegritySnapshot.capture()
    assert "torch.allclose" in snap.entries and "time.perf_counter" in snap.entries
    assert snap.verify() == []


def test_snapshot_detects_function_patch_and_keeps_original(monkeypatch):
    snap = rt.IntegritySnapshot.capture()
    original = torch.allclose
    monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
    f = snap.verify()
    assert rules(f) == {"runtime-patch"} and "torch.allclose" in f[0].message and f[0].why
    assert snap.fn("torch.allclose") is original
    monkeypatch.undo()
    assert snap.verify() == []


def test_snapshot_detects_clock_and_sync_patch(monkeypatch):
    import time

    snap = rt.IntegritySnapshot.capture()
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    msgs = " ".join(f.message for f in snap.verify())
    assert "time.perf_counter" in msgs and "torch.cuda.synchronize" in msgs


def test_snapshot_detects_tensor_method_patch_and_new_attribute(monkeypatch):
    snap = rt.IntegritySnapshot.capture()
    monkeypatch.setattr(torch.Tensor, "clone", lambda self: self, raising=True)
    msgs = [f.message for f in snap.verify()]
    assert any("torch.Tensor.clone" in m for m in msgs)
    monkeypatch.undo()
    torch.Tensor._kbot_probe = 1
    try:
        assert any("_kbot_probe" in f.message for f in snap.verify())
    finally:
        del torch.Tensor._kbot_probe
    assert snap.verify() == []


def test_snapshot_detects_builtin_and_module_swap(monkeypatch):
    import builtins

    snap = rt.IntegritySnapshot.capture()
    monkeypatch.setattr(builtins, "isinstance", lambda o, c: True)
    assert any("builtins.isinstance" in f.message for f in snap.verify())
    monkeypatch.undo()
    monkeypatch.setitem(sys.modules, "time", types.ModuleType("time"))
    assert any("sys.modules['time']" in f.message for f in snap.verify())


def test_snapshot_records_harness_modules():
    mod = types.ModuleType("kbot_fake_harness")

    def compare(a, b):
        return a == b

    class Timer:
        def run(self):
            return 1

    Timer.__module__ = mod.__name__
    mod.compare, mod.Timer = compare, Timer
    sys.modules[mod.__name__] = mod
    try:
        snap = rt.IntegritySnapshot.capture(modules=[mod])
        mod.compare = lambda a, b: True
        Timer.run = lambda self: 0
        msgs = " ".join(f.message for f in snap.verify())
        assert "kbot_fake_harness.compare" in msgs and "kbot_fake_harness.Timer.run" in msgs
    finally:
        del sys.modules[mod.__name__]


def test_snapshot_fn_unknown_name():
    with pytest.raises(KeyError, match="was not captured"):
        rt.IntegritySnapshot.capture().fn("torch.no_such_thing")


def test_snapshot_trace_import_hooks_and_modes():
    snap = rt.IntegritySnapshot.capture()
    old = sys.gettrace()
    sys.settrace(lambda *a: None)
    try:
        assert "runtime-trace-hook" in rules(snap.verify())
    finally:
        sys.settrace(old)

    class Finder:
        def find_spec(self, *a):
            return None

    sys.meta_path.append(Finder())
    try:
        assert "runtime-import-hook" in rules(snap.verify())
    finally:
        sys.meta_path.pop()

    from torch.overrides import TorchFunctionMode

    with TorchFunctionMode():
        assert "runtime-torch-mode" in rules(snap.verify())
    assert snap.verify() == []


# ------------------------------------------------------------------------------ threads


def test_thread_count_and_check():
    before = rt.thread_count()
    assert before.python >= 1
    if Path("/proc/self/status").exists():
        assert before.os is not None and before.os >= 1
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        f = rt.check_threads(before, rt.thread_count())
        assert rules(f) == {"runtime-threads"} and "Python threads" in f[0].message
    finally:
        stop.set()
        t.join()
    # join() returns when the Python thread is done; the kernel may take a moment to reap the OS thread.
    for _ in range(100):
        if rt.check_threads(before, rt.thread_count()) == []:
            break
        time.sleep(0.01)
    assert rt.check_threads(before, rt.thread_count()) == []


def candidate_module(tmp_path, name: str, source: str):
    """(module, its folder): a candidate's file under tmp_path/sol, imported as ``name``."""
    own = tmp_path / "sol"
    own.mkdir(exist_ok=True)
    (own / f"{name}.py").write_text(source)
    spec = importlib.util.spec_from_file_location(name, own / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, own


def test_threads_are_the_candidates_only_when_its_code_started_them(tmp_path):
    """A thread started with no candidate frame on the stack (the harness's energy run, a reference that
    wakes a library pool) is not the candidate's; one started from the candidate's file is, and the
    finding says where; a foreign thread that merely ran Python (a _DummyThread) is no Python thread."""
    import _thread

    cand, own = candidate_module(tmp_path, "cand", "import threading\n"
                                                   "def spawn(stop):\n"
                                                   "    t = threading.Thread(target=stop.wait, name='cand-worker', daemon=True)\n"
                                                   "    t.start()\n"
                                                   "    return t\n")
    origins = rt.ThreadOrigins(own_paths=[own]).install()
    stop = threading.Event()
    try:
        before = rt.thread_count()
        lib = threading.Thread(target=stop.wait, name="library-pool", daemon=True)
        lib.start()
        seen = threading.Event()
        _thread.start_new_thread(lambda: (threading.current_thread(), seen.set(), stop.wait()), ())
        assert seen.wait(5)
        assert rt.check_threads(before, rt.thread_count(), os_slack=8, origins=origins) == []
        assert rules(rt.check_threads(before, rt.thread_count(), os_slack=8)) == {"runtime-threads"}  # without origins: counted
        mine = cand.spawn(stop)
        f = rt.check_threads(before, rt.thread_count(), os_slack=8, origins=origins)
        assert rules(f) == {"runtime-threads"}
        assert "'cand-worker'" in f[0].message and "cand.py:4" in f[0].message and "library-pool" not in f[0].message
    finally:
        stop.set()
        origins.uninstall()
    lib.join()
    mine.join()
    assert threading.Thread.start is rt._thread_start


def test_a_candidate_thread_that_ended_before_the_check_is_still_seen(tmp_path):
    """The background-fill trick under load: the candidate's thread finishes its work (the output filled
    after the timer stopped) and ends before the harness counts threads. Its start was recorded, so the
    check still reports it, once; a library's short-lived thread is not the candidate's."""
    cand, own = candidate_module(tmp_path, "cand", "import threading\n"
                                                   "def fill_in_background(out):\n"
                                                   "    t = threading.Thread(target=out.append, args=(1,), name='cand-fill')\n"
                                                   "    t.start()\n"
                                                   "    return t\n")
    origins = rt.ThreadOrigins(own_paths=[own]).install()
    try:
        before = rt.thread_count()
        lib = threading.Thread(target=lambda: None, name="library-helper")
        lib.start()
        lib.join()
        assert rt.check_threads(before, rt.thread_count(), os_slack=8, origins=origins) == []
        out: list[int] = []
        cand.fill_in_background(out).join()
        assert out == [1]
        f = rt.check_threads(before, rt.thread_count(), os_slack=8, origins=origins)
        assert rules(f) == {"runtime-threads"}
        assert "ended before the check" in f[0].message and "'cand-fill'" in f[0].message and "cand.py:4" in f[0].message
        assert rt.check_threads(before, rt.thread_count(), os_slack=8, origins=origins) == []  # reported once
        # a timed run may start one per call: all counted, a few kept; a second start() of one thread raises
        # and starts nothing, so it is not counted again
        for _ in range(20):
            t = cand.fill_in_background(out)
            t.join()
        with pytest.raises(RuntimeError):
            t.start()
        assert len(origins.started) <= rt._KEEP_STARTED
        f = rt.check_threads(before, rt.thread_count(), os_slack=8, origins=origins)
        assert rules(f) == {"runtime-threads"} and "started 20 Python thread(s)" in f[0].message
    finally:
        origins.uninstall()


def test_check_threads_os_slack():
    before = rt.ThreadCount(1, 4)
    assert rules(rt.check_threads(before, rt.ThreadCount(1, 5))) == {"runtime-threads"}
    assert rt.check_threads(before, rt.ThreadCount(1, 5), os_slack=1) == []
    assert rt.check_threads(rt.ThreadCount(1, None), rt.ThreadCount(1, 9)) == []


# ------------------------------------------------------------------------------ outputs


@pytest.fixture
def io():
    x = torch.randn(4, 16, dtype=torch.bfloat16)
    w = torch.randn(16, dtype=torch.bfloat16)
    return {"hidden_states": x, "weight": w}


def check(value, io, **kw):
    return rules(rt.check_output("output", value, kw.pop("shape", (4, 16)), kw.pop("dtype", torch.bfloat16), io, **kw))


def test_output_plain_tensor_passes(io):
    assert check(torch.empty(4, 16, dtype=torch.bfloat16), io) == set()


def test_output_subclass_and_non_tensor(io):
    class Sub(torch.Tensor):
        pass

    assert check(torch.empty(4, 16, dtype=torch.bfloat16).as_subclass(Sub), io) == {"output-type"}
    assert check(torch.nn.Parameter(torch.empty(4, 16, dtype=torch.bfloat16)), io) == {"output-type"}
    assert check([1, 2], io) == {"output-type"}
    assert check(None, io) == {"output-type"}


def test_output_views_of_inputs(io):
    assert check(io["hidden_states"], io) == {"output-aliases-input"}
    assert check(io["hidden_states"].view(4, 16)[:, :], io) == {"output-aliases-input"}
    big = torch.empty(8, 16, dtype=torch.bfloat16)
    assert check(big[4:], {"x": big[:4]}) == {"output-aliases-input"}  # same storage, other half


def test_output_shape_dtype_device(io):
    assert check(torch.empty(3, 16, dtype=torch.bfloat16), io) == {"output-shape"}
    assert check(torch.empty(4, 16, dtype=torch.float32), io) == {"output-dtype"}
    assert check(torch.empty(4, 16, dtype=torch.bfloat16), io, device="cuda") == {"output-device"}


def test_output_meta_layout_storage_overlap(io):
    assert check(torch.empty(4, 16, dtype=torch.bfloat16, device="meta"), io) == {"output-meta"}
    assert check(torch.eye(4, 16).to(torch.bfloat16).to_sparse(), io) == {"output-layout"}
    t = torch.empty(4, 16, dtype=torch.bfloat16)
    t.untyped_storage().resize_(8)
    assert check(t, io) == {"output-storage"}
    row = torch.empty(1, 16, dtype=torch.bfloat16)
    assert check(row.expand(4, 16), io) == {"output-overlap"}


def test_output_reused_across_calls(io):
    first = torch.empty(4, 16, dtype=torch.bfloat16)
    assert check(first, io, previous=[first]) == {"output-reused"}
    assert check(torch.empty(4, 16, dtype=torch.bfloat16), io, previous=[first]) == set()


def test_status_for():
    f = lambda r: rt._finding(r, "m")  # noqa: E731
    assert rt.status_for([]) is None
    assert rt.status_for([f("output-shape")]) is Status.INCORRECT_SHAPE
    assert rt.status_for([f("output-dtype")]) is Status.INCORRECT_DTYPE
    assert rt.status_for([f("output-shape"), f("output-aliases-input")]) is Status.REJECTED


# ------------------------------------------------------------------------------ roofline


def test_roofline_floor():
    f = rt.roofline_floor_check(0.001, 0.01)
    assert f is not None and f.rule == "below-roofline" and "10.00x" in f.message
    assert rt.roofline_floor_check(0.0095, 0.01) is None  # within the 0.9 tolerance
    assert rt.roofline_floor_check(0.0089, 0.01) is not None
    assert rt.roofline_floor_check(0.02, 0.01) is None
    assert rt.roofline_floor_check(0.001, None) is None and rt.roofline_floor_check(0.001, 0.0) is None
    with pytest.raises(ValueError):
        rt.roofline_floor_check(float("nan"), 0.01)
    with pytest.raises(ValueError):
        rt.roofline_floor_check(0.1, 0.01, tolerance=1.5)


# ------------------------------------------------------------------------------ kernel launches

_INTERPRETER_SCRIPT = r'''
import json, os, sys, importlib.util
sys.path.insert(0, sys.argv[1])
from harness.guard import runtime as rt

counter = rt.LaunchCounter(own_paths=[sys.argv[2]])
snap_before = rt.IntegritySnapshot.capture()          # counter installed after the snapshot...
counter.install()
snap_after = rt.IntegritySnapshot.capture()           # ...and before one: both must stay clean
spec = importlib.util.spec_from_file_location("kbot_solution_probe", os.path.join(sys.argv[2], "main.py"))
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
import torch
out = {"interpreted": type(mod.add_one).__name__}
out["before"] = [f.rule for f in rt.kernel_launch_check(counter)]
x = torch.arange(8, dtype=torch.float32)
y = torch.empty_like(x)
mod.add_one[(1,)](x, y, 8, BLOCK=8)
out["ok"] = bool(torch.equal(y, x + 1))
out["count"], out["total"] = counter.count, counter.total
try:
    mod.add_one[(1,)](x, y, 8, BLOCK=3)                 # not a power of two: the launch raises
except Exception:
    pass
out["count_after_failed"] = counter.count
out["after"] = [f.rule for f in rt.kernel_launch_check(counter)]
out["verify"] = [f.message for f in snap_before.verify() + snap_after.verify()]
out["launch"] = [counter.launches[0].name, counter.launches[0].module]
counter.uninstall()
print(json.dumps(out))
'''

_KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def add_one(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    m = i < n
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=m) + 1, mask=m)
'''


def test_launch_counter_under_interpreter(tmp_path):
    (tmp_path / "main.py").write_text(_KERNEL)
    script = tmp_path / "probe.py"
    script.write_text(_INTERPRETER_SCRIPT)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    p = subprocess.run([sys.executable, str(script), str(REPO), str(tmp_path)], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["interpreted"] == "InterpretedFunction"
    assert out["before"] == ["no-own-kernel"]
    assert out["ok"] and out["count"] == 1 and out["total"] == 1
    assert out["count_after_failed"] == 1  # a launch that raised is not a launch
    assert out["after"] == []
    assert out["verify"] == []
    assert out["launch"] == ["add_one", "kbot_solution_probe"]


def test_launch_counter_own_by_default_excludes_libraries():
    c = rt.LaunchCounter()
    lib = rt.Launch("k", "triton.ops", os.path.join(rt._library_dirs()[0], "x.py"))
    own = rt.Launch("k", "kbot_solution_x", "/tmp/run/candidate/src/main.py")
    c.launches += [lib]
    assert c.count == 0 and c.total == 1
    assert rules(rt.kernel_launch_check(c)) == {"no-own-kernel"}
    c.launches.append(own)
    assert c.count == 1 and rt.kernel_launch_check(c) == []
    by_module = rt.LaunchCounter(own_modules=["kbot_solution_y"])
    by_module.launches.append(own)
    assert by_module.count == 0


def test_launch_counter_tampering_detected():
    c = rt.LaunchCounter().install()
    try:
        klass, orig = c._originals[0]
        klass.run = orig  # what a candidate undoing the hook would do
        assert rules(rt.kernel_launch_check(c)) == {"runtime-patch"}
    finally:
        c.uninstall()


def test_kernel_names_in():
    src = '''
    __global__ void rms_kernel(const float* x) {}
    extern "C" __global__ __launch_bounds__(256) void fused_add(float* y, int n) {}
    template <int B> __global__ void tiled_mm(float* c) {}
    '''
    assert rt.kernel_names_in([src]) == ["rms_kernel", "fused_add", "tiled_mm"]


def test_cuda_counter_reports_nothing_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("covered by the gpu test")
    with rt.CudaLaunchCounter(["rms_kernel"]) as c:
        torch.ones(3) * 2
    assert not c.available and c.total == 0 and rt.kernel_launch_check(c) == []


@pytest.mark.gpu
def test_cuda_counter_on_gpu():
    cupy = pytest.importorskip("cupy")
    src = 'extern "C" __global__ void kbot_probe_add(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] += 1.0f; }'
    kern = cupy.RawKernel(src, "kbot_probe_add")
    x = torch.zeros(32, device="cuda")
    with rt.CudaLaunchCounter(rt.kernel_names_in([src])) as c:
        kern((1,), (32,), (cupy.asarray(x), cupy.int32(32)))
    assert c.count == 1, c.kernels
    assert c.backend == "cupti-callbacks"  # the fast observer, not the 5 s torch-profiler fallback
    with rt.CudaLaunchCounter(["kbot_probe_add"]) as c2:
        x.mul_(2)
    assert c2.total >= 1 and c2.count == 0
    assert rules(rt.kernel_launch_check(c2)) == {"no-own-kernel"}


@pytest.mark.gpu
def test_launch_counter_compiled_on_gpu(tmp_path):
    import importlib.util

    (tmp_path / "main.py").write_text(_KERNEL)
    with rt.LaunchCounter(own_paths=[tmp_path]) as c:
        spec = importlib.util.spec_from_file_location("kbot_solution_gpu_probe", tmp_path / "main.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        x = torch.arange(8, dtype=torch.float32, device="cuda")
        y = torch.empty_like(x)
        mod.add_one[(1,)](x, y, 8, BLOCK=8)
        torch.cuda.synchronize()
        assert torch.equal(y, x + 1)
    assert c.count == 1


_SIDE_STREAM_IN_A_FRESH_PROCESS = """
import sys
import torch
from harness.guard import runtime as rt
x = torch.randn(1 << 20, device="cuda")
side = torch.cuda.Stream()
with rt.CudaLaunchCounter(backend=sys.argv[1]) as same:
    x.mul_(2)
with rt.CudaLaunchCounter(backend=sys.argv[1]) as two:
    x.mul_(2)
    with torch.cuda.stream(side):
        x.add_(1)
assert same.total >= 1 and rt.side_stream_check(same) == [], (same.backend, same.streams)
assert [f.rule for f in rt.side_stream_check(two)] == ["runtime-side-stream"], (two.backend, two.streams)
print(same.backend)
"""


@pytest.mark.gpu
def test_profiler_fallback_sees_side_streams_in_a_process_without_the_callback_subscriber():
    # CUPTI takes one subscriber per process: once the callback observer subscribed (the other tests in
    # this process), the torch profiler cannot start here, so the fallback is tested in a fresh process.
    p = subprocess.run([sys.executable, "-c", _SIDE_STREAM_IN_A_FRESH_PROCESS, "profiler"], capture_output=True, text=True, timeout=300,
                       cwd=str(Path(__file__).resolve().parents[2]))
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().splitlines()[-1] == "torch-profiler"


@pytest.mark.gpu
def test_side_stream_check_on_gpu():
    backend = "callbacks"  # the profiler fallback runs in a fresh process (the test above)
    x = torch.randn(1 << 20, device="cuda")
    host = torch.empty(1 << 20, pin_memory=True)
    torch.cuda.synchronize()
    with rt.CudaLaunchCounter(backend=backend) as same:
        x.mul_(2)
        host.copy_(x, non_blocking=True)  # a copy on the current stream is not a side stream
        x.zero_()
    assert same.backend == ("cupti-callbacks" if backend == "callbacks" else "torch-profiler")
    assert same.total >= 1 and rt.side_stream_check(same) == [], same.streams
    side = torch.cuda.Stream()
    with rt.CudaLaunchCounter(backend=backend) as two:
        x.mul_(2)
        with torch.cuda.stream(side):
            x.add_(1)
    assert rules(rt.side_stream_check(two)) == {"runtime-side-stream"}, two.streams
    side.synchronize()
    with rt.CudaLaunchCounter(backend=backend) as copy_only:  # a side stream that only copies
        x.mul_(2)
        with torch.cuda.stream(side):
            host.copy_(x, non_blocking=True)
    assert rules(rt.side_stream_check(copy_only)) == {"runtime-side-stream"}, (copy_only.streams, copy_only.unparsed)


def test_side_stream_check_without_cuda():
    c = rt.CudaLaunchCounter()
    c.available, c.streams = False, {1, 2}
    assert rt.side_stream_check(c) == []
    c.available = True
    assert rules(rt.side_stream_check(c)) == {"runtime-side-stream"}


def test_side_stream_check_with_the_callers_stream_known():
    c = rt.CudaLaunchCounter()
    c.available, c.expected_stream = True, 0
    c.streams = {0}
    assert rt.side_stream_check(c) == []
    c.streams = {0xBEEF}  # all of the call's work on one stream, but not the caller's
    assert rules(rt.side_stream_check(c)) == {"runtime-side-stream"}
    c.streams, c.unreadable_launches = {0}, ["cuLaunchCooperativeKernelMultiDevice"]
    assert rules(rt.side_stream_check(c)) == {"runtime-side-stream"}
    c.unreadable_launches, c.blinded = [], True
    assert rules(rt.side_stream_check(c)) == {"runtime-observer-blinded"}
