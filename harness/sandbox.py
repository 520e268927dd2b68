"""The OS sandbox of the processes that run candidate code (the harness worker and the CUPTI observer).

What a sandboxed worker can do (Linux only, no new dependency: system calls through ctypes):

- **Filesystem (Landlock).** Read: the Python installation (prefixes, stdlib, site-packages), system
  directories (``/usr``, ``/lib*``, ``/bin``, ``/sbin``, a list of ``/etc`` files), the harness package,
  our ``definitions/`` (trusted builders and references are loaded from there while workloads run),
  the guard's rule catalogue (``skills/guard``), ``/sys``, a few ``/proc`` files plus the worker's own
  ``/proc/<pid>``, and whatever the parent names in
  ``KBOT_SANDBOX_READ`` (a dataset root, a definition folder elsewhere). Execute: the same
  installation and system directories, and the prefix of every build tool on PATH (gcc, ptxas, nvcc,
  ninja: the H200 image keeps gcc in /opt/gcc). Write: a private scratch folder the
  parent made for this one worker (``KBOT_SCRATCH``; the build, ``TMPDIR``, ``HOME``, the Triton and
  torch-extension caches and the CUDA JIT cache all point into it), ``/dev/null`` and friends, and the
  NVIDIA device nodes (with ioctl). Nothing else: not the run folder, the traces, the report, the
  repository, other workers' scratch folders, the rest of ``/tmp`` or ``/dev/shm``.
- **Processes.** Landlock scopes ptrace (so ``/proc/<parent>/environ``, ``mem``, ``fd`` and ``cwd`` are
  refused) and, from ABI 6, signals and abstract unix sockets to the worker's own domain.
- **Network.** A seccomp filter, installed with TSYNC on every thread just before the candidate is
  imported (``seal``), refuses ``socket(2)`` for every family and io_uring (which could open sockets
  behind seccomp's back); from ABI 4 Landlock also refuses TCP bind/connect from process start. The
  filter refuses a short list of calls that would step around Landlock or reach other processes or the
  kernel as root (bpf, perf_event_open, kernel modules, kexec, iopl/ioperm, open_by_handle_at,
  fanotify, userfaultfd, process_vm_*, ptrace, mount and friends, unshare/setns, swap, reboot, clock
  and host-name changes, keyrings, path truncate(2)). A network namespace would add nothing once no
  socket can be created, and needs a user namespace (refused by AppArmor on Ubuntu 24.04 runners)
  unless the worker is root: it is not used.

Why Landlock is applied at process start (before ``import torch``), not just before the candidate:
``landlock_restrict_self`` applies to the calling thread and the threads it creates later, and ABI 7
has no flag to apply it to threads that already exist; torch and CUDA start threads on import and
first use. Restricting the single-threaded process first means every thread the worker ever has is
inside the sandbox. The seccomp filter does have TSYNC, so it can wait until the worker's own set-up
(CUDA context, CUPTI subscription, environment queries) is done.

Modes (``--sandbox`` / ``KBOT_SANDBOX``): ``required`` refuses to run candidate code where the sandbox
cannot be set up; ``auto`` runs it anyway and says so loudly in the report and on stderr; ``off``
does not try. On GitHub Actions (``GITHUB_ACTIONS=true``) the default is ``required``, elsewhere
``auto``. Every worker reports what it got (``isolation``), before any candidate code runs.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys
import sysconfig
from pathlib import Path
from typing import Any, Iterable

from .paths import PathsError, definitions_dirs, repository, skill_dirs, source_checkout

MODES = ("required", "auto", "off")
ENV_MODE = "KBOT_SANDBOX"
ENV_SCRATCH = "KBOT_SCRATCH"
ENV_READ = "KBOT_SANDBOX_READ"

HARNESS_DIR = Path(__file__).resolve().parent


def _repositories() -> list[Path]:
    """The kbot checkout the harness runs from (none for an installed wheel) and the repository kbot runs in
    (harness/paths.py): never opened whole, since run folders, kernels/ and .git live there."""
    try:
        repo = repository()
    except PathsError:  # a bad KBOT_REPO was refused by the parent already; nothing of it is opened here
        repo = None
    return [p.resolve() for p in (source_checkout(), repo) if p is not None]

# ---- Landlock (include/uapi/linux/landlock.h)
_SYS_CREATE, _SYS_ADD_RULE, _SYS_RESTRICT = 444, 445, 446  # the same on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
# Rights that only make sense on a directory: a rule on a file may not carry them.
_DIR_ONLY = (FS_READ_DIR | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_CHAR | FS_MAKE_DIR | FS_MAKE_REG | FS_MAKE_SOCK
             | FS_MAKE_FIFO | FS_MAKE_BLOCK | FS_MAKE_SYM | FS_REFER)
READ = FS_READ_FILE | FS_READ_DIR
READ_EXEC = READ | FS_EXECUTE
DEVICE = FS_READ_FILE | FS_WRITE_FILE | FS_IOCTL_DEV | FS_READ_DIR
SCRATCH = (1 << 16) - 1 & ~FS_MAKE_CHAR & ~FS_MAKE_BLOCK & ~FS_EXECUTE  # no device nodes, nothing run from it

_PR_SET_NO_NEW_PRIVS = 38
_O_PATH = getattr(os, "O_PATH", 0o10000000)

# ---- seccomp (include/uapi/linux/seccomp.h, filter.h, audit.h)
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_TSYNC = 1
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JGE_K = 0x35
_BPF_RET_K = 0x06
_X32_SYSCALL_BIT = 0x40000000

# Calls refused once the candidate may run: no sockets, nothing that steps around Landlock or reaches
# the kernel and other processes with root's capabilities. Names are those of the x86_64 table.
DENIED_SYSCALLS = (
    "socket", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "bpf", "perf_event_open", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "iopl", "ioperm", "open_by_handle_at", "name_to_handle_at", "fanotify_init", "userfaultfd",
    "process_vm_readv", "process_vm_writev", "ptrace",
    "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr", "unshare", "setns", "swapon", "swapoff", "reboot", "syslog", "acct", "quotactl", "quotactl_fd",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
    "keyctl", "add_key", "request_key", "truncate",
)
_SYSCALLS = {
    # machine: (AUDIT_ARCH_*, seccomp(2) number, {name: number})
    "x86_64": (0xC000003E, 317, {
        "socket": 41, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "bpf": 321,
        "perf_event_open": 298, "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246,
        "kexec_file_load": 320, "iopl": 172, "ioperm": 173, "open_by_handle_at": 304, "name_to_handle_at": 303,
        "fanotify_init": 300, "userfaultfd": 323, "process_vm_readv": 310, "process_vm_writev": 311, "ptrace": 101,
        "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "unshare": 272,
        "setns": 308, "swapon": 167, "swapoff": 168, "reboot": 169, "syslog": 103, "acct": 163, "quotactl": 179,
        "quotactl_fd": 443, "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
        "sethostname": 170, "setdomainname": 171, "keyctl": 250, "add_key": 248, "request_key": 249, "truncate": 76,
    }),
    "aarch64": (0xC00000B7, 277, {
        "socket": 198, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "bpf": 280,
        "perf_event_open": 241, "init_module": 105, "finit_module": 273, "delete_module": 106, "kexec_load": 104,
        "kexec_file_load": 294, "open_by_handle_at": 265, "name_to_handle_at": 264, "fanotify_init": 262,
        "userfaultfd": 282, "process_vm_readv": 270, "process_vm_writev": 271, "ptrace": 117, "mount": 40,
        "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428, "move_mount": 429, "fsopen": 430,
        "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "unshare": 97, "setns": 268,
        "swapon": 224, "swapoff": 225, "reboot": 142, "syslog": 116, "acct": 89, "quotactl": 60, "quotactl_fd": 443,
        "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266, "adjtimex": 171, "sethostname": 161,
        "setdomainname": 162, "keyctl": 219, "add_key": 217, "request_key": 218, "truncate": 45,
    }),
}

# /etc entries programs read to start (the dynamic loader, user and group names, time zone, NVIDIA and
# OpenCL vendor files); not the rest of /etc (keys, shadow passwords, runner configuration).
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "ld.so.preload", "passwd", "group", "nsswitch.conf", "localtime",
        "timezone", "os-release", "lsb-release", "debian_version", "alternatives", "nvidia", "OpenCL", "vulkan",
        "host.conf", "hosts", "gai.conf", "mime.types", "environment")
# /proc entries besides the worker's own /proc/<pid> (a rule there follows the process, not the name).
_PROC = ("cpuinfo", "meminfo", "stat", "loadavg", "uptime", "version", "filesystems", "devices", "modules",
         "sys", "driver", "bus", "mounts", "self", "thread-self")
_DEV_RW = ("null", "zero", "full")
_DEV_R = ("random", "urandom")


class SandboxError(RuntimeError):
    """The sandbox was required and could not be set up."""


def _libc() -> Any:
    lib = ctypes.CDLL(None, use_errno=True)
    lib.syscall.restype = ctypes.c_long
    return lib


def _abi_and_reason() -> tuple[int, str]:
    if sys.platform != "linux":
        return 0, f"Landlock is a Linux feature; this is {sys.platform}"
    try:
        libc = _libc()
    except OSError as e:
        return 0, f"no C library to make system calls through ({e})"
    abi = libc.syscall(_SYS_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    if abi >= 1:
        return int(abi), ""
    err = ctypes.get_errno()
    if err == errno.ENOSYS:
        return 0, "the kernel has no Landlock (built without CONFIG_SECURITY_LANDLOCK, or a seccomp policy hides it)"
    if err == errno.EOPNOTSUPP:
        return 0, "Landlock is built in but disabled (add landlock to the lsm= boot parameter)"
    return 0, f"landlock_create_ruleset failed: {os.strerror(err)}"


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers, 0 when none."""
    return _abi_and_reason()[0]


