"""The timer's coverage rule: a timed call enqueued after its GPU hold ended is dropped (host latency
would sit between its events), the hold doubles while that keeps happening, and at the longest hold
late calls are kept and counted as host-bound. Driven with stand-in events on the CPU."""

import torch

from harness import measure
from harness.measure import Refresher, Samples, Timer
from harness.timing_config import TimingConfig


class Ev:
    def __init__(self, t_ms: float):
        self.t = t_ms


def _elapsed(a: Ev, b: Ev) -> float:
    return b.t - a.t


def _row(hold_ms: float, kernel_ms: float, enqueued_ms: float, j: int = 0):
    h, s, e = Ev(-hold_ms), Ev(0.0), Ev(kernel_ms)  # intervals exact in floating point
    return (j, (h, s, e), None, int(enqueued_ms * 1e6))


def _timer(hold_cycles: int = 200_000) -> Timer:
    return Timer(torch.device("cpu"), TimingConfig(hold_cycles=hold_cycles), Refresher([]), 0)


def test_covered_calls_are_kept_and_give_the_clock(monkeypatch):
    monkeypatch.setattr(measure, "_event_elapsed", _elapsed)
    t, smp = _timer(), [Samples()]
    hold = t._collect([[_row(0.1, 0.004, 0.03)] for _ in range(10)], smp, 200_000)
    assert hold == 200_000 and smp[0].times_ms == [0.004] * 10 and smp[0].late_dropped == 0
    assert smp[0].sm_clock_mhz()["median"] == 2000.0  # 200k cycles in 100 µs


def test_late_calls_are_dropped_and_the_hold_doubles_until_they_are_covered(monkeypatch):
    monkeypatch.setattr(measure, "_event_elapsed", _elapsed)
    t, smp = _timer(), [Samples()]
    chunk = [[_row(0.1, 0.030, 0.15)] for _ in range(3)] + [[_row(0.1, 0.004, 0.03)] for _ in range(7)]  # 3 of 10 late, by 1.5x
    hold = t._collect(chunk, smp, 200_000)
    assert smp[0].times_ms == [0.004] * 7 and smp[0].late_dropped == 3 and hold == 400_000
    hold = t._collect([[_row(0.1, 0.030, 0.2)]] + [[_row(0.2, 0.004, 0.03)] for _ in range(9)], smp, hold)  # 1 of 10: no doubling
    assert hold == 400_000 and smp[0].late_dropped == 4 and smp[0].hold_cycles == 400_000


def test_at_the_longest_hold_late_calls_are_kept_as_host_bound(monkeypatch):
    monkeypatch.setattr(measure, "_event_elapsed", _elapsed)
    t, smp = _timer(), [Samples()]
    hold = t._collect([[_row(1.6, 0.5, 3.0)] for _ in range(4)], smp, 16 * 200_000)  # a call that synchronizes
    assert hold == 16 * 200_000 and smp[0].late_kept == 4 and smp[0].late_dropped == 0 and smp[0].times_ms == [0.5] * 4


def test_a_late_member_drops_its_whole_interleaved_iteration(monkeypatch):
    monkeypatch.setattr(measure, "_event_elapsed", _elapsed)
    t, smp = _timer(), [Samples(), Samples()]
    rows = [[_row(0.1, 0.004, 0.03, 0), _row(0.1, 0.005, 0.03, 1)], [_row(0.1, 0.004, 0.03, 0), _row(0.1, 0.030, 0.2, 1)]]
    t._collect(rows, smp, 200_000)
    assert smp[0].times_ms == [0.004] and smp[1].times_ms == [0.005]  # still paired one to one


def test_cpu_rows_have_no_hold_and_are_kept_as_measured():
    t, smp = _timer(), [Samples()]
    t._collect([[(0, None, 0.25, 0)], [(0, None, 0.5, 0)]], smp, 200_000)
    assert smp[0].times_ms == [0.25, 0.5] and smp[0].clock_mhz == []


def test_a_chunk_that_is_all_late_goes_to_the_longest_hold_at_once(monkeypatch):
    monkeypatch.setattr(measure, "_event_elapsed", _elapsed)
    t, smp = _timer(), [Samples()]
    hold = t._collect([[_row(0.1, 25.0, 30.0)] for _ in range(25)], smp, 200_000)  # a 25 ms call that synchronizes
    assert hold == 16 * 200_000 and smp[0].late_dropped == 25
    hold = t._collect([[_row(1.6, 25.0, 30.0)] for _ in range(25)], smp, hold)
    assert smp[0].late_kept == 25 and len(smp[0].times_ms) == 25  # measured, and flagged host-bound


def test_a_slow_synchronizing_call_still_gets_a_time_within_its_budget(monkeypatch):
    # The whole run loop on the CPU with CUDA paths forced on and stand-in events: each call takes 25 ms
    # of host time after its hold was enqueued; it must end with samples, not 'no timed call'.
    import time as _time

    clock = {"ms": 0.0}

    class FakeEvent:
        def __init__(self, enable_timing=True):
            self.t = None

    def record(ev):
        ev.t = clock["ms"]

    def elapsed(a, b):
        return b.t - a.t

    def sleep(cycles):
        clock["ms"] += cycles / 2e6  # 2 GHz: 200k cycles = 0.1 ms

    monkeypatch.setattr(measure, "_Event", FakeEvent)
    monkeypatch.setattr(measure, "_event_record", record)
    monkeypatch.setattr(measure, "_event_elapsed", elapsed)
    monkeypatch.setattr(measure, "_gpu_sleep", sleep)
    monkeypatch.setattr(measure, "_cuda_sync", lambda: None)
    monkeypatch.setattr(measure, "_zero", lambda t: t)
    t = _timer()
    t.cuda = True
    t._flush = torch.empty(1)

    def slow_call():
        _time.sleep(0.025)
        clock["ms"] += 25.0
        return {}

    out = t.run([slow_call], {}, [None], budget_s=0.25, min_iters=10, recheck=0, warmup=1)
    s = out[0]
    assert s.times_ms and s.late_kept >= 10 and s.late_dropped <= 25 and s.hold_cycles == 16 * 200_000


def test_a_little_late_only_doubles_the_hold(monkeypatch):
    # 150 µs of host time behind a 100 µs hold (the first chunk of a workload on the H200): 2x is enough.
    monkeypatch.setattr(measure, "_event_elapsed", _elapsed)
    t, smp = _timer(), [Samples()]
    assert t._collect([[_row(0.1, 0.004, 0.15)] for _ in range(25)], smp, 200_000) == 400_000
    # 300 µs needs 300 / (0.9 x 100) = 3.3x: the next power of two
    assert t._collect([[_row(0.1, 0.004, 0.3)] for _ in range(25)], [Samples()], 200_000) == 800_000
