"""Where the worker calls the runtime guard (harness.guard.runtime): before the candidate is imported,
after each checked call, and after timing. Keeps the worker's control flow free of guard details.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

from .guard import runtime as rt
from .profile.launches import LaunchRecorder
from .report import Finding
from .schema import Definition, Language, Solution

# The harness modules whose functions a candidate must not replace.
_OWN_MODULES = ("harness.measure", "harness.cupti_activity", "harness.compare", "harness.dtypes", "harness.generators", "harness.inputs", "harness.stats", "harness.worker", "harness.guard_hooks")


class Runtime:
    """``trust="baseline"`` (a declared baseline, harness/baselines.py): the candidate-policy checks are
    off (a kernel of its own, the thread count: a library may launch only its kernels and start helper
    threads); what protects the harness and the result stays (the integrity snapshot, output types and
    storage)."""

    def __init__(self, solution: Solution, src_root: Path, trust: str = "candidate"):
        self.solution = solution
        self.src_root = src_root
        self.candidate = trust != "baseline"
        self.snapshot: rt.IntegritySnapshot | None = None
        self.launches: rt.LaunchCounter | None = None
        self.threads_before: rt.ThreadCount | None = None
        self.thread_origins: rt.ThreadOrigins | None = None
        self.signatures: LaunchRecorder | None = None

    def before_import(self) -> None:
        # The launch counter wraps Triton's launcher, so it goes in before the snapshot records identities.
        if self.solution.spec.language is Language.TRITON and self.candidate:
            self.launches = rt.LaunchCounter(own_paths=[self.src_root]).install()
            self.signatures = LaunchRecorder(self.src_root)
        if self.candidate:  # who starts each thread (the candidate, or the harness/reference/libraries)
            self.thread_origins = rt.ThreadOrigins(own_paths=[self.src_root]).install()
        self.snapshot = rt.IntegritySnapshot.capture(modules=_OWN_MODULES)
        self.threads_before = rt.thread_count()

    def warm_runtime(self, device: Any) -> None:
        """Start the threads torch and CUDA create lazily (intra-op pool, driver helpers) before the
        thread baseline is taken, so only threads the candidate starts are counted. (The observer
        worker's profiler session rebinds a few torch attributes on first use; that worker never checks
        the integrity snapshot, so it needs no warm-up session of its own: one fewer CUPTI start-up on
        the critical path of every GPU run.)"""
        import torch

        a = torch.randn(256, 256)
        (a @ a).sum()
        if getattr(device, "type", "cpu") == "cuda":
            b = a.to(device)
            (b @ b).sum().item()
        self.threads_before = rt.thread_count()

    def call_observed(self, call: Callable[[], dict[str, Any]], device: Any) -> tuple[dict[str, Any], list[Finding], dict[str, Any]]:
        """Run one candidate call under the CUPTI kernel/stream observer (GPU only): its GPU work must
        stay on one stream, and a cuda solution must launch a ``__global__`` of its own. The third
        value says what the observer saw (backend, counts, calls it could not read) for the report."""
        if getattr(device, "type", "cpu") != "cuda":
            return call(), [], {}
        names = rt.kernel_names_in(s.content for s in self.solution.sources)
        with rt.CudaLaunchCounter(names) as counter:
            out = call()
        findings = rt.side_stream_check(counter)
        if self.solution.spec.language is Language.CUDA:
            findings += rt.kernel_launch_check(counter)
        seen = {"backend": counter.backend, "kernels": counter.total, "streams": len(counter.streams), "unparsed": counter.unparsed[:20], "errors": counter.errors[:5]}
        return out, findings, seen

    def after_call(self, outputs: dict[str, Any], inputs: dict[str, Any], definition: Definition, axes: dict[str, int], previous: Iterable[Any] = ()) -> list[Finding]:
        findings: list[Finding] = []
        for name, spec in definition.outputs.items():
            value = outputs.get(name)
            if value is not None and spec.shape is not None:
                # Shape and dtype are left to the comparison, which gives them their own statuses
                # (INCORRECT_SHAPE/DTYPE); the guard looks at what the object is and where it lives,
                # including whether it is a buffer an earlier call already returned (stale reuse).
                findings += rt.check_output(name, value, None, None, inputs, previous=previous)
        findings += self._common_checks()
        if self.launches is not None:
            findings += rt.kernel_launch_check(self.launches)
            self.launches.reset()
        return findings

    def record_launches(self, on: bool) -> None:
        """Record the signatures of the solution's Triton launches (for the profiler's ahead-of-time
        compile) from now on, or stop: the worker records its correctness calls, never its timing."""
        if self.launches is not None and self.signatures is not None:
            self.launches.on_launch = self.signatures.observe if on else None

    def launch_signatures(self) -> list[dict[str, Any]]:
        """What was recorded since the last call (recording stops)."""
        self.record_launches(False)
        return self.signatures.take() if self.signatures is not None else []

    def after_timing(self) -> list[Finding]:
        return self._common_checks()

    def _common_checks(self) -> list[Finding]:
        out: list[Finding] = []
        if self.snapshot is not None:
            out += self.snapshot.verify()
        if self.threads_before is not None and self.candidate:
            # OS-level slack: Triton/CUDA start a few helper threads on first compile/launch.
            out += rt.check_threads(self.threads_before, rt.thread_count(), os_slack=8, origins=self.thread_origins)
        return out
