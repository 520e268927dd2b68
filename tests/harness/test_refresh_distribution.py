"""The timer redraws an input from the distribution it was made with: N(0, 1) for inputs marked random,
the ``normal`` generator's own std and mean for inputs made by it; structured generators keep theirs."""

from pathlib import Path

import torch

import harness.operators  # noqa: F401  (registers the DSA generators)
from harness.defconfig import load_config
from harness.inputs import make_inputs
from harness.measure import Refresher, refreshable_inputs
from harness.schema import load_definition, load_workloads

REPO = Path(__file__).resolve().parents[2]
INDEXER = "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64"


def _indexer():
    dpath = REPO / "definitions" / INDEXER / "definition.json"
    d = load_definition(dpath)
    return d, load_config(INDEXER, dpath), load_workloads(REPO / "definitions" / INDEXER / "workloads.small.jsonl", d)[1]


def test_generator_inputs_are_redrawn_at_their_own_scale():
    d, cfg, w = _indexer()
    names = refreshable_inputs(d, w.inputs, cfg.inputs, set())
    assert names == {"q_index_fp8": (160.0, 0.0), "weights": (6.9e-5, 0.0)}  # the cache, lengths and table keep theirs
    x = make_inputs(d, w, seed=3, device="cpu", config=cfg)
    made = {n: x[n].float().std().item() for n in names}
    before = {n: x[n].clone() for n in x if isinstance(x[n], torch.Tensor)}
    Refresher(names, torch.Generator().manual_seed(1))(x)
    for n in names:
        assert not torch.equal(x[n], before[n])
        redrawn = x[n].float().std().item()
        assert abs(redrawn / made[n] - 1) < 0.1, (n, made[n], redrawn)
    assert abs(x["weights"].float().std().item() - 6.9e-5) < 1e-5
    assert x["q_index_fp8"].float().abs().max().item() <= 448
    for n in ("k_index_cache_fp8", "seq_lens", "block_table"):
        assert torch.equal(x[n], before[n])


def test_random_inputs_stay_unit_normal_and_a_list_still_works():
    d, cfg, w = _indexer()
    assert refreshable_inputs(d, w.inputs, {}, set()) == {"q_index_fp8": (1.0, 0.0), "weights": (1.0, 0.0)}
    assert refreshable_inputs(d, w.inputs, cfg.inputs, set(d.inputs)) == {}  # builder-made: kept
    x = {"a": torch.zeros(10000)}
    r = Refresher(["a"], torch.Generator().manual_seed(0))
    r(x)
    assert abs(x["a"].std().item() - 1) < 0.05 and r.names == {"a": (1.0, 0.0)}


def test_a_patched_torch_does_not_change_the_redraw(monkeypatch):
    """The refresher calls what it captured at import: a candidate that patches torch.finfo, clamp,
    mul or add afterwards (to make every timed input the same) changes nothing."""
    names = {"q": (160.0, 0.0), "w": (6.9e-5, 0.0)}

    def draw():
        x = {"q": torch.zeros(4096, dtype=torch.float8_e4m3fn), "w": torch.zeros(4096)}
        Refresher(names, torch.Generator().manual_seed(7))(x)
        return x

    honest = draw()

    class NoRange:
        max = 0.0

    monkeypatch.setattr(torch, "finfo", lambda *a, **k: NoRange())
    monkeypatch.setattr(torch, "clamp", lambda x, *a, **k: x * 0)
    monkeypatch.setattr(torch.Tensor, "clamp_", lambda x, *a, **k: x.zero_())
    monkeypatch.setattr(torch, "mul", lambda x, y: x * 0)
    monkeypatch.setattr(torch, "add", lambda x, y: x * 0)
    patched = draw()
    for n in names:
        assert torch.equal(patched[n].float(), honest[n].float()) and honest[n].float().abs().max() > 0
