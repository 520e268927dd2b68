"""Pack DeepGEMM's sources for a build on the device machine (no internet there, 64 MiB carried per call).

DeepGEMM publishes no wheel that loads against the device's torch 2.11 (issue 18 found one failing on an
undefined symbol, another on every call), so the only way to run it as a peer is to build it there: its
one C++ extension (``csrc/python_api.cpp``, host code only; the kernels are compiled at run time by its
JIT, nvcc or NVRTC) against the installed torch, with the CUTLASS/CuTe and {fmt} headers it pins as git
submodules. This writes the pinned sources as one ``tar.xz`` (~4 MB) under ``.dg/``:

- ``deep_gemm/`` the Python package with ``include/deep_gemm`` and, as DeepGEMM's own ``setup.py``
  arranges them, CUTLASS's ``include/cute`` and ``include/cutlass`` beside it (the JIT's include path);
- ``csrc/`` and ``fmt/include/`` for building the extension; ``LICENSE`` (MIT).

The CUTLASS and {fmt} commits are read from DeepGEMM's own tree (its submodule entries), so the one pin
here is DeepGEMM's commit. ``scripts/gpu/deepgemm_device.sh`` unpacks and builds it on the device.

    usage (repo root, this machine; needs git and GitHub, or local clones that hold the commits):
        .venv/bin/python scripts/gpu/pack_deepgemm.py                    # -> .dg/ (git-ignored; carry it)
        .venv/bin/python scripts/gpu/pack_deepgemm.py --deepgemm-git /path/DeepGEMM.git \\
            --cutlass-git /path/cutlass.git --fmt-git /path/fmt.git      # offline, from existing clones

Exit 0 with the archive written, 1 when it would not fit the carry, 2 on a source that lacks a commit.
"""

from __future__ import annotations

import argparse
import io
import lzma
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEEPGEMM_URL = "https://github.com/deepseek-ai/DeepGEMM.git"
DEEPGEMM_COMMIT = "54e22612409371d6364144b69086735beb54e98b"  # 2026-06-23, version 2.6.1 (sm_90 1d2d FP8 GEMMs, paged MQA logits)
SUBMODULES = {"cutlass": ("https://github.com/NVIDIA/cutlass.git", "third-party/cutlass"),
              "fmt": ("https://github.com/fmtlib/fmt.git", "third-party/fmt")}
LIMIT_MB = 8  # beside the tree (~27 MB), .whl (~5 MB) and .fi (~19 MB) under the 64 MiB carry


class PackError(Exception):
    pass


def git(repo: Path, *args: str) -> bytes:
    r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True)
    if r.returncode != 0:
        raise PackError(f"git {' '.join(args)} in {repo}: {r.stderr.decode(errors='replace').strip()}")
    return r.stdout


def has_commit(repo: Path, commit: str) -> bool:
    return subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True).returncode == 0


def fetch(url: str, commit: str, cache: Path) -> Path:
    """A bare repository under ``cache`` that holds ``commit`` (one shallow fetch of that commit)."""
    cache.mkdir(parents=True, exist_ok=True)
    if not (cache / "HEAD").exists():
        git(cache, "init", "--bare", "-q")
    if not has_commit(cache, commit):
        git(cache, "fetch", "-q", "--depth", "1", url, commit)
    return cache


def submodule_commit(repo: Path, commit: str, path: str) -> str:
    """The commit a gitlink (submodule entry) of ``commit`` points at."""
    line = git(repo, "ls-tree", commit, path).decode().split()
    if len(line) < 3 or line[1] != "commit":
        raise PackError(f"{path} is not a submodule entry in {commit[:12]}")
    return line[2]


def members(repo: Path, commit: str, prefix: str, rename: tuple[str, str]):
    """(archive path, bytes) of every file under ``prefix`` at ``commit``, ``rename[0]`` replaced by ``rename[1]``."""
    if not has_commit(repo, commit):
        raise PackError(f"{repo} does not hold commit {commit}")
    blob = git(repo, "archive", "--format=tar", commit, prefix)
    with tarfile.open(fileobj=io.BytesIO(blob)) as t:
        for m in t.getmembers():
            if m.isfile():
                yield rename[1] + m.name[len(rename[0]):], t.extractfile(m).read()


