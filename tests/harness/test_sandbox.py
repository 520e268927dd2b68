"""The sandbox itself (harness/sandbox.py): modes and their defaults, the seccomp program, and what a
sandboxed process can and cannot do, checked in child processes (the restrictions cannot be undone).
The end-to-end probes of a hostile candidate are in test_sandbox_probes.py."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness import sandbox
from harness.runner import RunConfig, evaluate
from harness.schema import load_definition, load_workloads, parse_solution

REPO = Path(__file__).resolve().parents[2]
DEF = REPO / "definitions" / "rmsnorm_h4096" / "definition.json"
SMALL = REPO / "definitions" / "rmsnorm_h4096" / "workloads.small.jsonl"
needs_landlock = pytest.mark.skipif(sandbox.landlock_abi() < 1, reason=f"no Landlock here ({sandbox.unavailable_reason()})")


def test_default_mode_is_required_on_github_and_auto_elsewhere():
    assert sandbox.default_mode({}) == "auto"
    assert sandbox.default_mode({"GITHUB_ACTIONS": "true"}) == "required"
    assert sandbox.default_mode({"GITHUB_ACTIONS": "true", "KBOT_SANDBOX": "auto"}) == "auto"
    assert sandbox.default_mode({"KBOT_SANDBOX": "OFF"}) == "off"
    with pytest.raises(ValueError):
        sandbox.default_mode({"KBOT_SANDBOX": "maybe"})
    assert RunConfig.__dataclass_fields__["sandbox"].default_factory is sandbox.default_mode


def _run_bpf(prog: bytes, arch: int, nr: int) -> int:
    """A tiny interpreter for the instructions seccomp_program emits (ld abs, jeq, jge, ret)."""
    ins = [struct.unpack("HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
    data = {0: nr, 4: arch}
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ins[pc]
        if code == 0x20:
            acc = data[k]
            pc += 1
        elif code in (0x15, 0x35):
            hit = acc == k if code == 0x15 else acc >= k
            pc += 1 + (jt if hit else jf)
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")


@pytest.mark.parametrize("machine", sorted(sandbox._SYSCALLS))
def test_the_seccomp_program_denies_exactly_its_list(machine):
    arch, _, table = sandbox._SYSCALLS[machine]
    prog = sandbox.seccomp_program(machine)
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    denied = {table[n] for n in sandbox.DENIED_SYSCALLS if n in table}
    assert "socket" in table and table["socket"] in denied
    for nr in range(0, 500):
        assert _run_bpf(prog, arch, nr) == (deny if nr in denied else allow), (machine, nr)
    assert _run_bpf(prog, arch, 0x40000000 + 1) == deny  # x32 on x86_64
    assert _run_bpf(prog, 0x40000003, 1) == deny  # another architecture (i386 through int 0x80)
    assert len(prog) // 8 < 256  # every jump fits in 8 bits


CHILD = r'''
import json, os, socket, subprocess, sys
from pathlib import Path
from harness.sandbox import Sandbox
sb = Sandbox(sys.argv[1], Path(sys.argv[2]), [])
sb.enter()
sb.use_scratch()
import torch
(torch.randn(256, 256) @ torch.randn(256, 256)).sum()  # torch's thread pool starts here, after Landlock
sb.seal()
res = {"record": sb.record(), "cwd": os.getcwd(), "home": os.environ["HOME"]}
def attempt(name, fn):
    try:
        out = fn()
        res[name] = "ok" if out is None or out != b"" else "empty"
    except Exception as e:
        res[name] = type(e).__name__
attempt("read_site_packages", lambda: open(torch.__file__).read(10))
attempt("write_scratch", lambda: open(os.path.join(sys.argv[2], "x.txt"), "w").write("x") and None)
attempt("write_tmp", lambda: open(os.path.join(os.environ["TMPDIR"], "y"), "w").write("y") and None)
attempt("read_denied", lambda: open(sys.argv[3]).read())
attempt("etc_hostname", lambda: open("/etc/hostname").read())
attempt("etc_passwd", lambda: open("/etc/passwd").read(1) and None)
attempt("dev_null", lambda: open("/dev/null", "w").write("x") and None)
# opened for writing, nothing written (Landlock checks the open): its own entries yes, the parent's no
attempt("write_own_proc", lambda: open(f"/proc/{os.getpid()}/comm", "r+").close())
attempt("write_parent_proc", lambda: open(f"/proc/{os.getppid()}/comm", "r+").close())
attempt("socket_inet", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
attempt("socket_unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
attempt("socketpair", lambda: socket.socketpair() and None)
attempt("run_true", lambda: subprocess.run(["/bin/true"], check=True) and None)
# a program written into the scratch folder cannot be executed from there
exe = os.path.join(sys.argv[2], "tool")
with open(exe, "w") as f:
    f.write("#!/bin/sh\necho hi\n")
os.chmod(exe, 0o755)
attempt("exec_from_scratch", lambda: subprocess.run([exe], check=True, capture_output=True) and None)
seccomp = set()
for tid in os.listdir("/proc/self/task"):
    with open(f"/proc/self/task/{tid}/status") as f:
        seccomp |= {line.split()[1] for line in f if line.startswith("Seccomp:")}
res["threads"] = len(os.listdir("/proc/self/task"))
res["seccomp_modes"] = sorted(seccomp)
print("RESULT " + json.dumps(res))
'''


def _child(code: str, mode: str, tmp_path: Path, *extra: str, timeout: int = 300) -> dict:
    scratch = Path(tempfile.mkdtemp(prefix="kbot-w-"))
    # A file, not -c (Triton's @jit reads its function's source file), in a folder of its own: the
    # folder of the script is on sys.path, and what is on sys.path is readable.
    script = tmp_path / "script" / "child.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(code)
    try:
        p = subprocess.run([sys.executable, str(script), mode, str(scratch), *extra], capture_output=True, text=True,
                           timeout=timeout, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, f"rc={p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}"
    return json.loads(line[7:])


@needs_landlock
def test_a_sandboxed_process_reads_its_installation_writes_its_scratch_and_nothing_else(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("not for candidates")
    r = _child(CHILD, "required", tmp_path, str(secret))
    assert r["record"]["enforced"] is True and r["record"]["mechanism"] == "landlock+seccomp", r["record"]
    assert r["cwd"].startswith(tempfile.gettempdir()) and r["home"].startswith(r["cwd"])
    assert r["read_site_packages"] == "ok" and r["write_scratch"] == "ok" and r["write_tmp"] == "ok"
    assert r["etc_passwd"] == "ok" and r["dev_null"] == "ok" and r["socketpair"] == "ok" and r["run_true"] == "ok"
    assert r["read_denied"] == "PermissionError" and r["etc_hostname"] in ("PermissionError", "FileNotFoundError")
    assert r["socket_inet"] == "PermissionError" and r["socket_unix"] == "PermissionError"
    assert r["exec_from_scratch"] == "PermissionError"
    # CUDA's initialisation needs its own /proc/<pid> writable (H200); the parent's stays closed
    assert r["write_own_proc"] == "ok" and r["write_parent_proc"] == "PermissionError"
    # every thread (torch's pool started after Landlock, before the filter) runs under the filter
    assert r["threads"] > 1 and r["seccomp_modes"] == ["2"], r


def test_without_the_sandbox_the_same_process_can_do_all_of_it(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("not for candidates")
    r = _child(CHILD, "off", tmp_path, str(secret))
    assert r["record"]["enforced"] is False and r["record"]["mechanism"] == "none"
    assert r["read_denied"] == "ok" and r["socket_inet"] == "ok" and r["exec_from_scratch"] == "ok"
    assert r["seccomp_modes"] == ["0"]


THREADED = r'''
import json, sys, threading, time
from pathlib import Path
from harness.sandbox import Sandbox, SandboxError
t = threading.Thread(target=time.sleep, args=(5,), daemon=True)
t.start()
sb = Sandbox(sys.argv[1], Path(sys.argv[2]), [])
try:
    sb.enter()
    out = "entered"
except SandboxError as e:
    out = "refused: " + str(e)
print("RESULT " + json.dumps({"out": out, "record": sb.record()}))
'''


@needs_landlock
def test_entering_after_threads_started_is_refused(tmp_path):
    """Landlock binds the calling thread only: a process that already has threads is not sandboxed."""
    r = _child(THREADED, "required", tmp_path)
    assert r["out"].startswith("refused") and "threads already run" in r["out"]
    r = _child(THREADED, "auto", tmp_path)
    assert r["out"] == "entered" and r["record"]["enforced"] is False and "threads already run" in r["record"]["errors"][0]


TOOLS = r'''
import json, os, subprocess, sys
from pathlib import Path
from harness.sandbox import Sandbox
sb = Sandbox("required", Path(sys.argv[2]), [])
sb.enter()
sb.use_scratch()
sb.seal()
res = {"enforced": sb.enforced}
src = Path(sys.argv[2]) / "k.cu"
src.write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.f; }\n")
if sys.argv[1] == "nvcc":
    p = subprocess.run(["nvcc", "-arch=sm_90", "-c", str(src), "-o", str(src.with_suffix(".o"))], capture_output=True, text=True, timeout=240)
    res.update(rc=p.returncode, err=p.stderr[-800:], out=src.with_suffix(".o").is_file())
else:
    import triton, triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    @triton.jit
    def twice(x_ptr, n, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) * 2, mask=i < n)

    c = triton.compile(ASTSource(fn=twice, signature={"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, constexprs={"BLOCK": 128}),
                       target=GPUTarget("cuda", 90, 32))
    cache = os.environ["TRITON_CACHE_DIR"]
    res.update(rc=0, out=len(c.asm["cubin"]) > 0, cache=cache, cached=sum(len(f) for _, _, f in os.walk(cache)))
print("RESULT " + json.dumps(res))
'''


@needs_landlock
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc here")
def test_nvcc_compiles_inside_the_sandbox(tmp_path):
    r = _child(TOOLS, "nvcc", tmp_path)
    assert r["enforced"] and r["rc"] == 0 and r["out"], r


@needs_landlock
def test_triton_compiles_for_sm90_inside_the_sandbox(tmp_path):
    """Triton's compile path: its cache in the scratch folder, ptxas run from the triton package."""
    pytest.importorskip("triton.backends.nvidia")
    r = _child(TOOLS, "triton", tmp_path)
    assert r["enforced"] and r["out"] and r["cached"] > 0, r


