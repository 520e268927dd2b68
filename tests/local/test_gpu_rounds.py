"""``kbot optimize --gpus``: a round's candidates measured at once over a pool of GPUs
(bot/campaign/gpu_rounds.py), decided one at a time. The pool, the round and the loop are the real
ones; each GPU's lane is the synthetic harness of test_local_loop_synthetic.py (latencies from the
kernel's tunables), so a run on three GPUs can be compared decision for decision with a one-GPU run.
The real harness on fake GPUs is exercised in tests/harness/test_eval_many_gpus.py and below."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import pytest

from bot.campaign.gpu_rounds import GPUHarness, round_candidates
from bot.campaign.local_loop import OptimizeOptions, Workspace, optimize
from harness.gpu_pool import GPUSelectionError, HarnessFailure, Pool
from tests.fakes.gpus import FakeGPUs, Sampler
from tests.local.test_local_loop_synthetic import WORKLOADS, SyntheticHarness, _opts


class Lane(SyntheticHarness):
    """The synthetic harness on one GPU: a measurement takes ``seconds``; it records when it ran, and
    stamps its report with its GPU as the runner does (``config.gpu``)."""

    def __init__(self, cache, gpu, spans, seconds=0.15, fail=None):
        super().__init__(cache)
        self.gpu, self.spans, self.seconds, self.fail = gpu, spans, seconds, fail

    def evaluate(self, solution, baseline):
        key = (solution.content_hash(), baseline.content_hash() if baseline else None)
        if key in self.cache:
            return super().evaluate(solution, baseline)
        t0 = time.monotonic()
        if self.fail is not None:
            self.fail(self, solution, baseline)
        time.sleep(self.seconds)
        rep = super().evaluate(solution, baseline).model_copy(deep=True)
        rep.config["gpu"] = self.gpu.record()
        rep.config["ceilings"] = {"gpu_name": self.gpu.name, "device": "cuda", "copy_bandwidth_gbs": 4000.0 + self.gpu.index, "source": "measured"}
        self.cache[key] = rep
        self.spans.append((self.gpu.index, solution.name, t0, time.monotonic()))
        return rep


def _gpu_harness(n, fail=None, seconds=0.15):
    fake = FakeGPUs(n, name="NVIDIA H200")
    cache, spans = {}, []
    pool = Pool(fake.list(), fake)
    lanes = {g.index: Lane(cache, g, spans, seconds, fail) for g in pool.gpus}
    return GPUHarness(pool, lanes), fake, spans


def _decisions(s):
    return [(r["node"], r["decision"], r["pr"]) for r in s["candidates"]]


def _overlaps(spans):
    out = []
    for g in {s[0] for s in spans}:
        mine = sorted((s for s in spans if s[0] == g), key=lambda s: s[2])
        out += [(a[1], b[1]) for a, b in zip(mine, mine[1:]) if b[2] < a[3]]
    return out


def test_a_round_on_three_gpus_makes_the_one_gpu_decisions(tmp_path):
    seq = optimize(_opts(tmp_path / "one", rounds=3, candidates=3), harness=SyntheticHarness({}))
    gh, _, spans = _gpu_harness(3)
    par = optimize(_opts(tmp_path / "three", rounds=3, candidates=3), harness=gh)
    assert _decisions(par) == _decisions(seq)  # the same candidates, the same PRs, the same verdicts, in order
    assert par["champion"] == seq["champion"]
    one, three = Workspace(tmp_path / "one").forge, Workspace(tmp_path / "three").forge
    assert [(p.number, p.merged) for p in three.list_prs(state="all")] == [(p.number, p.merged) for p in one.list_prs(state="all")]
    assert "promote" in [d for _, d, _ in _decisions(seq)]
    # Measured concurrently, never two on one GPU; every candidate row says where it was measured.
    assert _overlaps(spans) == []
    assert any(a[0] != b[0] and a[2] < b[3] and b[2] < a[3] for a in spans for b in spans)  # two GPUs busy at once
    assert {r.get("gpu") for r in par["candidates"]} <= {0, 1, 2} and all("gpu" in r for r in par["candidates"])
    # A promotion mid-round: the candidates after it were measured again, paired with the new champion.
    by_solution: dict[str, set] = {}
    for p in par["gpu_placements"]:
        by_solution.setdefault(p["solution"], set()).add(p["baseline"])
    assert any(len(b) > 1 for b in by_solution.values()), par["gpu_placements"]
    gpus = par["gpus"]
    assert [g["index"] for g in gpus] == [0, 1, 2]
    assert all(g["ceilings"]["copy_bandwidth_gbs"] == 4000.0 + g["index"] and g["name"] == "NVIDIA H200" for g in gpus if g["evaluations"])


def test_a_gpu_that_dies_mid_round_changes_no_decision(tmp_path):
    seq = optimize(_opts(tmp_path / "one", rounds=2, candidates=3), harness=SyntheticHarness({}))
    fake_box = {}
    died = []

    def fail(lane, solution, baseline):
        # The second evaluation GPU 1 gets: it falls off the bus mid-measurement, the harness errors out.
        died.append(lane.gpu.index) if lane.gpu.index == 1 else None
        if lane.gpu.index == 1 and died.count(1) == 2:
            fake_box["fake"].die(1)
            fake_box["t_dead"] = time.monotonic()
            raise RuntimeError("CUDA error: unspecified launch failure")

    gh, fake, spans = _gpu_harness(3, fail=fail)
    fake_box["fake"] = fake
    par = optimize(_opts(tmp_path / "three", rounds=2, candidates=3), harness=gh)
    assert _decisions(par) == _decisions(seq)
    assert fake.lost(fake.gpus[1]) is not None
    lost = [p for p in par["gpu_placements"] if any(a["lost"] for a in p["attempts"])]
    assert len(lost) == 1 and lost[0]["gpu"] != 1 and lost[0]["attempts"][0]["gpu"] == 1
    assert {g["index"]: g.get("lost") for g in par["gpus"]}[1] == "fake GPU fell off the bus"
    assert all(s[2] < fake_box["t_dead"] for s in spans if s[0] == 1)  # nothing ran on GPU 1 after it died
    assert _overlaps(spans) == []


def test_a_candidate_no_gpu_could_measure_gets_no_verdict(tmp_path):
    def fail(lane, solution, baseline):
        if baseline is not None:  # every candidate measurement takes its GPU down
            box["fake"].die(lane.gpu.index)
            raise RuntimeError("GPU is lost")

    box = {}
    gh, fake, _ = _gpu_harness(2, fail=fail)
    box["fake"] = fake
    with pytest.raises(HarnessFailure, match="harness failure: .*GPU.*nothing was decided for it"):
        optimize(_opts(tmp_path, rounds=1, candidates=2), harness=gh)
    ws = Workspace(tmp_path / "ws")
    prs = list(ws.forge.list_prs(state="all"))
    assert prs and all(p.is_open and not p.merged for p in prs)  # no verdict, no close: the campaign resumes from it
    outcomes = [p for p in (tmp_path / "ws" / "campaigns").rglob("outcomes.json")]
    decided = {k: v["decision"] for o in outcomes for k, v in json.loads(o.read_text()).items()}
    assert set(decided.values()) == {"champion"}  # only the starting champion was measured and recorded


def test_an_interrupted_round_resumes_on_the_gpus_from_the_stores_records(tmp_path):
    """The harness fails (not a lost GPU) on a candidate of the first round: the command stops before deciding
    that candidate; run again, the campaign resumes, and ``Campaign.resume`` evaluates the pending
    nodes (before the campaign object exists: the round is read from the store) over the GPUs."""
    seq = optimize(_opts(tmp_path / "one", rounds=2, candidates=3), harness=SyntheticHarness({}))
    # The first candidate of the first round: always decided against the starting champion, whatever
    # order the GPUs finish in (a later one is measured again after a promotion, so its first pairing
    # may go unused).
    target = seq["candidates"][1]["solution"]
    calls = []

    def fail(lane, solution, baseline):
        if baseline is not None and solution.name == target:
            calls.append(solution.name)
            if len(calls) == 1:
                raise OSError("disk full")

    gh, _, _ = _gpu_harness(3, fail=fail)
    with pytest.raises(HarnessFailure, match="disk full"):
        optimize(_opts(tmp_path / "three", rounds=2, candidates=3), harness=gh)
    store = tmp_path / "three" / "ws" / "campaigns" / "rmsnorm_h4096" / "001"
    pending = round_candidates(SimpleNamespace(campaign=None, store=store))  # what the resume will see
    assert pending and target in [p.name for p in pending]
    again, _, spans = _gpu_harness(3)
    again.lanes[0].cache.update(gh.lanes[0].cache)  # the run folders of the first attempt outlive it
    par = optimize(_opts(tmp_path / "three", rounds=2, candidates=3), harness=again)
    assert par["campaign"].endswith("/001")  # resumed, not a new campaign
    assert _decisions(par) == _decisions(seq)
    assert spans and _overlaps(spans) == []


def test_gpus_is_checked_against_the_host(tmp_path):
    with pytest.raises(GPUSelectionError, match="--gpus 3: only 2 GPUs here"):
        optimize(OptimizeOptions(definition="rmsnorm_h4096", device="cpu", workspace=tmp_path / "ws", workloads=WORKLOADS, gpus="3"),
                 gpu_provider=FakeGPUs(2))
    with pytest.raises(GPUSelectionError, match="would run on cpu here"):
        optimize(OptimizeOptions(definition="rmsnorm_h4096", device="cpu", workspace=tmp_path / "ws", workloads=WORKLOADS, gpus="2"))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_real_harness_on_two_fake_gpus(tmp_path):
    """``optimize(gpus=...)`` builds one real HarnessEvaluator per GPU: CPU evaluations in worker
    processes pinned to their fake GPU, watched from outside."""
    fake = FakeGPUs(2)
    one = tmp_path / "one.jsonl"  # one workload, one trial: the CPU cost is the worker processes, not the kernel
    one.write_text(WORKLOADS.read_text().splitlines()[0] + "\n")
    with Sampler(2) as seen:
        s = optimize(OptimizeOptions(definition="rmsnorm_h4096", agent="offline", device="cpu", workspace=tmp_path / "ws",
                                     workloads=one, rounds=1, candidates=2, budget_s=0.02, trials=1, gpus="all"), gpu_provider=fake)
    rows = [r for r in s["candidates"] if r["pr"] is not None]
    assert rows and all(r["decision"] in ("promote", "reject") for r in rows)
    assert {r["gpu"] for r in rows} <= {0, 1} and all("gpu" in r for r in s["candidates"])
    assert max(seen.max_workers.values()) == 1 and (seen.max_busy == 2 or len(rows) == 1)
    assert fake.occupied_at_lease == []
    assert [g["index"] for g in s["gpus"]] == [0, 1]
    assert all(g["ceilings"] for g in s["gpus"] if g["evaluations"])
    assert s["evaluations_run"] >= 1 + len(rows)
    assert not [t for t in threading.enumerate() if t.name.startswith("kbot-gpu")]  # the pool's lanes end with their round
