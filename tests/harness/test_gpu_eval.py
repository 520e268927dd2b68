"""On a GPU (run on the device with `pytest -m gpu`): the shipped kernel passes, times are sane, the
roofline is filled in, and a CUDA solution builds through torch's extension loader."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SMALL = "definitions/rmsnorm_h4096/workloads.small.jsonl"
pytestmark = pytest.mark.gpu


def kbot_eval(solution, out, *extra, **run):
    """``kbot eval SOLUTION -d rmsnorm_h4096 --device cuda --out OUT ...`` as a separate process."""
    cmd = [sys.executable, "-m", "harness.cli", "eval", str(solution), "-d", "rmsnorm_h4096", "--device", "cuda",
           "--out", str(out), *extra]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, **run)


def test_shipped_rmsnorm_passes_near_bandwidth(tmp_path):
    out = tmp_path / "run"
    r = kbot_eval("kernels/rmsnorm_h4096/triton_rows/solution.json", out, "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    rep = json.loads((out / "report.json").read_text())
    assert rep["device"]["timer"] == "cuda_events"
    biggest = max(rep["workloads"], key=lambda w: w["axes"]["batch_size"])
    assert biggest["roofline"]["fraction"] > 0.8, biggest["roofline"]
    assert all(w["latency_ms"]["median"] > 0.001 for w in rep["workloads"])  # no kernel is faster than 1 µs
    for w in rep["workloads"]:  # the CUPTI kernel time: complete, inside the event time, short of it by about the launch floor
        kt = w["kernel_time"]
        assert kt["withheld"] == "" and kt["latency_ms"] and kt["reference_latency_ms"], kt
        gap = w["latency_ms"]["median"] - kt["latency_ms"]["median"]
        assert 0 < kt["latency_ms"]["median"] and 0 <= gap < 0.010, (w["axes"], w["latency_ms"]["median"], kt["latency_ms"]["median"])


CUDA_SOLUTION = {
    "name": "rmsnorm_cuda_simple", "definition": "rmsnorm_h4096", "author": "test",
    "spec": {"language": "cuda", "target_hardware": ["NVIDIA_H200"], "entry_point": "rms.cu::run", "destination_passing_style": True},
    "sources": [{"path": "rms.cu", "content": r'''
#include <torch/extension.h>
#include <cuda_bf16.h>

__global__ void rms_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, int hidden) {
  int row = blockIdx.x;
  __shared__ float partial[256];
  float acc = 0.f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) { float v = __bfloat162float(x[(long)row * hidden + i]); acc += v * v; }
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) { if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s]; __syncthreads(); }
  float inv = rsqrtf(partial[0] / hidden + 1e-5f);
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = __bfloat162float(x[(long)row * hidden + i]);
    y[(long)row * hidden + i] = __float2bfloat16(v * inv * __bfloat162float(w[i]));
  }
}

void run(torch::Tensor hidden_states, torch::Tensor weight, torch::Tensor output) {
  int rows = hidden_states.size(0), hidden = hidden_states.size(1);
  if (rows == 0) return;
  rms_kernel<<<rows, 256>>>((const __nv_bfloat16*)hidden_states.data_ptr(), (const __nv_bfloat16*)weight.data_ptr(), (__nv_bfloat16*)output.data_ptr(), hidden);
}
'''}],
}


def test_cuda_solution_builds_and_passes(tmp_path):
    sol = tmp_path / "cuda.json"
    sol.write_text(json.dumps(CUDA_SOLUTION))
    out = tmp_path / "run"
    r = kbot_eval(sol, out, "-w", SMALL, "--json", timeout=900)
    rep = json.loads((out / "report.json").read_text())
    assert r.returncode == 0, [(w["status"], w["message"]) for w in rep["workloads"]] + [r.stderr[-2000:]]
    assert rep["build"]["ok"] and rep["build"]["language"] == "cuda"


def test_cuda_compile_error_is_structured(tmp_path):
    bad = json.loads(json.dumps(CUDA_SOLUTION))
    bad["sources"][0]["content"] = bad["sources"][0]["content"].replace("float inv =", "float inv = undefined_symbol +")
    sol = tmp_path / "bad.json"
    sol.write_text(json.dumps(bad))
    out = tmp_path / "run"
    kbot_eval(sol, out, "-w", SMALL, timeout=900)
    rep = json.loads((out / "report.json").read_text())
    assert {w["status"] for w in rep["workloads"]} == {"COMPILE_ERROR"}
    errs = rep["build"]["errors"]
    assert any("undefined_symbol" in e["message"] and e.get("line") for e in errs), errs
