"""The GPU pool (harness/gpu_pool.py): which GPUs ``--gpus`` means, one job per GPU at a time, a GPU
lost under a job; and a worker pinned to its GPU (harness/runner.py worker_env)."""

from __future__ import annotations

import threading
import time

import pytest

from harness import gpu_pool
from harness.gpu_pool import GPU, GPUSelectionError, NvidiaSmi, Pool, parse_gpu_list, select
from harness.runner import worker_env

H200 = [GPU(i, "NVIDIA H200", f"GPU-{i:08x}-aaaa", 143771) for i in range(4)]


class Provider:
    """Pure-Python GPUs for the scheduling tests (no processes): ``die`` marks one lost."""

    kind = "cuda"

    def __init__(self, gpus):
        self.gpus = gpus
        self.dead: dict[int, str] = {}

    def list(self):
        return list(self.gpus)

    def lost(self, gpu):
        return self.dead.get(gpu.index)

    def occupants(self, gpu):
        return []


# ------------------------------------------------------------------------------------------ --gpus


def test_gpus_spec_count_all_and_list():
    assert select("all", H200) == H200
    assert select("2", H200) == H200[:2]
    assert select(4, H200) == H200
    assert [g.index for g in select("0,2", H200)] == [0, 2]
    assert [g.index for g in select("3,", H200)] == [3]  # one given GPU alone


