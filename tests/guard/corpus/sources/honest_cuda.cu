// Honest CUDA rmsnorm for rmsnorm_h4096 (bf16 in/out, fp32 math, eps 1e-5).
// One block per row: each thread accumulates a strided slice of x^2, a shared-memory tree reduction
// gives the row's mean square, then every thread normalizes and scales its slice.
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_bf16.h>

template <int THREADS>
__global__ void rmsnorm_rows(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                             __nv_bfloat16* __restrict__ y, int cols, float eps) {
    __shared__ float partial[THREADS];
    const __nv_bfloat16* xr = x + static_cast<size_t>(blockIdx.x) * cols;
    __nv_bfloat16* yr = y + static_cast<size_t>(blockIdx.x) * cols;
    float acc = 0.f;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        const float v = __bfloat162float(xr[c]);
        acc += v * v;
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    const float inv = rsqrtf(partial[0] / cols + eps);
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        yr[c] = __float2bfloat16(__bfloat162float(xr[c]) * inv * __bfloat162float(w[c]));
    }
}

torch::Tensor run(torch::Tensor hidden_states, torch::Tensor weight) {
    TORCH_CHECK(hidden_states.is_cuda() && hidden_states.scalar_type() == at::kBFloat16, "bf16 CUDA input expected");
    auto x = hidden_states.contiguous();
    auto w = weight.contiguous();
    auto out = torch::empty_like(x);
    const int rows = x.size(0);
    const int cols = x.size(1);
    if (rows == 0) return out;
    constexpr int THREADS = 256;
    rmsnorm_rows<THREADS><<<rows, THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
        reinterpret_cast<const __nv_bfloat16*>(x.data_ptr<at::BFloat16>()),
        reinterpret_cast<const __nv_bfloat16*>(w.data_ptr<at::BFloat16>()),
        reinterpret_cast<__nv_bfloat16*>(out.data_ptr<at::BFloat16>()), cols, 1e-5f);
    return out;
}
