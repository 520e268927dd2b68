"""Baseline: FlashInfer's Gated DeltaNet decode for the k-last ("pretranspose") state layout,
``flashinfer.gdn_decode.gated_delta_rule_decode_pretranspose`` (the contest's own baseline for this
definition; CuTe DSL kernels, SM90 and newer).

The definition's layouts are the library's: [B, 1, H, K] queries/keys, [B, 1, HV, V] values, the float32
state [B, HV, V, K], the decay and beta computed in the kernel from the raw ``a``/``b`` with ``A_log`` and
``dt_bias``. Two adaptations, both as a user of the library would pay them: the library updates its
state in place, so it works on ``new_state`` after a copy of ``state`` (the definition's input is
read-only; zeros when there is no state), counted in this baseline's time; and its default
``use_qk_l2norm=True`` is turned off (the definition does not normalize q and k). The output is written
straight into the destination buffer.
"""

import math

from flashinfer.gdn_decode import gated_delta_rule_decode_pretranspose


def run(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(q.shape[-1])
    if state is None:
        new_state.zero_()
    else:
        new_state.copy_(state)
    gated_delta_rule_decode_pretranspose(
        q, k, v, new_state, A_log, a, dt_bias, b, scale=float(scale), output=output, use_qk_l2norm=False,
    )
