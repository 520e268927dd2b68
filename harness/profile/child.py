"""A process of the profiler that runs candidate code (the ncu/energy driver, the Triton statistics
compile): started through ``harness.sandboxed`` with the run's sandbox mode, in a fresh private
scratch folder outside the run folder that holds its job, its result, its build and its caches and is
removed afterwards, with no secrets in its environment (the worker's environment, harness.runner).

Its result file is read back from that folder: only this one child could write there (the sandbox
lets it write nothing else, and nothing else write there), so it is exactly as trustworthy as the
child's own output, and it is parsed as bounded data. Profile evidence is advice for the agent: it
never decides a status, a time or a promotion.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

MAX_RESULT_BYTES = 16 << 20


def run_bounded(cmd: list[str], *, timeout: float | None, env: dict[str, str] | None = None,
                cwd: str | None = None) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True)`` in a session of its own, so that at the
    timeout the whole process group goes: ncu's profiled target and anything the candidate started,
    not only the direct child (an orphaned target would keep the GPU busy under the next measurement).
    Raises ``subprocess.TimeoutExpired`` once the group is killed and reaped."""
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, cwd=cwd, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        p.wait()
        try:  # what it printed so far; a process that left the group could hold the pipes open
            out, err = p.communicate(timeout=0.2)
        except subprocess.TimeoutExpired:
            out, err = "", ""
            for f in (p.stdout, p.stderr):
                if f is not None:
                    f.close()
        raise subprocess.TimeoutExpired(cmd, timeout or 0.0, out, err) from None
    except BaseException:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        p.wait()
        raise
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


class CandidateChild:
    def __init__(self, sandbox_mode: str | None = None, read: list[str] | None = None, gpu: Any = None):
        from ..sandbox import check_mode, default_mode, ensure_gpu_nodes

        self.mode = check_mode(sandbox_mode or default_mode())
        if self.mode != "off":
            ensure_gpu_nodes()  # before a sandboxed process initializes CUDA
        self.read = list(read or [])  # folders beyond the standard ones (a definition's sidecar elsewhere)
        self.gpu = gpu  # harness.gpu_pool.GPU: the one GPU the child sees (a campaign lane's, under --gpus)
        self.scratch = Path(tempfile.mkdtemp(prefix="kbot-w-"))

    def command(self, module: str, job: dict[str, Any], python: str | None = None) -> list[str]:
        """``python -m harness.sandboxed MODULE JOB``, the job written into the scratch folder."""
        job = {**job, "workdir": str(self.scratch), "result": str(self.scratch / "result.json")}
        path = self.scratch / "job.json"
        path.write_text(json.dumps(job))
        return [python or sys.executable, "-m", "harness.sandboxed", module, str(path)]

    def env(self) -> dict[str, str]:
        from ..runner import worker_env
        from ..sandbox import ENV_SCRATCH

        env = worker_env("cuda", self.mode, self.read, gpu=self.gpu)  # the GPU stays visible; the child compiles for it
        env[ENV_SCRATCH] = str(self.scratch)
        env.pop("TRITON_INTERPRET", None)
        return env

    def result(self) -> dict[str, Any] | None:
        path = self.scratch / "result.json"
        try:
            if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_RESULT_BYTES:
                return None
            data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        except (OSError, ValueError, RecursionError):
            return None
        return data if isinstance(data, dict) else None

    def cache_dirs(self) -> list[Path]:
        """Where the child's compiled kernels are (its Triton cache, its extension build)."""
        return [self.scratch / "triton", self.scratch / "build"]

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> "CandidateChild":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
