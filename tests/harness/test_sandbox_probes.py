"""The OS sandbox around candidate code, tried as a hostile candidate would, with the static guard OFF.

Each probe is something a candidate could do to find or forge its results (read the run folder, write a
fake report into it, leave files for the trusted side, talk to the network, read the parent's
environment or another candidate's folder). A probe candidate tries them all on its first call; if any
succeeds it raises ``ESCAPED: [...]`` (the workload ends RUNTIME_ERROR with the list), otherwise it
computes rmsnorm and PASSES. So PASSED means the operating system refused every probe. The same
candidate without the sandbox must escape (the probes are live), and the run folder must hold only what
the harness parent wrote.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import pytest

from harness import sandbox
from harness.runner import RunConfig, evaluate
from harness.schema import Status, load_definition, load_workloads, parse_solution

REPO = Path(__file__).resolve().parents[2]
DEF = REPO / "definitions" / "rmsnorm_h4096" / "definition.json"
SMALL = REPO / "definitions" / "rmsnorm_h4096" / "workloads.small.jsonl"
FAST = {"budget_s": 0.05, "warmup": 1, "min_iters": 5, "recheck": 2}
PARENT_FILES = {"solution.json", "traces.jsonl", "report.json"}

needs_landlock = pytest.mark.skipif(sandbox.landlock_abi() < 1, reason=f"no Landlock on this kernel ({sandbox.unavailable_reason()})")

PROBE = r'''
import os
import socket
import subprocess

import numpy as np
import torch

OUT = {out!r}
OTHER = {other!r}
REPO = {repo!r}
TCP = {tcp}
UNIX = {unix!r}
OUTSIDE = {outside!r}
_escaped = []
_done = []


def _w(name):
    return os.path.join(OUT, name)


def _nonempty(data):
    if not data:
        raise OSError("nothing read")
    return data


def _probes():
    t = torch.ones(4)
    a = np.ones(4)
    return {{
        "read-run-folder-file": lambda: _nonempty(open(_w("solution.json")).read()),
        "list-run-folder": lambda: os.listdir(OUT),
        "untyped-storage-from-file": lambda: torch.UntypedStorage.from_file(_w("solution.json"), False, 16),
        "byte-storage-from-file": lambda: torch.ByteStorage.from_file(_w("solution.json"), False, 16),
        "write-forged-report": lambda: open(_w("forged.json"), "w").write('{{"kbot_report": 1, "speedup": 3.0}}'),
        "numpy-savetxt": lambda: np.savetxt(_w("np.txt"), a),
        "numpy-savez-compressed": lambda: np.savez_compressed(_w("np.npz"), a=a),
        "numpy-save": lambda: np.save(_w("np.npy"), a),
        "ndarray-dump": lambda: a.dump(_w("np.pkl")),
        "ndarray-tofile": lambda: a.tofile(_w("np.bin")),
        "torch-save": lambda: torch.save(t, _w("t.pt")),
        "storage-from-file-shared-create": lambda: torch.UntypedStorage.from_file(_w("shared.bin"), True, 16),
        "unlink-run-file": lambda: os.unlink(_w("solution.json")),
        "rename-run-file": lambda: os.rename(_w("solution.json"), _w("moved.json")),
        "truncate-run-file": lambda: os.truncate(_w("solution.json"), 0),
        "symlink-into-run-folder": lambda: os.symlink("/etc/hostname", _w("link")),
        "mkdir-in-run-folder": lambda: os.mkdir(_w("d")),
        "write-outside-scratch": lambda: open(OUTSIDE, "w").write("x"),
        "read-other-candidate": lambda: _nonempty(open(OTHER).read()),
        "list-other-candidate": lambda: os.listdir(os.path.dirname(OTHER)),
        "read-parent-environ": lambda: _nonempty(open("/proc/%d/environ" % os.getppid(), "rb").read()),
        "read-parent-cmdline": lambda: _nonempty(open("/proc/%d/cmdline" % os.getppid(), "rb").read()),
        "list-parent-cwd": lambda: os.listdir("/proc/%d/cwd" % os.getppid()),
        "read-repository": lambda: _nonempty(open(os.path.join(REPO, "README.md")).read()),
        "read-git": lambda: _nonempty(open(os.path.join(REPO, ".git", "HEAD") if os.path.isdir(os.path.join(REPO, ".git"))
                                           else os.path.join(REPO, "pyproject.toml")).read()),
        "tcp-connect": lambda: socket.create_connection(("127.0.0.1", TCP), timeout=3),
        "udp-send": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", TCP)),
        "unix-connect": lambda: socket.socket(socket.AF_UNIX).connect(UNIX),
        "child-process-reads-run-folder": lambda: _nonempty(subprocess.run(["cat", _w("solution.json")], capture_output=True).stdout),
        "signal-parent": lambda: os.kill(os.getppid(), 0),
    }}


def _probe_once():
    if _done:
        return
    _done.append(1)
    for name, fn in _probes().items():
        try:
            fn()
        except Exception:
            continue
        _escaped.append(name)


def run(hidden_states, weight):
    _probe_once()
    if _escaped:
        raise RuntimeError("ESCAPED: " + ",".join(_escaped))
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
'''

# Probes that only a sandbox that also scopes signals (Landlock ABI >= 6) refuses.
SIGNAL_PROBES = {"signal-parent"}


@pytest.fixture(scope="module")
def definition():
    return load_definition(DEF)


@pytest.fixture(scope="module")
def workloads(definition):
    return load_workloads(SMALL, definition)[:2]


class _Listeners:
    """A TCP/UDP port and a unix socket on the host: what a candidate with network access would reach."""

    def __init__(self, tmp: Path):
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", self.port))
        self.unix_path = str(tmp / "host.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.unix_path)
        self.unix.listen(8)
        self._stop = False
        self.threads = [threading.Thread(target=self._accept, args=(s,), daemon=True) for s in (self.tcp, self.unix)]
        for t in self.threads:
            t.start()

    def _accept(self, s):
        s.settimeout(0.5)
        while not self._stop:
            try:
                c, _ = s.accept()
                c.close()
            except OSError:
                continue

    def close(self):
        self._stop = True
        for s in (self.tcp, self.udp, self.unix):
            s.close()


def _probe_solution(tmp_path: Path, out: Path):
    other = tmp_path / "kbot-w-othercandidate" / "candidate" / "src" / "main.py"
    other.parent.mkdir(parents=True)
    other.write_text("secret source of another candidate\n")
    lis = _Listeners(tmp_path)
    code = PROBE.format(out=str(out), other=str(other), repo=str(REPO), tcp=lis.port, unix=lis.unix_path,
                        outside=str(tmp_path / "escaped.txt"))
    sol = parse_solution({"name": "probe", "definition": "rmsnorm_h4096", "author": "t",
                          "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run", "destination_passing_style": False},
                          "sources": [{"path": "main.py", "content": code}]})
    return sol, lis


def _run(definition, workloads, sol, out: Path, mode: str, device: str = "cpu"):
    cfg = RunConfig(device=device, timing=FAST, guard=False, timeout_s=120, trials=1, sandbox=mode)
    return evaluate(definition, sol, workloads, out, cfg, definition_path=DEF)


def _probe(definition, workloads, tmp_path: Path, mode: str, device: str = "cpu"):
    """Run the probe candidate; returns the report, the run folder and the probes that escaped."""
    out = tmp_path / "run"
    sol, lis = _probe_solution(tmp_path, out)
    try:
        rep = _run(definition, workloads, sol, out, mode, device)
    finally:
        lis.close()
    escaped: set[str] = set()
    for w in rep.workloads:
        if "ESCAPED: " in w.message:
            escaped |= set(w.message.split("ESCAPED: ", 1)[1].split(";")[0].strip().split(","))
    return rep, out, escaped


def _assert_all_refused(rep, out: Path, escaped: set[str], tmp_path: Path) -> None:
    assert rep.isolation["enforced"] is True and rep.isolation["mode"] == "required", rep.isolation
    if sandbox.landlock_abi() < 6:
        escaped = escaped - SIGNAL_PROBES
    assert not escaped, f"the sandbox let these through: {sorted(escaped)}"
    assert all(w.status is Status.PASSED for w in rep.workloads), [w.message for w in rep.workloads]
    # Nothing the candidate tried to leave behind exists, and the run folder holds the parent's files only.
    assert set(os.listdir(out)) == PARENT_FILES
    assert not (tmp_path / "escaped.txt").exists()
    assert json.loads((out / "solution.json").read_text())["name"] == "probe"
    assert all(w.isolation is not None and w.isolation["enforced"] is True for w in rep.workloads)


@needs_landlock
def test_every_probe_is_refused_by_the_os(definition, workloads, tmp_path):
    rep, out, escaped = _probe(definition, workloads, tmp_path, "required")
    _assert_all_refused(rep, out, escaped, tmp_path)


def test_without_the_sandbox_the_probes_are_live(definition, workloads, tmp_path):
    """The control: the same probes without the sandbox do escape, so the test above can fail."""
    rep, out, escaped = _probe(definition, workloads, tmp_path, "off")
    assert rep.isolation["enforced"] is False and rep.isolation["mode"] == "off"
    assert rep.workloads[0].status is Status.RUNTIME_ERROR
    for must in ("read-run-folder-file", "untyped-storage-from-file", "write-forged-report", "numpy-savetxt",
                 "numpy-savez-compressed", "ndarray-dump", "torch-save", "read-other-candidate", "read-parent-environ",
                 "tcp-connect", "unix-connect", "write-outside-scratch", "read-repository"):
        assert must in escaped, (must, sorted(escaped))


FORGER = r'''
import json
import os

import numpy as np
import torch

_FOUND = []


def _forge():
    # The attack of issue 14: walk up from __file__ to the run folder, learn the solution hash from the
    # traces through a storage mapped from the file, and leave a report with invented speedups.
    here = os.path.dirname(os.path.abspath(__file__))
    for _ in range(8):
        for name in ("traces.jsonl", "solution.json"):
            p = os.path.join(here, name)
            if os.path.exists(p):
                _FOUND.append(p)
                try:
                    n = os.path.getsize(p)
                    bytes(torch.UntypedStorage.from_file(p, False, n))
                except Exception:
                    pass
                forged = json.dumps({"kbot_report": 1, "solution_hash": "x", "workloads": [{"speedup_vs_baseline": {"median": 3.0}}]})
                try:
                    np.savetxt(os.path.join(here, "forged_report.json"), np.zeros(1), header=forged)
                except Exception:
                    pass
        here = os.path.dirname(here)
    # Next to its own file: allowed (its scratch), and nothing trusted may ever read it.
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "report.json"), "w") as f:
        f.write(json.dumps({"kbot_report": 1, "forged": True}))


def run(hidden_states, weight):
    if not _FOUND:
        _forge()
    x = hidden_states.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)
'''


@pytest.mark.parametrize("mode", ["required", "off"])
def test_the_forged_report_attack_finds_nothing_to_forge(definition, workloads, tmp_path, mode):
    """Issue 14, attack 1: the build no longer lives in the run folder, so walking up from __file__
    finds no run folder (with or without the sandbox), and what the candidate writes beside its own
    file never reaches the run folder or the report."""
    if mode == "required" and sandbox.landlock_abi() < 1:
        pytest.skip("no Landlock")
    out = tmp_path / "run"
    sol = parse_solution({"name": "forger", "definition": "rmsnorm_h4096", "author": "t",
                          "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run", "destination_passing_style": False},
                          "sources": [{"path": "main.py", "content": FORGER}]})
    rep = _run(definition, workloads, sol, out, mode)
    assert all(w.status is Status.PASSED for w in rep.workloads), [w.message for w in rep.workloads]
    assert set(os.listdir(out)) == PARENT_FILES
    data = json.loads((out / "report.json").read_text())
    assert "forged" not in data and data["solution_hash"] == sol.content_hash()
    assert not list(tmp_path.rglob("forged_report.json"))


HONEST_TRITON = (REPO / "kernels" / "rmsnorm_h4096" / "triton_rows" / "solution.json")


@pytest.mark.gpu
@needs_landlock
def test_every_probe_is_refused_on_the_gpu(definition, tmp_path):
    """The same probes in a CUDA worker: the driver and the device nodes work inside the sandbox, and
    the OS still refuses every probe."""
    rep, out, escaped = _probe(definition, load_workloads(SMALL, definition)[:1], tmp_path, "required", "cuda")
    _assert_all_refused(rep, out, escaped, tmp_path)


@pytest.mark.gpu
@needs_landlock
def test_the_shipped_kernel_passes_sandboxed_on_the_gpu(definition, tmp_path):
    """An honest Triton kernel (compiled: ptxas, the launcher's C compiler, the cache in the scratch
    folder) with the observer and CUPTI kernel time, sandboxed."""
    from harness.schema import load_solution

    cfg = RunConfig(device="cuda", timeout_s=120, sandbox="required")
    rep = evaluate(definition, load_solution(HONEST_TRITON), load_workloads(SMALL, definition), tmp_path / "run", cfg, definition_path=DEF)
    assert rep.all_passed, [w.message for w in rep.workloads]
    roles = {w["role"] for w in rep.isolation["workers"]}
    assert roles == {"timing", "observer"} and rep.isolation["enforced"] is True, rep.isolation
    assert all(w.kernel_time is not None and w.kernel_time.latency_ms is not None for w in rep.workloads), [w.kernel_time for w in rep.workloads]
