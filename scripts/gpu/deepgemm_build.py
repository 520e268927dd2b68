"""On the device: build DeepGEMM's C++ extension (``deep_gemm._C``) against the installed torch, from the
sources ``scripts/gpu/pack_deepgemm.py`` packed, into the package folder ``scripts/gpu/deepgemm_device.sh``
put on ``sys.path``; then import it and report what its JIT will use.

The extension is host code only (pybind11 bindings, the JIT's compiler drivers, the kernels' launch
heuristics): one translation unit, ``csrc/python_api.cpp``, compiled with the host C++ compiler (C++20,
DeepGEMM's own flags) and linked against torch, libcudart and libnvrtc. Missing prerequisites are named
before anything is compiled: the compiler, ``Python.h``, the CUDA headers and libraries.

    usage (after scripts/gpu/deepgemm_device.sh unpacked the sources):
        python3 scripts/gpu/deepgemm_build.py --src /tmp/dg-src --package /tmp/site/deep_gemm [--export DIR]

``--export DIR`` copies the built library there (to carry back into ``.dg/`` so that the next machine,
with the same torch and Python, skips the build: deepgemm_device.sh uses ``.dg/_C*.so`` when present).
Exit 0 when ``import deep_gemm`` works, 1 when the build or the import fails (the compiler's last lines
are printed), 2 on a missing prerequisite or bad arguments.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path


def prerequisites(cuda_home: Path) -> list[str]:
    """What the build needs and this machine lacks, one sentence each."""
    missing = []
    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx) is None:
        missing.append(f"no C++ compiler ({cxx}; set CXX)")
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        missing.append(f"no Python.h under {sysconfig.get_paths()['include']} (the Python development headers)")
    for rel in ("include/cuda_runtime.h", "include/nvrtc.h"):
        if not (cuda_home / rel).is_file():
            missing.append(f"no {cuda_home / rel}")
    if not any((cuda_home / "lib64").glob("libnvrtc.so*")):
        missing.append(f"no libnvrtc under {cuda_home / 'lib64'}")
    return missing


def build_command(src: Path, package: Path, cuda_home: Path) -> list[str]:
    import torch
    from torch.utils import cpp_extension

    abi = int(torch.compiled_with_cxx11_abi())
    incs = [*cpp_extension.include_paths(device_type="cuda"), sysconfig.get_paths()["include"], str(cuda_home / "include"),
            str(cuda_home / "include" / "cccl"), str(package / "include"), str(src / "fmt" / "include")]
    libdirs = [*cpp_extension.library_paths(device_type="cuda"), str(cuda_home / "lib64")]
    target = package / f"_C{sysconfig.get_config_var('EXT_SUFFIX')}"
    return [os.environ.get("CXX", "c++"), "-std=c++20", "-O3", "-fPIC", "-shared", "-Wno-psabi", "-Wno-deprecated-declarations",
            f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-DTORCH_EXTENSION_NAME=_C", "-DTORCH_API_INCLUDE_EXTENSION_H",
            *(f"-I{p}" for p in incs), str(src / "csrc" / "python_api.cpp"), "-o", str(target),
            *(f"-L{p}" for p in libdirs), *(f"-Wl,-rpath,{p}" for p in libdirs),
            "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python", "-lc10_cuda", "-ltorch_cuda", "-lcudart", "-lnvrtc"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", type=Path, required=True, help="the unpacked sources (csrc/, fmt/include/)")
    ap.add_argument("--package", type=Path, required=True, help="the deep_gemm package folder on sys.path")
    ap.add_argument("--export", type=Path, help="copy the built library here as well")
    args = ap.parse_args(argv)
    cuda_home = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    if not (args.src / "csrc" / "python_api.cpp").is_file() or not (args.package / "__init__.py").is_file():
        print(f"deepgemm_build.py: {args.src}/csrc/python_api.cpp or {args.package}/__init__.py missing "
              "(unpack with scripts/gpu/deepgemm_device.sh first)", file=sys.stderr)
        return 2
    missing = prerequisites(cuda_home)
    if missing:
        print("deepgemm_build.py: cannot build here: " + "; ".join(missing), file=sys.stderr)
        return 2
    built = list(args.package.glob("_C*.so"))
    if not built:
        cmd = build_command(args.src, args.package, cuda_home)
        t0 = time.monotonic()
        r = subprocess.run(cmd, capture_output=True, text=True)
        print(f"build: rc {r.returncode} in {time.monotonic() - t0:.0f} s ({cmd[0]}: "
              f"{subprocess.run([cmd[0], '--version'], capture_output=True, text=True).stdout.splitlines()[0]})", flush=True)
        if r.returncode != 0:
            print("\n".join((r.stdout + r.stderr).splitlines()[-40:]), file=sys.stderr)
            return 1
        built = list(args.package.glob("_C*.so"))
    else:
        print(f"build: using {built[0]} (carried)", flush=True)
    if args.export:
        args.export.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[0], args.export / built[0].name)
    r = subprocess.run([sys.executable, "-c", "import deep_gemm, torch; print('deep_gemm', deep_gemm.__version__, 'sms', "
                        "deep_gemm.get_num_sms(), 'torch', torch.__version__)"], capture_output=True, text=True,
                       cwd="/", env={**os.environ, "PYTHONPATH": f"{args.package.parent}:{os.environ.get('PYTHONPATH', '')}"})
    print((r.stdout + r.stderr).strip()[-3000:])
    return 0 if r.returncode == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