CPP_EXT = r'''
import json, sys
from pathlib import Path
from harness.sandbox import Sandbox
sb = Sandbox("required", Path(sys.argv[2]), [])
sb.enter()
sb.use_scratch()
import torch
from torch.utils import cpp_extension
sb.seal()
mod = cpp_extension.load_inline("kbot_sandbox_twice", "torch::Tensor twice(torch::Tensor x) { return x * 2; }",
                                functions=["twice"], verbose=False)
print("RESULT " + json.dumps({"enforced": sb.enforced, "value": float(mod.twice(torch.ones(1))[0])}))
'''


@needs_landlock
@pytest.mark.slow
def test_a_torch_cpp_extension_builds_and_loads_inside_the_sandbox(tmp_path):
    """torch.utils.cpp_extension (the cuda builder's path): ninja, the C++ compiler and torch's headers
    run from the installation, the build lands in the scratch folder, the module loads from there."""
    r = _child(CPP_EXT, "required", tmp_path, timeout=600)
    assert r == {"enforced": True, "value": 2.0}


def test_a_worker_that_cannot_be_sandboxed_refuses_in_required_mode(tmp_path):
    """No scratch folder given: the worker says so before anything else and runs nothing."""
    job = {"nonce": "n1", "device": "cpu", "definition": load_definition(DEF).to_dict(), "solution": {}, "workloads": []}
    env = {k: v for k, v in os.environ.items() if k not in (sandbox.ENV_SCRATCH,)}
    env.update({"PYTHONPATH": str(REPO), sandbox.ENV_MODE: "required", "CUDA_VISIBLE_DEVICES": ""})
    r, w = os.pipe()
    p = subprocess.Popen([sys.executable, "-m", "harness.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         pass_fds=(w,), env={**env, "KBOT_RESULT_FD": str(w)}, cwd=REPO)
    os.close(w)
    p.communicate((json.dumps(job) + "\n").encode(), timeout=120)
    with os.fdopen(r) as f:
        msgs = [json.loads(x) for x in f.read().splitlines() if x.strip()]
    assert p.returncode == 5
    assert msgs and msgs[0]["type"] == "fatal" and "sandbox" in msgs[0]["message"] and "scratch" in msgs[0]["message"]
    assert msgs[0]["sandbox"]["enforced"] is False
    assert not any(m["type"] in ("build", "env") for m in msgs)


def _unavailable(monkeypatch):
    monkeypatch.setattr(sandbox, "_abi_and_reason", lambda: (0, "the kernel has no Landlock (simulated)"))


GOOD = ("import torch\n\ndef run(hidden_states, weight):\n    x = hidden_states.float()\n"
        "    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()).to(hidden_states.dtype)\n")


def _solution():
    return parse_solution({"name": "s", "definition": "rmsnorm_h4096", "author": "t",
                           "spec": {"language": "python", "target_hardware": ["cpu"], "entry_point": "main.py::run", "destination_passing_style": False},
                           "sources": [{"path": "main.py", "content": GOOD}]})


def test_required_without_a_sandbox_refuses_before_any_worker_starts(tmp_path, monkeypatch):
    import harness.runner as runner

    _unavailable(monkeypatch)
    started = []
    monkeypatch.setattr(runner.Spawned, "start", classmethod(lambda cls, env, spare=False: started.append(1)))
    d = load_definition(DEF)
    with pytest.raises(sandbox.SandboxError, match="no OS sandbox"):
        evaluate(d, _solution(), load_workloads(SMALL, d)[:1], tmp_path / "out", RunConfig(device="cpu", sandbox="required"), definition_path=DEF)
    assert started == []
    assert not (tmp_path / "out" / "report.json").exists()


def test_the_cli_exits_3_with_the_reason_and_auto_runs_loudly(tmp_path, monkeypatch):
    from harness.cli import cli

    _unavailable(monkeypatch)
    sol = tmp_path / "s.json"
    sol.write_text(_solution().to_json())
    args = ["eval", str(sol), "-d", str(DEF), "-w", str(SMALL), "--device", "cpu", "--workload", "a35a1abf", "--budget", "0.05"]
    r = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "a"), "--sandbox", "required"])
    assert r.exit_code == 3 and "no OS sandbox" in r.output and "Traceback" not in r.output, r.output
    monkeypatch.setenv("GITHUB_ACTIONS", "true")  # the default on GitHub is required as well
    r = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "b")])
    assert r.exit_code == 3 and "no OS sandbox" in r.output, r.output
    monkeypatch.delenv("GITHUB_ACTIONS")
    r = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "c"), "--sandbox", "auto"])
    assert r.exit_code == 0, r.output
    assert "WARNING: candidate code runs without the OS sandbox" in r.output
    rep = json.loads((tmp_path / "c" / "report.json").read_text())
    assert "the kernel has no Landlock (simulated)" in rep["isolation"]["warnings"][0]


