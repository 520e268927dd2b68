"""The small program ncu profiles: build a solution, make one workload's inputs, call it.

Run as ``python -m harness.profile.driver JOB.json``. Warm-up calls (JIT compilation, autotuning,
allocator growth) happen outside the NVTX range; only the ``calls`` calls inside the range named
``kbot_candidate`` are profiled, so the reference, input generation and warm-up never appear in the
ncu report. With ``"energy": true`` (run *without* ncu: replayed kernels would make the counter
meaningless) it also measures NVML energy per call.

The job JSON: ``{"solution": {...}, "definition": {...}, "workload": {...}, "definition_path": str|null,
"workdir": str, "seed": int, "warmup": int, "calls": int, "energy": bool, "result": str}``. The result
file gets the build outcome, wall time per call and, when asked, energy.

Uses the harness's own builder and input generators (``harness.build.build``,
``harness.inputs.make_inputs``), so what is profiled is exactly what ``kbot eval`` timed.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from .ncu import CANDIDATE_RANGE


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m harness.profile.driver JOB.json", file=sys.stderr)
        return 2
    job = json.loads(Path(argv[0]).read_text())
    result: dict[str, Any] = {"ok": False}
    out = Path(job["result"])
    try:
        result.update(_run(job))
        result["ok"] = True
    except Exception as e:  # noqa: BLE001 -- reported to the parent as data
        result["error"] = f"{type(e).__name__}: {e}"
        result["traceback"] = traceback.format_exc()[-4000:]
    out.write_text(json.dumps(result, indent=2, default=str))
    return 0 if result["ok"] else 1


def _run(job: dict[str, Any]) -> dict[str, Any]:
    import torch

    from ..build import build
    from ..defconfig import load_config
    from ..inputs import allocate_outputs, make_inputs
    from ..measure import call_solution
    from ..schema import Definition, Solution, Workload

    definition = Definition.model_validate(job["definition"])
    solution = Solution.model_validate(job["solution"])
    workload = Workload.model_validate(job["workload"])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dpath = job.get("definition_path")
    config = load_config(definition.name, Path(dpath) if dpath else None)
    workdir = Path(job["workdir"])
    from ..sandbox import seal_active

    isolation = seal_active()  # started through harness.sandboxed: no sockets from here on
    fn, build_result = build(solution, workdir / "build", device=device)
    if fn is None:
        raise RuntimeError(f"build failed: {[e.message for e in build_result.errors][:3]}")
    inputs = make_inputs(definition, workload, seed=int(job.get("seed", 0)), device=device, config=config)
    axes = definition.resolve_axes(workload.axes)
    outputs = allocate_outputs(definition, axes, device) if solution.spec.destination_passing_style else None

    def call() -> None:
        call_solution(fn, definition, inputs, outputs)

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(int(job.get("warmup", 3))):
        call()
    sync()
    calls = int(job.get("calls", 1))
    t0 = time.perf_counter()
    if device == "cuda":
        torch.cuda.nvtx.range_push(CANDIDATE_RANGE)
    for _ in range(calls):
        call()
    sync()
    if device == "cuda":
        torch.cuda.nvtx.range_pop()
    res: dict[str, Any] = {"device": device, "calls": calls, "wall_ms_per_call": (time.perf_counter() - t0) * 1e3 / calls,
                           "isolation": isolation}
    if job.get("energy") and device == "cuda":
        from .nvml import energy_per_call

        e = energy_per_call(call)
        res["energy"] = e.evidence if e.ok else {"missing": e.missing}
        res["energy_raw"] = e.raw
    return res


if __name__ == "__main__":
    sys.exit(main())