def pack(sources: dict[str, tuple[Path, str]], out: Path) -> tuple[int, int]:
    """Write the device tree to ``out``; (files, bytes unpacked)."""
    dg, dg_commit = sources["deepgemm"]
    cut, cut_commit = sources["cutlass"]
    fmt, fmt_commit = sources["fmt"]
    plan = [
        (dg, dg_commit, "deep_gemm/", ("deep_gemm/", "deep_gemm/")),
        (dg, dg_commit, "csrc/", ("csrc/", "csrc/")),
        (dg, dg_commit, "LICENSE", ("LICENSE", "LICENSE")),
        (cut, cut_commit, "include/cute/", ("include/cute/", "deep_gemm/include/cute/")),
        (cut, cut_commit, "include/cutlass/", ("include/cutlass/", "deep_gemm/include/cutlass/")),
        (fmt, fmt_commit, "include/", ("include/", "fmt/include/")),
    ]
    files = size = 0
    with lzma.open(out, "wb", preset=9 | lzma.PRESET_EXTREME) as xz, tarfile.open(fileobj=xz, mode="w") as tar:
        for repo, commit, prefix, rename in plan:
            for name, data in members(repo, commit, prefix, rename):
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                tar.addfile(info, io.BytesIO(data))
                files, size = files + 1, size + len(data)
        pins = (f"deepgemm {dg_commit}\ncutlass {cut_commit}\nfmt {fmt_commit}\n").encode()
        info = tarfile.TarInfo("PINS")
        info.size, info.mode, info.mtime = len(pins), 0o644, 0
        tar.addfile(info, io.BytesIO(pins))
    return files, size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--deepgemm-git", type=Path, help="a clone holding DeepGEMM's pinned commit (default: fetched)")
    ap.add_argument("--cutlass-git", type=Path, help="a clone holding the CUTLASS commit DeepGEMM pins (default: fetched)")
    ap.add_argument("--fmt-git", type=Path, help="a clone holding the {fmt} commit DeepGEMM pins (default: fetched)")
    ap.add_argument("--out", type=Path, default=REPO / ".dg", help="output folder (default .dg/)")
    args = ap.parse_args(argv)
    cache = REPO / "build" / "deepgemm-src"  # git-ignored, not carried
    try:
        dg = args.deepgemm_git or fetch(DEEPGEMM_URL, DEEPGEMM_COMMIT, cache / "DeepGEMM.git")
        sources = {"deepgemm": (dg, DEEPGEMM_COMMIT)}
        for name, (url, path) in SUBMODULES.items():
            commit = submodule_commit(dg, DEEPGEMM_COMMIT, path)
            given = getattr(args, f"{name}_git")
            sources[name] = (given or fetch(url, commit, cache / f"{name}.git"), commit)
        args.out.mkdir(parents=True, exist_ok=True)
        for old in args.out.glob("deepgemm-*.tar.xz"):  # a re-pack replaces it
            old.unlink()
        target = args.out / f"deepgemm-{DEEPGEMM_COMMIT[:12]}.tar.xz"
        files, size = pack(sources, target)
    except PackError as e:
        print(f"pack_deepgemm.py: {e}", file=sys.stderr)
        return 2
    packed = target.stat().st_size
    print(f"{target}: {files} files, {size / 1e6:.1f} MB unpacked, {packed / 1e6:.1f} MB packed "
          f"(DeepGEMM {DEEPGEMM_COMMIT[:12]}, CUTLASS {sources['cutlass'][1][:12]}, fmt {sources['fmt'][1][:12]})")
    if packed > LIMIT_MB * 1e6:
        print(f"over {LIMIT_MB} MB: with .whl and .fi the device call would exceed the 64 MiB carry", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
