"""On a GPU (`pytest -m gpu`): the timer's CUPTI kernel time with the real library. A call's span covers
all its kernels, whichever thread enqueued them; a candidate launching the timer's own spin kernel
withholds the figure instead of shrinking it."""

import threading

import pytest
import torch

from harness import cupti_activity
from harness.measure import Refresher, Timer
from harness.timing_config import TimingConfig

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def tracer():
    t = cupti_activity.tracer()
    assert t is not None, cupti_activity.unavailable()
    return t


def _time(tracer, fn):
    timer = Timer(torch.device("cuda"), TimingConfig(recheck=0, budget_s=0.2), Refresher([]), 0, tracer=tracer)
    return timer.run([lambda: (fn(), {})[1]], {}, [None], min_iters=50)[0]


def test_a_call_of_two_kernels_is_timed_from_the_first_start_to_the_last_end(tracer):
    x = torch.randn(1 << 24, device="cuda")
    y = torch.empty_like(x)
    one = _time(tracer, lambda: torch.mul(x, 2.0, out=y))
    two = _time(tracer, lambda: (torch.mul(x, 2.0, out=y), torch.add(y, 1.0, out=y)))
    g1, why1 = one.kernel_time()
    g2, why2 = two.kernel_time()
    assert why1 == "" and why2 == "", (why1, why2)
    m1, m2 = sorted(g1)[len(g1) // 2], sorted(g2)[len(g2) // 2]
    assert 1.6 * m1 < m2 < 2.6 * m1, (m1, m2)  # the add reads and writes as much as the mul
    e1 = sorted(one.times_ms)[len(one.times_ms) // 2]
    assert 0 <= e1 - m1 < 0.010, (e1, m1)  # inside the events, by about the launch floor
    assert one.gpu_over == 0 and one.gpu_missing == 0


def test_work_from_another_thread_counts_in_the_calls_window(tracer):
    x = torch.randn(1 << 24, device="cuda")
    y = torch.empty_like(x)
    direct = _time(tracer, lambda: torch.mul(x, 2.0, out=y))

    def call():
        stream = torch.cuda.current_stream()

        def work():
            with torch.cuda.stream(stream):
                torch.mul(x, 2.0, out=y)

        t = threading.Thread(target=work)
        t.start()
        t.join()

    threaded = _time(tracer, call)
    (gd, wd), (gt, wt) = direct.kernel_time(), threaded.kernel_time()
    assert wd == "" and wt == "", (wd, wt)
    md, mt = sorted(gd)[len(gd) // 2], sorted(gt)[len(gt) // 2]
    assert abs(mt - md) < 0.1 * md, (md, mt)


def test_a_candidate_launching_the_spin_kernel_withholds_the_kernel_time(tracer):
    x = torch.randn(1 << 20, device="cuda")
    s = _time(tracer, lambda: (torch.cuda._sleep(100), x.mul_(1.0)))
    times, why = s.kernel_time()
    assert times is None and "spin kernels" in why, why
    assert s.times_ms  # the event times are still there