OPT_GCC = r"""
import json, os, subprocess, sys
from pathlib import Path
from harness.sandbox import Sandbox
sb = Sandbox("required", Path(sys.argv[2]), [])
sb.enter()
sb.seal()
res = {"enforced": sb.enforced}
def attempt(name, argv):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        res[name] = p.stdout.strip() if p.returncode == 0 else f"rc={p.returncode} {p.stderr[-300:]}"
    except Exception as e:
        res[name] = type(e).__name__
attempt("gcc_on_path", ["gcc"])
attempt("tool_off_path", [sys.argv[3]])
print("RESULT " + json.dumps(res))
"""


def _fake_tool(bin_dir: Path, name: str, helper_out: str) -> Path:
    """A 'compiler' that runs a helper from its own prefix (as gcc runs libexec/.../cc1)."""
    libexec = bin_dir.parent / "libexec"
    libexec.mkdir(parents=True, exist_ok=True)
    (libexec / "cc1").write_text(f"#!/bin/sh\necho {helper_out}\n")
    (libexec / "cc1").chmod(0o755)
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / name
    exe.write_text('#!/bin/sh\nexec "$(dirname "$0")/../libexec/cc1"\n')
    exe.chmod(0o755)
    return exe


def test_the_build_tools_on_path_are_readable_and_executable_where_they_live(tmp_path, monkeypatch):
    """The H200 image keeps gcc in /opt/gcc: a compiler's prefix (bin/'s parent, links resolved) is in the
    rules, so Triton's launcher build works; folders not on PATH stay closed."""
    _fake_tool(tmp_path / "opt" / "gcc" / "bin", "gcc", "x")
    linked = tmp_path / "links"
    linked.mkdir()
    (linked / "nvcc").symlink_to(_fake_tool(tmp_path / "cuda" / "bin", "nvcc", "y"))
    monkeypatch.setenv("PATH", f"{tmp_path / 'opt' / 'gcc' / 'bin'}{os.pathsep}{linked}{os.pathsep}{os.environ['PATH']}")
    scratch = Path(tempfile.mkdtemp(prefix="kbot-w-"))
    try:
        got = dict(sandbox.rules(scratch))
    finally:
        shutil.rmtree(scratch)
    assert got.get(str(tmp_path / "opt" / "gcc")) == sandbox.READ_EXEC
    assert got.get(str(tmp_path / "cuda")) == sandbox.READ_EXEC  # the link's target prefix
    assert str(tmp_path) not in got and str(tmp_path / "opt") not in got


