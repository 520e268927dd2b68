"""Where the worker calls the runtime guard: before the candidate is imported, after each checked call,
and after timing. The checks themselves live in harness.guard.runtime; this adapter keeps the worker's
control flow free of guard details.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from .report import Finding
from .schema import Definition, Language, Solution

_Tensor = torch.Tensor


def _os_threads() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Runtime:
    def __init__(self, solution: Solution):
        self.solution = solution
        self._impl = None
        try:
            from .guard import runtime as rt  # the full runtime guard, when present

            self._impl = rt
        except ImportError:
            self._impl = None
        self.snapshot = None
        self.threads_before = 0
        self.launches = None

    def before_import(self) -> None:
        if self._impl is not None and hasattr(self._impl, "IntegritySnapshot"):
            self.snapshot = self._impl.IntegritySnapshot.capture()
        if self._impl is not None and hasattr(self._impl, "LaunchCounter") and self.solution.spec.language is Language.TRITON:
            self.launches = self._impl.LaunchCounter()
            self.launches.install()
        self.threads_before = threading.active_count()

    def after_call(self, outputs: dict[str, Any], inputs: dict[str, Any], definition: Definition, axes: dict[str, int]) -> list[Finding]:
        findings: list[Finding] = []
        if self._impl is not None and hasattr(self._impl, "check_output"):
            from .inputs import torch_dtype

            for name, spec in definition.outputs.items():
                if name in outputs and outputs[name] is not None and spec.shape is not None:
                    findings += self._impl.check_output(name, outputs[name], definition.shape_of(spec, axes), torch_dtype(spec.dtype), inputs)
        else:
            findings += _basic_output_checks(outputs, inputs)
        findings += self._common_checks()
        if self.launches is not None and not findings:
            if getattr(self.launches, "count", 1) == 0:
                findings.append(Finding(rule="no-kernel-launch", message="the triton solution produced outputs without launching a @triton.jit kernel of its own", why="a triton solution that computes on the host is a library call dressed as a kernel"))
        return findings

    def after_timing(self) -> list[Finding]:
        return self._common_checks()

    def _common_checks(self) -> list[Finding]:
        out: list[Finding] = []
        if self.snapshot is not None:
            out += self.snapshot.verify()
        if threading.active_count() > self.threads_before:
            out.append(Finding(rule="thread-started", message=f"Python threads went from {self.threads_before} to {threading.active_count()} while the solution ran", why="work on a background thread escapes the timer"))
        return out


def _basic_output_checks(outputs: dict[str, Any], inputs: dict[str, Any]) -> list[Finding]:
    findings = []
    in_ptrs = {id(v.untyped_storage()) for v in inputs.values() if isinstance(v, _Tensor)}
    in_data = {v.untyped_storage().data_ptr() for v in inputs.values() if isinstance(v, _Tensor) and v.numel()}
    for name, v in outputs.items():
        if v is None or not isinstance(v, _Tensor):
            continue
        if type(v) is not _Tensor:
            findings.append(Finding(rule="output-type", message=f"output '{name}' is a {type(v).__name__}, not a plain torch.Tensor", why="tensor subclasses can compute lazily or lie when compared"))
        elif v.numel() and (v.untyped_storage().data_ptr() in in_data or id(v.untyped_storage()) in in_ptrs):
            findings.append(Finding(rule="output-aliases-input", message=f"output '{name}' shares storage with an input", why="an output that is a view of an input is not a computed result"))
    return findings