def unavailable_reason() -> str:
    """Why there is no Landlock here ('' when there is)."""
    return _abi_and_reason()[1]


def default_mode(environ: dict[str, str] | None = None) -> str:
    """The mode when nobody chose one: ``KBOT_SANDBOX``, else ``required`` on GitHub Actions, else
    ``auto``."""
    env = os.environ if environ is None else environ
    value = (env.get(ENV_MODE) or "").strip().lower()
    if value:
        if value not in MODES:
            raise ValueError(f"{ENV_MODE}={value!r}: expected one of {', '.join(MODES)}")
        return value
    return "required" if env.get("GITHUB_ACTIONS") == "true" else "auto"


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"sandbox mode must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


def preflight(mode: str, device: str = "cpu") -> str:
    """For the parent, before it starts any worker: '' when a worker can be sandboxed here (or need not
    be), else the reason; raises SandboxError when the mode is ``required`` and it cannot. On the GPU it
    makes sure the NVIDIA device nodes exist first (see ensure_gpu_nodes)."""
    if check_mode(mode) == "off":
        return ""
    if device == "cuda":
        ensure_gpu_nodes()
    abi, why = _abi_and_reason()
    if abi < 1:
        msg = f"no OS sandbox for candidate code: {why}"
        if mode == "required":
            raise SandboxError(msg + " (--sandbox required refuses to run candidate code unsandboxed; "
                               "use --sandbox auto or off, or KBOT_SANDBOX, on a machine you trust)")
        return msg
    if platform.machine() not in _SYSCALLS:
        msg = f"no seccomp filter for {platform.machine()}: sockets other than TCP would stay open"
        if mode == "required":
            raise SandboxError(msg)
        return msg
    return ""


