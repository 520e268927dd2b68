"""On the GPU: the seed kernels and their offline variants compile, launch and match torch.

Run on the device: .venv/bin/pytest -m gpu tests/agents/test_seeds_gpu.py -q
"""

from __future__ import annotations

import importlib.util

import pytest

from bot.agents.base import AgentContext, Mode
from bot.agents.providers.offline import OfflineAgent
from harness.schema import parse_definition

pytestmark = pytest.mark.gpu


def _definition(name):
    # Only the name matters to the offline agent (it reads skills/seeds/<name>/).
    return parse_definition({"name": name, "op_type": "x", "axes": {"n": {"type": "var"}},
                             "inputs": {"x": {"shape": ["n"], "dtype": "float32"}},
                             "outputs": {"y": {"shape": ["n"], "dtype": "float32"}},
                             "reference": "def run(x):\n    return x\n"})


def _variants(name, n=8):
    ctx = AgentContext(definition=_definition(name), mode=Mode.INITIAL)
    return [p.solution for p in OfflineAgent().propose(ctx, n)]


def _load(sol, tmp_path, i):
    f = tmp_path / f"v{i}.py"
    f.write_text(sol.source("main.py"))
    spec = importlib.util.spec_from_file_location(f"v{i}", f)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


@pytest.mark.parametrize("batch", [1, 7, 1024])
def test_rmsnorm_variants(tmp_path, batch):
    import torch

    x = torch.randn(batch, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5) * w.float()
    for i, sol in enumerate(_variants("rmsnorm_h4096")):
        out = torch.full_like(x, float("nan"))
        _load(sol, tmp_path, i).run(hidden_states=x, weight=w, output=out)
        torch.testing.assert_close(out.float(), ref, atol=1e-2, rtol=1e-2, msg=sol.description)


def test_fused_add_rmsnorm_variants(tmp_path):
    import torch

    x = torch.randn(300, 4096, device="cuda", dtype=torch.bfloat16)
    r = torch.randn_like(x)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    s = x.float() + r.float()
    ref = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + 1e-5) * w.float()
    r_before = r.clone()
    for i, sol in enumerate(_variants("fused_add_rmsnorm_h4096")):
        out = torch.full_like(x, float("nan"))
        _load(sol, tmp_path, i).run(hidden_states=x, residual=r, weight=w, output=out)
        torch.testing.assert_close(out.float(), ref, atol=1e-2, rtol=1e-2, msg=sol.description)
        assert torch.equal(r, r_before)  # the definition's residual is an input, never written


@pytest.mark.parametrize("m", [1, 130, 1024])
def test_gemm_variants(tmp_path, m):
    import torch

    a = torch.randn(m, 4096, device="cuda", dtype=torch.float16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    ref = (a.float() @ b.float().T)
    launched = 0
    for i, sol in enumerate(_variants("gemm_n4096_k4096", 12)):
        out = torch.full((m, 4096), float("nan"), device="cuda", dtype=torch.float16)
        try:
            _load(sol, tmp_path, i).run(A=a, B=b, C=out)
        except Exception as e:  # some tile/stage combinations do not fit in shared memory: a launch error
            assert "resource" in str(e).lower(), (sol.description, e)
            continue
        launched += 1
        torch.testing.assert_close(out.float(), ref, atol=0.5, rtol=2e-2, msg=sol.description)
    assert launched >= 6
