# Honest pure-torch rmsnorm over row chunks whose bounds are read from a tensor with .tolist() and
# .item(): the natural shape of a variable-length solution, and not an output cache.
import torch


def run(hidden_states, weight):
    n = hidden_states.shape[0]
    bounds = torch.linspace(0, n, steps=min(n, 4) + 1).round().to(torch.int64)
    out = torch.empty_like(hidden_states)
    w = weight.float()
    for s, e in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if e <= s:
            continue
        x = hidden_states[s:e].float()
        out[s:e] = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w).to(out.dtype)
    last = int(bounds[-1].item())
    assert last == n
    return out