def ensure_gpu_nodes() -> None:
    """The CUDA driver creates /dev/nvidia-uvm (and /dev/nvidiaN) on first use by running the setuid
    nvidia-modprobe; a sandboxed worker can neither make device nodes nor open nodes made after its
    rules were set, so the unsandboxed parent has the nodes made first (a no-op when they exist): one
    per GPU the driver knows, since a worker pinned to GPU 3 (``--gpus``) opens /dev/nvidia3."""
    import shutil
    import subprocess

    minors = gpu_minors()
    missing = [m for m in minors if not os.path.exists(f"/dev/nvidia{m}")]
    if os.path.exists("/dev/nvidia-uvm") and not missing:
        return
    exe = shutil.which("nvidia-modprobe") or ("/usr/bin/nvidia-modprobe" if os.path.exists("/usr/bin/nvidia-modprobe") else None)
    if exe is None:
        return
    for m in missing or minors[:1]:
        try:
            subprocess.run([exe, "-u", f"-c={m}"], stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass


def gpu_minors() -> list[int]:
    """The device minor numbers of the GPUs the NVIDIA driver knows (/proc/driver/nvidia/gpus/*/information,
    "Device Minor: N"); [0] when it says nothing."""
    import glob
    import re

    out = set()
    for info in glob.glob("/proc/driver/nvidia/gpus/*/information"):
        try:
            m = re.search(r"Device Minor:\s*(\d+)", Path(info).read_text())
        except OSError:
            continue
        if m:
            out.add(int(m.group(1)))
    return sorted(out) or [0]


# ------------------------------------------------------------------------------------------ rules


def scratch_env(scratch: Path) -> dict[str, str]:
    """Where the tools a candidate may use keep their files: all inside the worker's scratch folder."""
    s = Path(scratch)
    return {
        "HOME": str(s / "home"), "TMPDIR": str(s / "tmp"), "XDG_CACHE_HOME": str(s / "cache"),
        "TRITON_CACHE_DIR": str(s / "triton"), "TRITON_HOME": str(s / "home"),
        "TORCH_EXTENSIONS_DIR": str(s / "torch_extensions"), "TORCHINDUCTOR_CACHE_DIR": str(s / "inductor"),
        "CUDA_CACHE_PATH": str(s / "nv"),
    }


def _python_dirs() -> list[Path]:
    """The interpreter's installation and every folder on sys.path (site-packages, wheels unpacked
    elsewhere and put on PYTHONPATH, as on the device)."""
    dirs = {Path(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix) if p}
    for key in ("stdlib", "platstdlib", "purelib", "platlib", "include", "platinclude", "scripts"):
        p = sysconfig.get_paths().get(key)
        if p:
            dirs.add(Path(p))
    try:
        import site

        dirs.update(Path(p) for p in site.getsitepackages())
    except (AttributeError, ImportError):
        pass
    dirs.update(Path(p) for p in sys.path if p and os.path.isabs(p) and os.path.isdir(p))
    dirs.add(Path(os.path.realpath(sys.executable)).parent.parent)
    return sorted(dirs)


# The compilers and build tools an honest candidate's build runs: Triton compiles its launcher with
# $CC or the first gcc/clang on PATH, torch's extensions run c++/ninja/nvcc, Triton and nvcc run ptxas.
_TOOLS = ("cc", "gcc", "c++", "g++", "clang", "nvcc", "ptxas", "ninja", "as", "ld")


def _toolchain_dirs() -> list[Path]:
    """The installation prefix of every build tool on PATH (and of $CC / $CXX), as found and with links
    resolved: ``/opt/gcc`` for ``/opt/gcc/bin/gcc`` (its cc1, headers and libraries live beside bin/).
    On the H200 image gcc lives in /opt/gcc, outside the system directories: without this every Triton
    candidate failed in the sandbox with PermissionError on /opt/gcc/bin/gcc."""
    import shutil

    names = [os.environ.get(v, "").split()[0] for v in ("CC", "CXX") if os.environ.get(v, "").strip()]
    dirs: set[Path] = set()
    for name in (*names, *_TOOLS):
        exe = shutil.which(name)
        if not exe:
            continue
        for x in {Path(exe).absolute(), Path(os.path.realpath(exe))}:
            dirs.add(x.parent.parent if x.parent.name == "bin" else x.parent)
    return sorted(dirs)


def _never_whole(path: Path, scratch: Path | None = None) -> bool:
    """Folders that must never be opened wholesale: the root, the home folder, the repository or anything
    above it (the run folder, kernels/, .git and other runs live there), and the folder the workers'
    scratch folders live in or anything above it (the other workers' folders)."""
    try:
        p = path.resolve()
    except OSError:
        return True
    if p == Path("/") or p == Path.home().resolve() or any(p == r or p in r.parents for r in _repositories()):
        return True
    if scratch is not None:
        base = Path(scratch).resolve().parent
        return p == base or p in base.parents
    return False


def rules(scratch: Path, extra_read: Iterable[str | Path] = ()) -> list[tuple[str, int]]:
    """(path, rights) for everything a worker may reach; paths that do not exist are left out by the
    caller. The rights are masked to what the kernel's ABI knows when applied."""
    out: list[tuple[str, int]] = []
    for d in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        out.append((d, READ_EXEC))
    for name in _ETC:
        out.append((f"/etc/{name}", READ))
    for p in _python_dirs():
        if not _never_whole(p, scratch):
            out.append((str(p), READ_EXEC))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var) and not _never_whole(Path(os.environ[var]), scratch):
            out.append((os.environ[var], READ_EXEC))
    for p in _toolchain_dirs():
        if not _never_whole(p, scratch):
            out.append((str(p), READ_EXEC))
    for p in (os.environ.get("LD_LIBRARY_PATH") or "").split(os.pathsep):
        if p and os.path.isabs(p) and not _never_whole(Path(p), scratch):
            out.append((p, READ_EXEC))
    out.append((str(HARNESS_DIR), READ))
    for d in definitions_dirs():  # trusted references and input builders, the repository's and ours
        out.append((str(d), READ))
    for d in skill_dirs("guard"):  # the rule catalogue the runtime guard cites
        out.append((str(d), READ))
    for p in extra_read:
        if p and not _never_whole(Path(p), scratch):
            out.append((str(p), READ))
    out.append(("/sys", READ))
    for name in _PROC:
        out.append((f"/proc/{name}", READ))
    # Its own /proc/<pid> also writable: on the H200 (Firecracker, kernel 6.18, Landlock ABI 7) CUDA's
    # initialisation fails with error 304 under any ruleset that handles writes unless the process may
    # write there (docs/measurements.md, "Landlock on the H200"). Files cannot be created in procfs; what
    # this allows is writing the process's own entries, which it can change from inside anyway.
    out.append((f"/proc/{os.getpid()}", READ | FS_WRITE_FILE | FS_TRUNCATE))
    for name in _DEV_RW:
        out.append((f"/dev/{name}", FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE))
    for name in _DEV_R:
        out.append((f"/dev/{name}", FS_READ_FILE))
    try:
        nvidia = sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))
    except OSError:
        nvidia = []
    for name in nvidia:
        out.append((f"/dev/{name}", DEVICE))
    out.append((str(scratch), SCRATCH))
    return out