@pytest.mark.parametrize("spec, msg", [
    ("5", "only 4 GPUs here (0: NVIDIA H200, 1: NVIDIA H200, 2: NVIDIA H200, 3: NVIDIA H200)"),
    ("0", "give a count (1 or more)"),
    ("two", "give a count"),
    ("0,7", "no GPU 7 here"),
    ("1,1", "a GPU named twice"),
    ("0,x", "indices only"),
])
def test_gpus_spec_refused_clearly(spec, msg):
    with pytest.raises(GPUSelectionError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        select(spec, H200)


def test_no_gpu_at_all_is_refused():
    with pytest.raises(GPUSelectionError, match="no GPU here"):
        select("1", [])


def test_nvidia_smi_listing_parsed_and_restricted_to_the_visible_gpus(monkeypatch):
    text = ("0, NVIDIA H200, GPU-1111, 143771\n1, NVIDIA H200, GPU-2222, 143771\n"
            "2, NVIDIA H200, GPU-3333, 143771\n")
    assert [(g.index, g.uuid, g.memory_mib) for g in parse_gpu_list(text)] == [(0, "GPU-1111", 143771), (1, "GPU-2222", 143771),
                                                                               (2, "GPU-3333", 143771)]
    monkeypatch.setattr(gpu_pool, "_smi", lambda args, timeout=30: (0, text))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert len(NvidiaSmi().list()) == 3
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-3333,0")  # a runner pinned by its supervisor keeps to its GPUs
    assert [g.index for g in NvidiaSmi().list()] == [0, 2]
    with pytest.raises(GPUSelectionError, match="only 2 GPUs here"):
        gpu_pool.gpus_for("3", NvidiaSmi())


def test_nvidia_smi_absent_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(gpu_pool, "_smi", lambda args, timeout=30: (127, "nvidia-smi is not on PATH"))
    with pytest.raises(GPUSelectionError, match="--gpus needs NVIDIA GPUs.*not on PATH"):
        NvidiaSmi().list()


@pytest.mark.parametrize("rc, out, lost", [
    (0, "3, 00000000:8A:00.0, 41", False),
    (15, "Unable to determine the device handle for GPU 0000:8A:00.0: GPU is lost.  Reboot the system to recover this GPU", True),
    (0, "3, 00000000:8A:00.0, [GPU requires reset]", True),
    (0, "3, 00000000:8A:00.0, [Unknown Error]", True),
])
def test_a_lost_gpu_is_recognized_from_nvidia_smi(monkeypatch, rc, out, lost):
    monkeypatch.setattr(gpu_pool, "_smi", lambda args, timeout=30: (rc, out))
    assert (NvidiaSmi().lost(H200[3]) is not None) is lost


# ------------------------------------------------------------------------------------------ pinning


def test_a_worker_sees_only_its_gpu_by_uuid():
    env = worker_env("cuda", gpu=H200[2])
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-00000002-aaaa" and env[gpu_pool.ENV_GPU] == "2"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert worker_env("cuda", gpu=GPU(1, "x"))["CUDA_VISIBLE_DEVICES"] == "1"  # no UUID known: the index
    cpu = worker_env("cpu", gpu=H200[2])  # fake GPUs: the CPU run still sees no CUDA device, and is marked
    assert cpu["CUDA_VISIBLE_DEVICES"] == "" and cpu[gpu_pool.ENV_GPU] == "2"
    assert gpu_pool.ENV_GPU not in worker_env("cpu")


def test_nvidia_smi_in_a_pinned_worker_asks_for_its_own_gpu(monkeypatch):
    from harness import env as henv

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-00000002-aaaa")
    assert henv._smi_query()[-2:] == ["-i", "GPU-00000002-aaaa"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert "-i" not in henv._smi_query()


# ------------------------------------------------------------------------------------------ the pool


class Recorder:
    """A job that takes ``seconds`` and records, per GPU, when it ran (to check no two overlapped)."""

    def __init__(self, seconds=0.3, on_start=None):
        self.seconds, self.on_start = seconds, on_start
        self.spans: list[tuple[int, str, float, float]] = []
        self.lock = threading.Lock()

    def __call__(self, job, gpu):
        t0 = time.monotonic()
        if self.on_start:
            self.on_start(job, gpu)
        time.sleep(self.seconds)
        with self.lock:
            self.spans.append((gpu.index, job, t0, time.monotonic()))
        return f"{job}@{gpu.index}"

    def overlaps(self):
        out = []
        for g in {s[0] for s in self.spans}:
            spans = sorted((s for s in self.spans if s[0] == g), key=lambda s: s[2])
            out += [(a[1], b[1]) for a, b in zip(spans, spans[1:]) if b[2] < a[3]]
        return out


def test_jobs_spread_one_per_gpu_and_come_back_in_order():
    pool = Pool(H200, Provider(H200))
    run = Recorder(0.4)
    t0 = time.monotonic()
    placed = pool.map([f"c{i}" for i in range(8)], run)
    wall = time.monotonic() - t0
    assert [p.job for p in placed] == [f"c{i}" for i in range(8)]
    assert all(p.result == f"{p.job}@{p.gpu.index}" and p.error is None for p in placed)
    assert run.overlaps() == []  # never two jobs on one GPU at a time
    assert {p.gpu.index for p in placed} == {0, 1, 2, 3}
    assert wall < 0.4 * 8 * 0.6  # 8 jobs of 0.4 s on 4 GPUs: about two rounds, far from eight


def test_a_gpu_lost_under_its_job_gets_the_job_retried_elsewhere_and_leaves_the_pool():
    prov = Provider(H200[:3])
    pool = Pool(H200[:3], prov)
    set_aside = []

    def on_start(job, gpu):
        if gpu.index == 1 and job == "c1":
            prov.dead[1] = "GPU is lost"

    run = Recorder(0.2, on_start)
    placed = pool.map(["c0", "c1", "c2", "c3", "c4"], run, lost=lambda job, gpu, result: set_aside.append((job, gpu.index, result)))
    c1 = placed[1]
    assert c1.error is None and c1.gpu.index != 1 and c1.result == f"c1@{c1.gpu.index}"
    assert [(a.gpu, a.lost) for a in c1.attempts] == [(1, "GPU is lost"), (c1.gpu.index, None)]
    assert set_aside == [("c1", 1, "c1@1")]  # its result on the lost GPU is handed back to be set aside, never kept
    assert pool.lost == {1: "GPU is lost"}
    assert all(p.gpu.index != 1 for p in placed) and all(p.error is None for p in placed)
    assert run.overlaps() == []


def test_a_job_that_loses_every_gpu_it_gets_is_a_harness_failure_and_the_round_completes():
    prov = Provider(H200[:3])
    pool = Pool(H200[:3], prov, max_attempts=2)

    def on_start(job, gpu):
        if job == "killer":  # takes down every GPU it runs on
            prov.dead[gpu.index] = f"GPU {gpu.index} fell off the bus"

    placed = pool.map(["a", "killer", "b", "c"], Recorder(0.2, on_start))
    killer = placed[1]
    assert killer.result is None and killer.error.startswith("harness failure: lost 2 GPUs")
    assert len(killer.attempts) == 2 and all(a.lost for a in killer.attempts)
    assert [p.error for p in placed if p.job != "killer"] == [None, None, None]  # the rest of the round finished
    assert len(pool.alive()) == 1


def test_jobs_left_when_no_gpu_remains_are_harness_failures_not_results():
    prov = Provider(H200[:1])
    pool = Pool(H200[:1], prov)

    def on_start(job, gpu):
        prov.dead[0] = "gone"

    placed = pool.map(["a", "b"], Recorder(0.05, on_start))
    assert all(p.result is None for p in placed)
    assert "lost 1 GPU" in placed[0].error and "no GPU of the pool is left" in placed[1].error
    assert placed[1].attempts == []  # it never ran anywhere


def test_an_exception_on_a_live_gpu_is_that_jobs_harness_failure_only():
    pool = Pool(H200[:2], Provider(H200[:2]))

    def run(job, gpu):
        if job == "bad":
            raise OSError("disk full")
        return job

    placed = pool.map(["ok", "bad", "ok2"], run)
    assert [p.result for p in placed] == ["ok", None, "ok2"]
    assert "harness failure on GPU" in placed[1].error and "OSError: disk full" in placed[1].error
    assert isinstance(placed[1].exc, OSError)
    assert pool.lost == {}


def test_a_lease_waits_for_processes_found_on_its_gpu_and_says_when_they_stayed():
    class Busy(Provider):
        def __init__(self, gpus, polls):
            super().__init__(gpus)
            self.polls = dict(polls)  # GPU -> how many more times it is found occupied

        def occupants(self, gpu):
            if self.polls.get(gpu.index, 0) > 0:
                self.polls[gpu.index] -= 1
                return [4242]
            return []

    pool = Pool(H200[:2], Busy(H200[:2], {0: 2, 1: 10**6}), busy_wait_s=1.0)
    placed = pool.map(["a", "b"], Recorder(0.05))
    by_gpu = {p.attempts[0].gpu: p.attempts[0] for p in placed}
    assert by_gpu[0].occupants == [4242] and 0.4 <= by_gpu[0].waited_s < 1.0 and not by_gpu[0].shared  # it left
    assert by_gpu[1].occupants == [4242] and by_gpu[1].waited_s >= 1.0 and by_gpu[1].shared  # it stayed: said
    assert all(p.error is None for p in placed)


def test_a_result_that_cannot_be_set_aside_is_not_retried_and_the_pool_does_not_hang():
    prov = Provider(H200[:2])
    pool = Pool(H200[:2], prov)

    def on_start(job, gpu):
        if job == "x":
            prov.dead[gpu.index] = "gone"

    def lost(job, gpu, result):
        raise PermissionError("read-only run folder")

    def progress(kind, p):
        raise RuntimeError("a broken progress printer")

    placed = pool.map(["x", "y", "z"], Recorder(0.05, on_start), lost=lost, progress=progress)
    assert "could not be set aside" in placed[0].error and len(placed[0].attempts) == 1  # not retried on top of it
    assert [p.result is not None for p in placed[1:]] == [True, True]


def test_pool_refuses_no_gpus_and_repeats():
    with pytest.raises(GPUSelectionError):
        Pool([], Provider([]))
    with pytest.raises(GPUSelectionError):
        Pool([H200[0], H200[0]], Provider(H200))
