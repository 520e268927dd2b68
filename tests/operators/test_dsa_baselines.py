"""The DSA baseline solutions (definitions/<def>/baselines/<name>/) are valid Solutions, their JSON carries
their main.py, and their math (without the compiler, or with FlashInfer's selection emulated in torch
from its documented semantics) is right on small workloads."""

from __future__ import annotations

import json

import pytest
import torch

from harness.schema import load_solution, load_workloads
from opkit import ATTENTION, INDEXER, REPO, clone, judge, make, our_run, ours

BASELINES = [(INDEXER, "torch_compile"), (INDEXER, "flashinfer_topk"), (ATTENTION, "torch_compile")]


def folder(name, base):
    return REPO / "definitions" / name / "baselines" / base


def module(name, base):
    ns: dict = {}
    src = (folder(name, base) / "main.py").read_text()
    exec(compile(src, f"{base}/main.py", "exec"), ns)  # noqa: S102 (our own baseline; torch.compile wraps lazily)
    return ns


@pytest.mark.parametrize("name,base", BASELINES)
def test_solution_json_is_main_py(name, base):
    sol = load_solution(folder(name, base) / "solution.json")
    assert sol.definition == name and sol.spec.entry_point == "main.py::run" and not sol.spec.destination_passing_style
    assert sol.source("main.py") == (folder(name, base) / "main.py").read_text()
    raw = json.loads((folder(name, base) / "solution.json").read_text())
    assert ("flashinfer" in raw["spec"]["dependencies"]) == (base == "flashinfer_topk")


def small(name):
    defn, cfg = ours(name)
    return defn, cfg, load_workloads(REPO / "definitions" / name / "workloads.small.jsonl", defn)


def emulated_top_k_page_table_transform(scores, src_page_table, lengths, k, page_size=1):
    """flashinfer.top_k_page_table_transform as its docstring states it (flashinfer/topk.py, 0.7.4):
    ``src_page_table[i, j // page_size] * page_size + j % page_size`` for each chosen position j."""
    top = scores.topk(k, dim=1).indices
    out = src_page_table.long().gather(1, top // page_size) * page_size + top % page_size
    return torch.where(torch.arange(k).unsqueeze(0) < lengths.long().unsqueeze(1), out, torch.full_like(out, -1))


def test_indexer_baselines_math():
    defn, cfg, ws = small(INDEXER)
    tc = module(INDEXER, "torch_compile")["_indexer"]
    fi = module(INDEXER, "flashinfer_topk")
    assert (fi["TOPK"], fi["PAGE_SIZE"]) == (2048, 64)
    for w in ws:
        x = make(defn, cfg, w, 0)
        ref = our_run(INDEXER)(**clone(x))
        assert judge(defn, cfg, w, x, tc(**clone(x)), ref).ok
        score = fi["scores"](**clone(x))
        got = emulated_top_k_page_table_transform(score, x["block_table"], x["seq_lens"], 2048, page_size=64)
        got = got.to(torch.int32)
        r = judge(defn, cfg, w, x, got, ref)
        assert r.ok, r.message


def test_attention_baseline_math():
    defn, cfg, ws = small(ATTENTION)
    ns = module(ATTENTION, "torch_compile")
    ns["_compiled"] = ns["_chunk"]  # the same body, eager (inductor on a CPU would compile C++ for minutes)
    for w in ws:
        x = make(defn, cfg, w, 0)
        r = judge(defn, cfg, w, x, ns["run"](**clone(x)), our_run(ATTENTION)(**clone(x)))
        assert r.ok, r.message
