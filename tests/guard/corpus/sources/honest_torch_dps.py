import torch
import torch.nn.functional as F


@torch.no_grad()
def run(hidden_states, weight, output):
    y = F.rms_norm(hidden_states.float(), (hidden_states.shape[-1],), weight.float(), eps=1e-5)
    output.copy_(y)