@needs_landlock
def test_a_compiler_outside_the_system_folders_runs_inside_the_sandbox(tmp_path):
    _fake_tool(tmp_path / "opt" / "gcc" / "bin", "gcc", "compiled")
    other = _fake_tool(tmp_path / "elsewhere" / "bin", "tool", "escaped")
    env_path = f"{tmp_path / 'opt' / 'gcc' / 'bin'}{os.pathsep}{os.environ['PATH']}"
    scratch = Path(tempfile.mkdtemp(prefix="kbot-w-"))
    script = tmp_path / "script" / "child.py"
    script.parent.mkdir()
    script.write_text(OPT_GCC)
    try:
        p = subprocess.run([sys.executable, str(script), "required", str(scratch), str(other)], capture_output=True, text=True,
                           timeout=120, cwd=REPO, env={**os.environ, "PATH": env_path, "PYTHONPATH": str(REPO)})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, p.stderr[-3000:]
    r = json.loads(line[7:])
    assert r["enforced"] and r["gcc_on_path"] == "compiled", r
    assert r["tool_off_path"] == "PermissionError", r


def test_sandbox_reads_never_open_the_repository_or_the_scratch_parent(tmp_path):
    scratch = Path(tempfile.mkdtemp(prefix="kbot-w-"))
    try:
        paths = {Path(p).resolve() for p, _ in sandbox.rules(scratch, [str(REPO), "/", str(scratch.parent), str(tmp_path)])}
    finally:
        shutil.rmtree(scratch)
    assert REPO.resolve() not in paths and Path("/") not in paths and scratch.parent.resolve() not in paths
    assert not any(p in REPO.resolve().parents for p in paths)
    assert tmp_path.resolve() in paths and (REPO / "harness").resolve() in paths and scratch.resolve() in paths


def test_describe_says_plainly_what_a_worker_got():
    assert sandbox.describe({"enforced": True, "mechanism": "landlock+seccomp", "landlock_abi": 7, "restricted": ["filesystem"]}).startswith("sandboxed")
    assert sandbox.describe({"enforced": False, "mechanism": "none", "errors": ["no Landlock"]}) == "NOT sandboxed (none): no Landlock"
    assert textwrap.dedent(sandbox.describe(None)).startswith("unknown")
