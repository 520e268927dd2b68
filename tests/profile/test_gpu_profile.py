"""On a GPU runner: `kbot profile`'s pipeline end to end on a small Triton solution (ncu, SASS, NVML)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.profile.ncu import find_ncu
from harness.profile.pipeline import analyze, profile_workload
from harness.schema import Workload, load_definition, parse_solution

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ncu" / "definitions"

SOURCE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def run(x, y, out):
    n = x.numel()
    _add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
'''


@pytest.mark.gpu
def test_profile_workload_on_gpu(tmp_path):
    if find_ncu() is None:
        pytest.skip("ncu not installed on this runner")
    from harness.ceilings import ceilings_for

    d = load_definition(FIX / "kbot_vector_add_f32.json")
    sol = parse_solution({"name": "add", "definition": d.name, "author": "test",
                          "spec": {"language": "triton", "target_hardware": ["H200"], "entry_point": "main.py::run",
                                   "destination_passing_style": True},
                          "sources": [{"path": "main.py", "content": SOURCE}]})
    w = Workload(uuid="w", axes={"N": 1 << 24}, inputs={})
    collected, files = profile_workload(sol, d, w, tmp_path)
    by = {c.source: c for c in collected}
    assert by["ncu"].ok, by["ncu"].missing
    assert by["ncu"].evidence["kernel_name"].startswith("_add")
    assert by["sass"].ok, by["sass"].missing
    out = analyze(d, d.resolve_axes(w.axes), collected, ceilings=ceilings_for("cuda"))
    assert out.roofline.fraction > 0.3
    assert not [i for i in out.feedback if i.severity in ("critical", "high")], [(i.severity, i.rule) for i in out.feedback]
