"""Baseline: flash-linear-attention's chunked Gated DeltaNet prefill (``fla-core`` 0.6.0, Triton).

No layout conversion: the packed [T, H, K] tokens become fla's [1, T, H, K] with ``cu_seqlens``, the
state is [V, K] (``state_v_first=True``), decay and beta are computed in its kernels from the raw
inputs. Two adaptations to the definition, both cheap device ops: fla returns the initial state for an
empty sequence where the definition wants zeros, and its results are copied into the destination
buffers. fla reads ``cu_seqlens`` on the host to build its chunk index (a synchronisation the GPU time
does not see but the per-call time does); that is how the library is used.
"""

import math

from fla.ops.gated_delta_rule import chunk_gated_delta_rule


def run(q, k, v, state, A_log, a, dt_bias, b, cu_seqlens, scale, output, new_state):
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(q.shape[-1])
    o, s = chunk_gated_delta_rule(
        q[None], k[None], v[None], g=a[None], beta=b[None], scale=float(scale), initial_state=state,
        output_final_state=True, use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias,
        use_beta_sigmoid_in_kernel=True, state_v_first=True, cu_seqlens=cu_seqlens,
    )
    output.copy_(o[0])
    empty = (cu_seqlens[1:] == cu_seqlens[:-1])[:, None, None, None]
    new_state.copy_(s.masked_fill(empty, 0.0))