# ------------------------------------------------------------------------------------------ applying


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_PINNED: list[int] = []  # O_PATH descriptors kept open: a /proc/<pid> rule must outlive dentry reclaim


def _landlock(libc: Any, abi: int, scratch: Path, extra_read: Iterable[str | Path]) -> dict[str, Any]:
    handled = _FS_BY_ABI[min(abi, 5)]
    attr = _RulesetAttr(handled_access_fs=handled)
    size = 8
    restricted = ["filesystem"]
    if abi >= 4:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
        size = 16
        restricted.append("tcp")
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        size = 24
        restricted += ["signals", "abstract-unix-sockets"]
    fd = libc.syscall(_SYS_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    added, skipped = 0, []
    try:
        for path, rights in rules(scratch, extra_read):
            try:
                pfd = os.open(path, _O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not on this machine
            try:
                is_dir = os.path.isdir(f"/proc/self/fd/{pfd}")
                allowed = rights & handled & (~0 if is_dir else ~_DIR_ONLY)
                rule = _PathBeneath(allowed_access=allowed, parent_fd=pfd)
                if libc.syscall(_SYS_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                    skipped.append(f"{path}: {os.strerror(ctypes.get_errno())}")
                else:
                    added += 1
            finally:
                if path.startswith("/proc/") and path[6:].isdigit():
                    _PINNED.append(pfd)
                else:
                    os.close(pfd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}")
        if libc.syscall(_SYS_RESTRICT, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)
    return {"landlock_abi": abi, "rules": added, "rules_skipped": skipped[:10], "restricted": restricted}


def _bpf(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def seccomp_program(machine: str | None = None) -> bytes:
    """The filter as BPF bytes: calls of another architecture (x32, i386 through int 0x80) and the
    calls in DENIED_SYSCALLS get EPERM, everything else is allowed."""
    arch, _, table = _SYSCALLS[machine or platform.machine()]
    nrs = sorted({table[n] for n in DENIED_SYSCALLS if n in table})
    deny = _SECCOMP_RET_ERRNO | errno.EPERM
    prog = [_bpf(_BPF_LD_W_ABS, 0, 0, 4)]  # seccomp_data.arch
    # jump over the whole body to "deny" when the architecture differs
    body_len = 2 + len(nrs) + 1  # load nr, x32 check, one jeq per call, allow
    prog.append(_bpf(_BPF_JEQ_K, 0, body_len, arch))
    prog.append(_bpf(_BPF_LD_W_ABS, 0, 0, 0))  # seccomp_data.nr
    prog.append(_bpf(_BPF_JGE_K, len(nrs) + 1, 0, _X32_SYSCALL_BIT))
    for i, nr in enumerate(nrs):
        prog.append(_bpf(_BPF_JEQ_K, len(nrs) - i, 0, nr))
    prog.append(_bpf(_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW))
    prog.append(_bpf(_BPF_RET_K, 0, 0, deny))
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _seccomp(libc: Any) -> None:
    machine = platform.machine()
    if machine not in _SYSCALLS:
        raise OSError(errno.ENOSYS, f"no seccomp filter for {machine}")
    prog = seccomp_program(machine)
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = _SockFprog(len=len(prog) // 8, filter=ctypes.cast(buf, ctypes.c_void_p).value)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}")
    rc = libc.syscall(ctypes.c_long(_SYSCALLS[machine][1]), ctypes.c_uint(_SECCOMP_SET_MODE_FILTER),
                      ctypes.c_uint(_SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(fprog))
    if rc != 0:
        err = ctypes.get_errno()
        why = f"thread {rc} could not be synchronized" if rc > 0 else os.strerror(err)
        raise OSError(err or errno.EPERM, f"seccomp(SET_MODE_FILTER, TSYNC): {why}")


def thread_count() -> int:
    """Threads of this process (0 when /proc cannot say)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


class Sandbox:
    """One worker's sandbox: ``enter`` at process start, ``seal`` just before candidate code is
    imported, ``record`` for the report. In ``auto`` mode failures are recorded, not raised."""

    def __init__(self, mode: str, scratch: Path | None, extra_read: Iterable[str | Path] = ()):
        self.mode = check_mode(mode)
        self.scratch = Path(scratch) if scratch else None
        self.extra_read = [p for p in extra_read if p]
        self.landlock: dict[str, Any] | None = None
        self.seccomp = False
        self.errors: list[str] = []

    @classmethod
    def from_env(cls) -> "Sandbox":
        mode = os.environ.pop(ENV_MODE, "") or "off"
        scratch = os.environ.get(ENV_SCRATCH) or None
        extra = [p for p in (os.environ.pop(ENV_READ, "") or "").split(os.pathsep) if p]
        try:
            return cls(mode, Path(scratch) if scratch else None, extra)
        except ValueError as e:
            sb = cls("required", Path(scratch) if scratch else None, extra)
            sb.errors.append(str(e))
            return sb

    def _fail(self, what: str) -> None:
        self.errors.append(what)
        if self.mode == "required":
            raise SandboxError(what)

    def use_scratch(self) -> None:
        """Point temporary files, caches and HOME into the scratch folder (all modes), and make it the
        working directory, so relative paths land there too."""
        if self.scratch is None:
            return
        for var, value in scratch_env(self.scratch).items():
            os.makedirs(value, exist_ok=True)
            os.environ[var] = value
        import tempfile

        tempfile.tempdir = None  # recomputed from TMPDIR
        os.chdir(self.scratch)

    def enter(self) -> None:
        """Landlock on the whole (still single-threaded) process."""
        if self.errors and self.mode == "required":
            raise SandboxError(self.errors[0])
        if self.mode == "off":
            return
        if self.scratch is None or not self.scratch.is_dir():
            self._fail(f"no private scratch folder given ({ENV_SCRATCH})")
            return
        abi, why = _abi_and_reason()
        if abi < 1:
            self._fail(f"no Landlock: {why}")
            return
        threads = thread_count()
        if threads != 1:  # Landlock would bind this thread only, and the others could read everything
            self._fail(f"{threads} threads already run: the sandbox must be entered before any thread starts")
            return
        try:
            self.landlock = _landlock(_libc(), abi, self.scratch, self.extra_read)
        except OSError as e:
            self._fail(f"Landlock could not be applied: {e.strerror or e}")

    def seal(self) -> None:
        """The seccomp filter on every thread, right before the candidate is imported."""
        if self.mode == "off" or self.seccomp:
            return
        try:
            _seccomp(_libc())
            self.seccomp = True
        except OSError as e:
            self._fail(f"seccomp filter not installed: {e.strerror or e}")

    @property
    def enforced(self) -> bool:
        """Filesystem and network both closed (what ``required`` insists on)."""
        return self.landlock is not None and self.seccomp

    def record(self) -> dict[str, Any]:
        """What this worker got, for the report (sent before any candidate code runs)."""
        restricted = list(self.landlock["restricted"]) if self.landlock else []
        if self.seccomp:
            restricted += ["sockets", "kernel-and-process-calls"]
        if self.landlock:
            restricted.append("ptrace")
        mech = "+".join(m for m, on in (("landlock", self.landlock is not None), ("seccomp", self.seccomp)) if on) or "none"
        rec: dict[str, Any] = {"mode": self.mode, "enforced": self.enforced, "mechanism": mech,
                               "landlock_abi": self.landlock["landlock_abi"] if self.landlock else None,
                               "restricted": restricted}
        if self.landlock and self.landlock["rules_skipped"]:
            rec["rules_skipped"] = self.landlock["rules_skipped"]
        if self.errors:
            rec["errors"] = self.errors[:5]
        if not restricted:
            rec["errors"] = rec.get("errors") or ["sandbox off"]
        return rec


_ACTIVE: list[Sandbox] = []  # the sandbox this process entered (harness.sandboxed), if any


def activate(sb: Sandbox) -> None:
    _ACTIVE[:] = [sb]


def seal_active() -> dict[str, Any] | None:
    """For a program run through harness.sandboxed, just before it imports candidate code: the seccomp
    filter (SandboxError in required mode when it fails); returns the isolation record, None when the
    process was not started sandboxed."""
    if not _ACTIVE:
        return None
    _ACTIVE[0].seal()
    return _ACTIVE[0].record()


def describe(rec: dict[str, Any] | None) -> str:
    """One line for a person: what a worker's isolation was."""
    if not rec:
        return "unknown (no worker reported)"
    if rec.get("enforced"):
        abi = rec.get("landlock_abi")
        return f"sandboxed ({rec.get('mechanism')}, Landlock ABI {abi}): " + ", ".join(rec.get("restricted") or [])
    why = "; ".join(rec.get("errors") or []) or "partial"
    return f"NOT sandboxed ({rec.get('mechanism', 'none')}): {why}"
