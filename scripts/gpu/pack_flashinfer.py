"""Pack FlashInfer for the device machine: the parts its sm_90 top-k and MLA kernels need, under the
device tool's 64 MiB carry limit (the wheel is 101 MB).

flashinfer-python 0.7.4 is 101 MB as a wheel and 396 MB of CUDA sources unpacked, nearly all of them for
kernels that do not run on Hopper or that no baseline of ours calls. It compiles its kernels on first use
(JIT, nvcc + ninja), so what a baseline needs is the Python package, the headers, and the few `.cu` files
of the modules it builds. This keeps:

- every ``.py`` / ``.json`` file of the package (``import flashinfer`` imports most of its subpackages),
- ``data/include``, ``data/cccl``, ``data/cutlass/include`` (+ ``tools/util/include``), ``data/spdlog/include``,
- of ``data/csrc``: the top-level headers and the sources of the modules named in ``MODULE_SOURCES``,

and writes it as one ``tar.xz`` (~15 MB: xz packs C++ sources ~2x tighter than a wheel's deflate) beside
the pure-Python and small binary wheels ``import flashinfer`` needs on the device (apache-tvm-ffi, ninja,
einops, tabulate, nvidia-ml-py, tqdm). ``scripts/gpu/flashinfer_device.sh`` unpacks them there and builds
the modules ahead of time, outside the sandbox, into the package's own AOT folder, so the sandboxed
harness worker only loads them.

    usage (repo root, this machine; needs the package registry):
        .venv/bin/python scripts/gpu/pack_flashinfer.py            # -> .fi/ (git-ignored; carry it)
        .venv/bin/python scripts/gpu/pack_flashinfer.py --wheel path/to/flashinfer_python-0.7.4-py3-none-any.whl
"""

from __future__ import annotations

import argparse
import io
import lzma
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VERSION = "0.7.4"
# the JIT modules our baselines build, by the csrc files flashinfer/jit/*.py names for them
MODULE_SOURCES = {
    "topk": ("topk.cu", "cub_topk.cu", "flashinfer_topk_binding.cu", "flashinfer_fast_topk_clusters_binding.cu"),
    "batch_mla_sm90": ("batch_mla_sm90_plan.cu", "batch_mla_sm90_run.cu", "batch_mla_sm90_binding.cu",
                       "batch_mla_config.jinja"),
}
HEADER_TREES = ("include/", "cccl/", "spdlog/include/", "cutlass/include/", "cutlass/tools/util/include/")
# pinned: two wheels of one package in .fi/ would stop the device's `pip install .fi/*.whl`
DEPS = ("apache-tvm-ffi==0.1.15.post2", "ninja==1.13.2", "einops==0.8.2", "tabulate==0.10.0", "nvidia-ml-py==13.615.71",
        "tqdm==4.70.1")
DEVICE_PLATFORM = ("--python-version", "3.12", "--platform", "manylinux2014_x86_64", "--platform",
                   "manylinux_2_17_x86_64", "--platform", "manylinux_2_28_x86_64", "--platform", "any")
LIMIT_MB = 40  # what is left of the 64 MiB carry after the tracked tree (~27 MB) and .whl (~5 MB)


def keep(name: str) -> bool:
    """Whether a wheel member goes into the device package."""
    data = "flashinfer/data/"
    if name.startswith(data):
        rest = name[len(data):]
        if rest.startswith(HEADER_TREES):
            return True
        if rest.startswith("csrc/"):
            leaf = rest[len("csrc/"):]
            wanted = {f for files in MODULE_SOURCES.values() for f in files}
            return "/" not in leaf and (leaf in wanted or leaf.endswith((".h", ".cuh")))
        return False
    if name.startswith("flashinfer/"):
        return name.endswith((".py", ".json", "py.typed"))
    return name.startswith(f"flashinfer_python-{VERSION}.dist-info/") and not name.endswith("RECORD")


def pack(wheel: Path, out: Path) -> tuple[int, int]:
    """Write the kept members of ``wheel`` to ``out`` (tar.xz); (members kept, bytes unpacked)."""
    kept = size = 0
    with zipfile.ZipFile(wheel) as z, lzma.open(out, "wb", preset=9 | lzma.PRESET_EXTREME) as xz, \
            tarfile.open(fileobj=xz, mode="w") as tar:
        for info in z.infolist():
            if info.is_dir() or not keep(info.filename):
                continue
            blob = z.read(info)
            member = tarfile.TarInfo(info.filename)
            member.size, member.mode, member.mtime = len(blob), 0o644, 0
            tar.addfile(member, io.BytesIO(blob))
            kept, size = kept + 1, size + len(blob)
    return kept, size


def download(specs: list[str], dest: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    *DEVICE_PLATFORM, "-d", str(dest), *specs], check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wheel", type=Path, help=f"flashinfer_python-{VERSION} wheel (default: downloaded)")
    ap.add_argument("--out", type=Path, default=REPO / ".fi", help="output folder (default .fi/)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    wheel = args.wheel
    if wheel is None:
        cache = REPO / "build" / "flashinfer-wheel"  # git-ignored and not carried
        cache.mkdir(parents=True, exist_ok=True)
        download([f"flashinfer-python=={VERSION}"], cache)
        wheel = next(cache.glob(f"flashinfer_python-{VERSION}-*.whl"))
    for old in [*args.out.glob("*.whl"), *args.out.glob("flashinfer-*-trim.tar.xz")]:  # a re-pack replaces them
        old.unlink()
    download(list(DEPS), args.out)
    target = args.out / f"flashinfer-{VERSION}-trim.tar.xz"
    kept, size = pack(wheel, target)
    # everything under .fi/ travels, the modules brought back into .fi/aot/ too
    carried = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"{target}: {kept} files, {size / 1e6:.1f} MB unpacked, {target.stat().st_size / 1e6:.1f} MB packed; "
          f"{carried / 1e6:.1f} MB in {args.out} to carry")
    if carried > LIMIT_MB * 1e6:
        print(f"over {LIMIT_MB} MB: the device call would exceed the 64 MiB carry", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
