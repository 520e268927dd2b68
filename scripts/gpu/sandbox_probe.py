"""What isolation the GPU machine offers candidate code, checked rather than assumed.

Prints the kernel, the Landlock ABI, whether unprivileged user + network namespaces and bubblewrap are
there, the GPU device nodes; then, in a child process, applies a Landlock ruleset (read and execute
everywhere, write only to a scratch folder and the GPU device nodes, ioctl only on /dev) before CUDA is
initialised, and checks that torch sees the GPU, a Triton kernel compiles (cache in the scratch folder)
and runs, while a write outside the scratch folder and a read of a file outside the read set fail.

    python3 scripts/gpu/sandbox_probe.py
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

SYS_CREATE, SYS_ADD, SYS_RESTRICT = 444, 445, 446  # x86_64
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1, 2, 4, 8
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 16, 32, 64, 128, 256, 512, 1024, 2048, 4096
REFER, TRUNCATE, IOCTL_DEV = 8192, 16384, 32768
libc = ctypes.CDLL(None, use_errno=True)


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


WRITES = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM


def abi() -> int:
    return libc.syscall(SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1))


def all_fs(v: int) -> int:
    bits = EXECUTE | READ_FILE | READ_DIR | WRITES
    if v >= 2:
        bits |= REFER
    if v >= 3:
        bits |= TRUNCATE
    if v >= 5:
        bits |= IOCTL_DEV
    return bits




def restrict(scratch: str, readable: list[str], mode: str = "full") -> str:
    """mode: full (reads, writes and device ioctls restricted), writes (writes only), writes+ioctl,
    full_devall (full, but /dev fully allowed)."""
    v = abi()
    handled = all_fs(v)
    if mode.startswith("writes"):
        handled = WRITES | (TRUNCATE if v >= 3 else 0) | (IOCTL_DEV if v >= 5 and mode == "writes+ioctl" else 0)
    if mode == "nnp_only":  # no Landlock at all, only no_new_privs: the control
        return "no_new_privs only" if libc.prctl(38, 1, 0, 0, 0) == 0 else "no_new_privs failed"
    attr = RulesetAttr(handled, 0, 0)
    fd = libc.syscall(SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(RulesetAttr) if v >= 6 else 16), ctypes.c_uint32(0))
    if fd < 0:
        return f"create_ruleset failed: {os.strerror(ctypes.get_errno())}"
    read = (EXECUTE | READ_FILE | READ_DIR) & handled
    write = handled  # REFER included: Triton renames files between folders of its cache
    extra = [("/tmp", write), ("/run", read), ("/var", read)] if mode == "full_tmpdev" else []
    # bisection of what CUDA's initialisation writes: "writes" plus one more writable tree
    for tree in ("proc", "sys", "tmp", "run", "root", "var"):
        if mode == f"writes_{tree}":
            extra = [("/" + tree if tree != "root" else "/", write)]
    # narrower: the process's own /proc/<pid> (a rule there follows the process), or /proc/driver
    if mode in ("writes_procself", "full_procself"):
        extra = [(f"/proc/{os.getpid()}", write)]
    if mode == "writes_procdriver":
        extra = [("/proc/driver", write)]
    dev_rights = read | WRITE_FILE | (IOCTL_DEV if v >= 5 else 0) | (TRUNCATE if v >= 3 else 0)
    dev = handled if mode in ("full_devall", "full_tmpdev", "writes_devall") else dev_rights & handled
    rules = ([(p, read) for p in readable] if read else []) + [(scratch, write), ("/dev", dev)] + [(p, a) for p, a in extra if os.path.exists(p)]
    for path, access in rules:
        pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        rule = PathBeneath(access, pfd)
        r = libc.syscall(SYS_ADD, ctypes.c_int(fd), ctypes.c_int(1), ctypes.byref(rule), ctypes.c_uint32(0))
        os.close(pfd)
        if r != 0:
            return f"add_rule {path} failed: {os.strerror(ctypes.get_errno())}"
    if libc.prctl(38, 1, 0, 0, 0) != 0:
        return "no_new_privs failed"
    if libc.syscall(SYS_RESTRICT, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
        return f"restrict_self failed: {os.strerror(ctypes.get_errno())}"
    return f"landlock abi {v} applied ({mode})"


def child(scratch: str, secret: str, mode: str) -> dict:
    readable = [p for p in ("/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys", sys.prefix, sys.base_prefix,
                            "/usr/local", os.path.dirname(os.__file__), "/tmp/site", os.getcwd()) if os.path.exists(p)]
    res = {"restrict": restrict(scratch, readable, mode)}
    os.environ.update(TRITON_CACHE_DIR=f"{scratch}/triton", CUDA_CACHE_PATH=f"{scratch}/nv", TMPDIR=scratch, HOME=scratch)
    try:
        open("/root/kbot_probe_write", "w").write("x")
        res["write_outside"] = "ALLOWED (bad)"
    except OSError as e:
        res["write_outside"] = f"refused: {e.strerror}"
    try:
        open(secret).read()
        res["read_secret"] = "ALLOWED (bad)"
    except OSError as e:
        res["read_secret"] = f"refused: {e.strerror}"
    try:
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def add(x, y, n, B: tl.constexpr):
            i = tl.program_id(0) * B + tl.arange(0, B)
            tl.store(y + i, tl.load(x + i, mask=i < n) + 1, mask=i < n)

        x = torch.arange(1000, device="cuda", dtype=torch.float32)
        y = torch.empty_like(x)
        add[(4,)](x, y, 1000, B=256)
        torch.cuda.synchronize()
        res["cuda"] = f"ok: {torch.cuda.get_device_name()}, triton result {'right' if bool((y == x + 1).all()) else 'WRONG'}"
    except Exception as e:  # noqa: BLE001
        res["cuda"] = f"FAILED: {type(e).__name__}: {e}"[:500]
    return res


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3], sys.argv[4])))
        return 0
    info = {"kernel": platform.release(), "landlock_abi": abi(), "user": os.getuid(),
            "bwrap": shutil.which("bwrap"), "nsjail": shutil.which("nsjail"),
            "dev_nvidia": sorted(p for p in os.listdir("/dev") if p.startswith("nvidia"))}
    r = subprocess.run(["unshare", "-U", "-n", "-r", "true"], capture_output=True, text=True)
    info["unshare_user_net"] = "ok" if r.returncode == 0 else f"failed: {r.stderr.strip()[:200]}"
    r = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True)
    info["unshare_net_as_user"] = "ok" if r.returncode == 0 else f"failed: {r.stderr.strip()[:200]}"
    secret_dir = tempfile.mkdtemp(prefix="kbot_secret_", dir=os.path.expanduser("~"))
    secret = os.path.join(secret_dir, "report.json")
    open(secret, "w").write("{}")
    modes = sys.argv[1:] or ["nnp_only", "writes_proc", "writes_procself", "writes_procdriver", "full_procself"]
    for mode in modes:
        scratch = tempfile.mkdtemp(prefix="kbot_scratch_")
        r = subprocess.run([sys.executable, __file__, "--child", scratch, secret, mode], capture_output=True, text=True, timeout=300)
        try:
            info[f"child_{mode}"] = json.loads(r.stdout.strip().splitlines()[-1])
        except Exception:  # noqa: BLE001
            info[f"child_{mode}"] = {"rc": r.returncode, "stdout": r.stdout[-1000:], "stderr": r.stderr[-2000:]}
    shutil.rmtree(secret_dir, ignore_errors=True)
    r = subprocess.run(["dmesg"], capture_output=True, text=True)
    info["dmesg_tail"] = [ln for ln in r.stdout.splitlines() if "landlock" in ln.lower() or "audit" in ln.lower()][-20:] or r.stdout.splitlines()[-10:]
    print(json.dumps(info, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
