# Source after scripts/gpu/setup_device.sh, with .fi/ carried (scripts/gpu/pack_flashinfer.py made it):
# unpacks the trimmed FlashInfer into /tmp/site beside kbot's wheels, installs its small dependencies
# (apache-tvm-ffi, ninja, ...), and points its JIT at the H200 (sm_90a). The JIT cache stays under $HOME: FlashInfer opens a log file there
# on import, and a sandboxed worker's $HOME is its writable scratch.
# Then `python3 scripts/gpu/flashinfer_warm.py` builds the modules the baselines use, outside the
# sandbox, and installs them as FlashInfer's AOT modules so sandboxed workers only load them.
(return 0 2>/dev/null) || { echo "flashinfer_device.sh sets up this shell: source it, do not run it" >&2; exit 2; }
FI_TAR=.fi/flashinfer-0.7.4-trim.tar.xz  # the version the baselines pin (scripts/gpu/pack_flashinfer.py VERSION)
[ -f "$FI_TAR" ] || { echo "no $FI_TAR: run scripts/gpu/pack_flashinfer.py here and carry .fi" >&2; return 1; }
tar -xJf "$FI_TAR" -C /tmp/site || return 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .fi/*.whl || return 1
# modules built on an earlier machine (flashinfer_warm.py --export, brought back into .fi/aot/): FlashInfer
# loads <package>/data/aot/<name>/<name>.so before it considers building
for so in .fi/aot/*.so; do
  [ -f "$so" ] || continue
  name=$(basename "$so" .so)
  mkdir -p "/tmp/site/flashinfer/data/aot/$name" && cp "$so" "/tmp/site/flashinfer/data/aot/$name/"
done
export PATH=/tmp/site/bin:$PATH FLASHINFER_CUDA_ARCH_LIST="9.0a"
# nvcc for the JIT (the image keeps the toolkit in /usr/local/cuda)
command -v nvcc >/dev/null || export PATH=$PATH:/usr/local/cuda/bin
