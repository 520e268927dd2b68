"""Baseline: flash-linear-attention's fused recurrent Gated DeltaNet kernel (``fla-core`` 0.6.0, Triton).

The definition's layouts are fla's with no conversion: [B, T=1, H, K] queries/keys, grouped value
heads, the state stored [V, K] (``state_v_first=True``), the decay computed in the kernel from the raw
``a`` with ``A_log`` and ``dt_bias``, and beta = sigmoid(b) in the kernel. fla returns new tensors, so
the results are copied into the destination buffers (one extra copy of the state: 2 x 64 KiB per head,
counted in this baseline's time, as a user of the library would pay it).
"""

import math

from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule


def run(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(q.shape[-1])
    o, s = fused_recurrent_gated_delta_rule(
        q, k, v, g=a, beta=b, scale=float(scale), initial_state=state, output_final_state=True,
        use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias, use_beta_sigmoid_in_kernel=True,
        state_v_first=True,
    )
    output.copy_(o)
    new_state.copy_(s)
