from __future__ import annotations

import sys
from pathlib import Path

# Whatever the import mode (prepend puts tests/ on sys.path, importlib puts nothing), these tests need
# the repository root first (tests/bot/ must not shadow the bot package), then tests/ (the shared
# fakes) and this folder (its helper modules).
HERE = Path(__file__).resolve().parent
for _p in (str(HERE), str(HERE.parent), str(HERE.parents[1])):
    if _p in sys.path:
        sys.path.remove(_p)
    sys.path.insert(0, _p)

import pytest  # noqa: E402  (after the sys.path set-up above)

from harness.schema import parse_definition  # noqa: E402

RMSNORM = {
    "name": "rmsnorm_h4096",
    "op_type": "rmsnorm",
    "axes": {"batch_size": {"type": "var"}, "hidden_size": {"type": "const", "value": 4096}},
    "inputs": {
        "hidden_states": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"},
        "weight": {"shape": ["hidden_size"], "dtype": "bfloat16"},
    },
    "outputs": {"output": {"shape": ["batch_size", "hidden_size"], "dtype": "bfloat16"}},
    "reference": (
        "import torch\n\n@torch.no_grad()\ndef run(hidden_states, weight):\n"
        "    x = hidden_states.to(torch.float32)\n"
        "    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-5)\n"
        "    return ((x * inv_rms) * weight.to(torch.float32)).to(hidden_states.dtype)\n"
    ),
}


@pytest.fixture
def rmsnorm_def():
    """The official rmsnorm_h4096 definition's shape (kept inline so these tests need no ../shared)."""
    return parse_definition(RMSNORM)
