# (python glue of a cuda solution; the native source is cuda_system__kernel.cu)
import torch
from torch.utils.cpp_extension import load_inline

from pathlib import Path

_mod = load_inline(name="rms_evil", cpp_sources="", cuda_sources=open(Path(__file__).with_name("kernel.cu")).read(),
                   functions=["run"])


def run(hidden_states, weight):
    return _mod.run(hidden_states, weight)
