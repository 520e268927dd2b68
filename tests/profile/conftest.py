"""Make this folder's helper module (ncu_csv_builder) and scripts/gpu importable under either import mode."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for extra in (str(HERE), str(HERE.parents[1] / "scripts" / "gpu")):
    if extra not in sys.path:
        sys.path.append(extra)
