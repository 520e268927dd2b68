"""Baseline: ``torch.compile`` of kbot's reference of this definition (``reference.py``, the definition's
own file, carried with the solution), what a user gets from PyTorch with no kernel written.

Compiled once per process: the wrapper is made when this module is imported, and Dynamo compiles at
the first call of each shape family (``dynamic=True``; the reference's chunk count is read on the host,
so its per-chunk loop is a graph break with compiled pieces around it) and reuses the result for every
later call; nothing is compiled inside ``run``. The reference module is loaded under a
name of its own, so it cannot meet another solution's ``reference`` module in the same process.
"""

import importlib.util
import sys
from pathlib import Path

import torch


def _reference():
    path = Path(__file__).with_name("reference.py")
    spec = importlib.util.spec_from_file_location(f"kbot_compiled_reference_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # Dynamo looks the module of a compiled function up by name
    spec.loader.exec_module(module)
    return module.run


_compiled = torch.compile(_reference(), dynamic=True)


def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale):
    return _compiled(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale)
