"""Builder for this definition's inputs; the logic lives in harness/operators/moe.py (tested there)."""

from harness.operators.moe import build


def make(axes, gen, device, workload=None, definition=None):
    return build(axes, gen, device, workload, definition)
