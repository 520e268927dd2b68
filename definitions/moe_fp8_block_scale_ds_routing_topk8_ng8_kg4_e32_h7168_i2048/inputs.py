"""Builder for this definition's inputs; the logic lives in harness/operators/moe.py (tested there).

It gets this definition's own routing (reference.py::route, beside this file) to check the leading
tokens it redraws so the routing bias visibly moves their combination weights.
"""

import importlib.util
from pathlib import Path

from harness.operators.moe import build

_spec = importlib.util.spec_from_file_location("kbot_moe_reference_route", Path(__file__).with_name("reference.py"))
_ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ref)


def make(axes, gen, device, workload=None, definition=None, only=None):
    return build(axes, gen, device, workload, definition, route=_ref.route, only=only)
