# Source after scripts/gpu/setup_device.sh, with .dg/ carried (scripts/gpu/pack_deepgemm.py made it):
# unpacks DeepGEMM's pinned sources, puts the `deep_gemm` package into /tmp/site beside kbot's wheels (on
# every worker's sys.path, the sandboxed ones too), and builds its C++ extension against the installed torch
# (scripts/gpu/deepgemm_build.py; a library carried back in .dg/ from an earlier machine is used instead).
# The kernels themselves are compiled by DeepGEMM's JIT at first use (nvcc, or NVRTC in-process with
# DG_JIT_USE_NVRTC=1) into $DG_JIT_CACHE_DIR.
(return 0 2>/dev/null) || { echo "deepgemm_device.sh sets up this shell: source it, do not run it" >&2; exit 2; }
DG_TAR=$(ls .dg/deepgemm-*.tar.xz 2>/dev/null | head -n 1)
[ -n "$DG_TAR" ] || { echo "no .dg/deepgemm-*.tar.xz: run scripts/gpu/pack_deepgemm.py here and carry .dg" >&2; return 1; }
rm -rf /tmp/dg-src /tmp/site/deep_gemm && mkdir -p /tmp/dg-src && tar -xJf "$DG_TAR" -C /tmp/dg-src || return 1
cp -r /tmp/dg-src/deep_gemm /tmp/site/deep_gemm || return 1
# the distribution's metadata, as DeepGEMM's setup.py names and versions it: baselines pin `deep_gemm==2.6.1`
dg_ver="$(sed -n "s/^__version__ = '\(.*\)'/\1/p" /tmp/site/deep_gemm/__init__.py)+$(sed -n 's/^deepgemm \(.\{12\}\).*/\1/p' /tmp/dg-src/PINS)"
rm -rf /tmp/site/deep_gemm-*.dist-info && mkdir -p "/tmp/site/deep_gemm-$dg_ver.dist-info" &&
  printf 'Metadata-Version: 2.1\nName: deep_gemm\nVersion: %s\n' "$dg_ver" > "/tmp/site/deep_gemm-$dg_ver.dist-info/METADATA"
for so in .dg/_C*.so; do [ -f "$so" ] && cp "$so" /tmp/site/deep_gemm/; done
command -v nvcc >/dev/null || export PATH=$PATH:/usr/local/cuda/bin
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" DG_JIT_CACHE_DIR="${DG_JIT_CACHE_DIR:-/tmp/dg-jit}"
python3 scripts/gpu/deepgemm_build.py --src /tmp/dg-src --package /tmp/site/deep_gemm ${DG_EXPORT:+--export "$DG_EXPORT"}
