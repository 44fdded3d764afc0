// The parts of a training step that are the caller's own, not the library's: the data (a reproducible
// normal batch), the activation (ReLU), the loss (mean squared error against a target) and the
// optimizer (AdamW with FP32 master weights and a BF16 compute copy). Small, plain kernels: the
// example is about how they sit around fp8::cuda::linear_layer, not about their speed.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include <fp8/cuda/error.hpp>

namespace linear_step {

inline constexpr int threads = 256;

inline unsigned blocks_for(std::size_t n) {
  const std::size_t blocks = (n + threads - 1) / threads;
  return unsigned(blocks < 4096 ? (blocks == 0 ? 1 : blocks) : 4096);  // grid-stride loops do the rest
}

__device__ inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A standard normal value that depends only on (seed, i): Box-Muller over two 24-bit uniforms.
__device__ inline float normal(std::uint64_t seed, std::uint64_t i) {
  const std::uint64_t r = splitmix64(splitmix64(seed) ^ i);
  const float u1 = (float(r >> 40) + 0.5f) * 0x1p-24f;  // in (0, 1): the logarithm stays finite
  const float u2 = float((r >> 16) & 0xFFFFFFu) * 0x1p-24f;
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

// w16[n] = BF16(stddev * normal), and master[n] the FP32 value where master is not null.
__global__ void normal_kernel(float* master, __nv_bfloat16* w16, std::size_t n, std::uint64_t seed,
                              float stddev) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const float value = stddev * normal(seed, i);
    if (master != nullptr) master[i] = value;
    w16[i] = __float2bfloat16(value);
  }
}

inline void fill_normal(float* master, __nv_bfloat16* w16, std::size_t n, std::uint64_t seed, float stddev,
                        cudaStream_t stream) {
  normal_kernel<<<blocks_for(n), threads, 0, stream>>>(master, w16, n, seed, stddev);
  FP8_CUDA_CHECK(cudaGetLastError());
}

__global__ void relu_forward_kernel(const __nv_bfloat16* h, __nv_bfloat16* a, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    a[i] = __hgt(h[i], __float2bfloat16(0.0f)) ? h[i] : __float2bfloat16(0.0f);
  }
}

// a = max(h, 0).
inline void relu_forward(const __nv_bfloat16* h, __nv_bfloat16* a, std::size_t n, cudaStream_t stream) {
  relu_forward_kernel<<<blocks_for(n), threads, 0, stream>>>(h, a, n);
  FP8_CUDA_CHECK(cudaGetLastError());
}

__global__ void relu_backward_kernel(const __nv_bfloat16* d_a, const __nv_bfloat16* h, __nv_bfloat16* d_h,
                                     std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    d_h[i] = __hgt(h[i], __float2bfloat16(0.0f)) ? d_a[i] : __float2bfloat16(0.0f);
  }
}

// d_h = d_a where h > 0, else 0.
inline void relu_backward(const __nv_bfloat16* d_a, const __nv_bfloat16* h, __nv_bfloat16* d_h, std::size_t n,
                          cudaStream_t stream) {
  relu_backward_kernel<<<blocks_for(n), threads, 0, stream>>>(d_a, h, d_h, n);
  FP8_CUDA_CHECK(cudaGetLastError());
}

// One block: d_out = (2 / n) * weight * (out - target), and *loss += weight * mean((out - target)^2),
// summed in a fixed order (reproducible).
__global__ void mse_kernel(const __nv_bfloat16* out, const __nv_bfloat16* target, __nv_bfloat16* d_out,
                           std::size_t n, float weight, float* loss) {
  __shared__ float partial[threads];
  float sum = 0.0f;
  for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float d = __bfloat162float(out[i]) - __bfloat162float(target[i]);
    d_out[i] = __float2bfloat16(2.0f * weight * d / float(n));
    sum += d * d;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = threads / 2; half > 0; half /= 2) {
    if (int(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss += weight * partial[0] / float(n);
}

// The mean squared error of out against target, weighted (1 / micro-batches: the step's loss is their
// mean), added to *loss; its gradient into d_out.
inline void mse_loss_backward(const __nv_bfloat16* out, const __nv_bfloat16* target, __nv_bfloat16* d_out,
                              std::size_t n, float weight, float* loss, cudaStream_t stream) {
  mse_kernel<<<1, threads, 0, stream>>>(out, target, d_out, n, weight, loss);
  FP8_CUDA_CHECK(cudaGetLastError());
}

struct adamw_step {
  float lr = 2e-3f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  float correction1 = 1.0f, correction2 = 1.0f;  // 1 - beta^t of this step
};

__global__ void adamw_kernel(float* master, float* m, float* v, const float* grad, __nv_bfloat16* w16,
                             std::size_t n, adamw_step s) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const float g = grad[i];
    m[i] = s.beta1 * m[i] + (1.0f - s.beta1) * g;
    v[i] = s.beta2 * v[i] + (1.0f - s.beta2) * g * g;
    const float update = (m[i] / s.correction1) / (sqrtf(v[i] / s.correction2) + s.eps);
    master[i] -= s.lr * (update + s.weight_decay * master[i]);
    w16[i] = __float2bfloat16(master[i]);
  }
}

// One parameter tensor's optimizer state: FP32 master weights and moments, and the BF16 copy the
// layer reads.
struct adamw_tensor {
  float* master;
  float* m;
  float* v;
  __nv_bfloat16* w16;
  std::size_t n;
};

// AdamW at step `step` (1-based): master weights, moments and the BF16 copy from the FP32 gradient.
inline void adamw(const adamw_tensor& t, const float* grad, int step, adamw_step s, cudaStream_t stream) {
  s.correction1 = 1.0f - std::pow(s.beta1, float(step));
  s.correction2 = 1.0f - std::pow(s.beta2, float(step));
  adamw_kernel<<<blocks_for(t.n), threads, 0, stream>>>(t.master, t.m, t.v, grad, t.w16, t.n, s);
  FP8_CUDA_CHECK(cudaGetLastError());
}

}  // namespace linear_step
