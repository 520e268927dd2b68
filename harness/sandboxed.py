"""``python -m harness.sandboxed MODULE ARG...``: run another harness program that executes candidate
code (the profiler's driver, the Triton statistics compile) inside the OS sandbox (harness/sandbox.py).

The sandbox is entered first, while the process has one thread, from the same environment variables
the worker reads (``KBOT_SANDBOX``, ``KBOT_SCRATCH``, ``KBOT_SANDBOX_READ``); then ``MODULE`` runs as
``__main__``. The program calls :func:`harness.sandbox.seal_active` just before it imports candidate
code. In ``required`` mode a sandbox that cannot be set up ends the process with exit code 5 before
anything else runs.
"""

from __future__ import annotations

import runpy
import sys

from .sandbox import Sandbox, SandboxError, activate


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: python -m harness.sandboxed MODULE [ARG...]", file=sys.stderr)
        return 2
    module = sys.argv[1]
    if not module.startswith("harness."):
        print(f"harness.sandboxed runs harness programs only, not {module!r}", file=sys.stderr)
        return 2
    sb = Sandbox.from_env()
    try:
        sb.enter()
    except SandboxError as e:
        print(f"sandbox: {e}", file=sys.stderr)
        return 5
    sb.use_scratch()
    activate(sb)
    sys.argv = [module, *sys.argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
