"""The DSA workload sets can tell right from wrong, and their roofline floors are lower bounds.

Written by scripts/make_dsa_workloads.py (re-running it must change nothing). What a wrong kernel
needs in order to show: indexer rows longer than top-k (a shorter row selects every token, so a wrongly
scored kernel agrees there), a different ``sm_scale`` per attention workload (a kernel that ignores it
agrees wherever the scale is the one it assumed), padding, and both decode and prefill shapes.

The roofline formulas in skills/roofline/dsa_paged.yaml see only the axes, so they count full rows;
the harness rejects a time below 0.9x the floor. Each workload's structured input is sampled here and
its real minimum work computed: a kernel that reads only what it must may never be judged impossible.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch

from harness.ceilings import DOCUMENTED
from harness.inputs import GENERATORS, GenContext
from harness.roofline import counts
from harness.schema import load_workloads
from opkit import ATTENTION, INDEXER, REPO, ours

H200 = DOCUMENTED["H200"]
BW = H200["copy_bandwidth_gbs"] * 1e9
PEAK = {k: v * 1e12 for k, v in H200["matmul_tflops"].items()}
SELECTION_FLOOR_S = 4e-6  # below this a call's launches and the (uncounted) top-k selection dominate


def workloads(name, file="workloads.jsonl"):
    defn, _ = ours(name)
    return defn, load_workloads(REPO / "definitions" / name / file, defn)


def sample(defn, w, input_name, seed=0, made=None):
    """One structured input of a workload, generated alone (no multi-GB caches)."""
    axes = defn.resolve_axes(w.axes)
    spec = defn.inputs[input_name]
    src = w.inputs.get(input_name) or ours(defn.name)[1].inputs[input_name]  # the workload's, else the sidecar's
    ctx = GenContext(name=input_name, spec=spec, shape=defn.shape_of(spec, axes), axes=axes,
                     gen=torch.Generator().manual_seed(seed), device=torch.device("cpu"), made=made or {})
    return GENERATORS[src.generator](ctx, **src.params)


def test_workload_files_are_what_the_script_writes(tmp_path):
    before = {n: (REPO / "definitions" / n / f).read_text() for n in (INDEXER, ATTENTION) for f in ("workloads.jsonl", "workloads.small.jsonl")}
    subprocess.run([sys.executable, str(REPO / "scripts" / "make_dsa_workloads.py")], check=True, capture_output=True, cwd=REPO)
    after = {n: (REPO / "definitions" / n / f).read_text() for n in (INDEXER, ATTENTION) for f in ("workloads.jsonl", "workloads.small.jsonl")}
    assert before == after, "definitions/*/workloads*.jsonl differ from scripts/make_dsa_workloads.py: re-run it"


def test_indexer_rows_longer_than_topk_dominate():
    defn, ws = workloads(INDEXER)
    assert 8 <= len(ws) <= 16
    lens = [sample(defn, w, "seq_lens") for w in ws]
    rows = torch.cat(lens)
    assert float((rows > 2048).float().mean()) >= 0.7, "most rows must be longer than top-k"
    assert int(rows.max()) >= 100_000
    assert {w.axes["batch_size"] for w in ws} >= {1, 2, 4, 8, 16, 32, 64}
    passthrough = [n for n in lens if bool((n <= 2048).all())]
    assert any(len(n) >= 32 and bool((n < 64).any()) for n in passthrough), "a batch of short rows, some shorter than a page"
    assert sum(bool((n <= 2048).any() & (n > 2048).any()) for n in lens) >= 2, "batches mixing short and long rows"
    tables = [sample(defn, w, "block_table", made={"seq_lens": n}) for w, n in zip(ws, lens)]
    for t, n in zip(tables, lens):  # pages scattered: a row's pages are not consecutive
        b = int(torch.argmax(n))
        used = t[b, : -(-int(n[b]) // 64)]
        assert used.numel() < 3 or not bool((used[1:] - used[:-1] == 1).all())


def test_attention_scales_vary_and_shapes_cover_decode_and_prefill():
    defn, ws = workloads(ATTENTION)
    assert 8 <= len(ws) <= 16
    scales = [w.inputs["sm_scale"].value for w in ws]
    assert len(set(scales)) >= 5 and any(math.isclose(s, 1 / math.sqrt(192)) for s in scales)
    assert max(scales) > 0.2 and min(scales) <= 0.05
    # No scale dominates: a kernel hard-wiring any one of them fails most workloads.
    assert max(scales.count(s) for s in set(scales)) <= len(ws) // 3
    T = {w.axes["num_tokens"] for w in ws}
    assert {1, 2, 4, 16, 32, 64} <= T and max(T) >= 256
    assert any(w.inputs["sparse_indices"].params["tokens_per_seq"] > 1 for w in ws)
    padded = 0
    for w in ws:
        idx = sample(defn, w, "sparse_indices")
        padded += bool((idx == -1).any())
    assert 2 <= padded <= len(ws) // 2, "a few workloads with padding, most with full rows"


def _indexer_actual_s(defn, w, seed):
    n = sample(defn, w, "seq_lens", seed).to(torch.int64)
    long = n[n > 2048]
    B = n.numel()
    nbytes = int(long.sum()) * 132 + B * (64 * 128 + 64 * 4 + 4 + 2048 * 4)  # keys of long rows; q, weights, lens, out
    flops = int(long.sum()) * 2 * 64 * 128
    return max(nbytes / BW, flops / PEAK["fp8"])


def _attention_actual_s(defn, w, seed):
    idx = sample(defn, w, "sparse_indices", seed)
    valid = idx[idx >= 0]
    T = idx.shape[0]
    distinct = torch.unique(valid).numel()
    nbytes = distinct * (512 + 64) * 2 + T * (16 * 576 * 2 + 2048 * 4 + 16 * 512 * 2)  # rows; q, indices, out
    flops = valid.numel() * 2 * 16 * (2 * 512 + 64)
    return max(nbytes / BW, flops / PEAK["bf16"])


@pytest.mark.parametrize("name,actual", [(INDEXER, _indexer_actual_s), (ATTENTION, _attention_actual_s)], ids=["indexer", "attention"])
def test_roofline_floor_is_a_lower_bound_on_every_workload(name, actual):
    """0.9x the formula's floor (the harness's rejection line) never exceeds the time a kernel that reads
    and computes only what the sampled inputs need would take at the documented ceilings."""
    defn, ws = workloads(name)
    bad = []
    for w in ws:
        c = counts(defn, defn.resolve_axes(w.axes))
        formula = max(c["bytes"] / BW, c["flops"] / PEAK[c["peak_key"]])
        for seed in (0, 1):
            real = actual(defn, w, seed)
            if 0.9 * formula > max(real, SELECTION_FLOOR_S):
                bad.append(f"{w.axes} {json.dumps(w.inputs[next(iter(w.inputs))].model_dump(mode='json'))}: formula {formula * 1e6:.2f} us, real {real * 1e6:.2f} us")
    assert not bad, bad


@pytest.mark.parametrize("name", [INDEXER, ATTENTION])
def test_small_workloads_fit_the_cpu_interpreter(name):
    defn, ws = workloads(name, "workloads.small.jsonl")
    assert 2 <= len(ws) <= 4
    for w in ws:
        a = defn.resolve_axes(w.axes)
        if name == INDEXER:
            assert a["batch_size"] * a["max_num_pages"] <= 200 and a["num_pages"] <= 256
        else:
            assert a["num_tokens"] <= 8 and a["num_pages"] <= 128
