// SwiGLU: one thread per (token, hidden unit), grid-stride; the formulas in the CPU layer's order.
// One kernel per pass, templated over the buffers' element type: floats (any run) or BF16 (the
// MLP half of bf16 and fp8 runs). The arithmetic is in float either way, so both forms give the
// same values.
#include "swiglu.hpp"

#include <cuda_bf16.h>

#include <cstddef>
#include <string>

#include "kernel_support.cuh"

namespace trainer::cuda {

namespace {

// expf is the accurate exponential (the build does not use --use_fast_math).
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// out: [N, F]; inp: [N, 2F].
template <class T>
__global__ void swiglu_forward_kernel(T* out, const T* inp, int n, int f, storage out_storage) {
  const std::size_t count = std::size_t(n) * std::size_t(f);
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const std::size_t row = i / std::size_t(f), j = i % std::size_t(f);
    const std::size_t at = row * 2 * std::size_t(f) + j;
    const float g = detail::load_element(inp, at), up = detail::load_element(inp, at + std::size_t(f));
    detail::store_element(out, i, g * sigmoid(g) * up, out_storage);
  }
}

// dinp: [N, 2F]; dout: [N, F]; inp: [N, 2F].
template <class T>
__global__ void swiglu_backward_kernel(T* dinp, const T* dout, const T* inp, int n, int f,
                                       storage dinp_storage) {
  const std::size_t count = std::size_t(n) * std::size_t(f);
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const std::size_t row = i / std::size_t(f), j = i % std::size_t(f);
    const std::size_t at = row * 2 * std::size_t(f) + j;
    const float g = detail::load_element(inp, at), up = detail::load_element(inp, at + std::size_t(f));
    const float dy = detail::load_element(dout, i);
    const float s = sigmoid(g);
    detail::store_element(dinp, at, dy * up * s * (1.0f + g * (1.0f - s)), dinp_storage);
    detail::store_element(dinp, at + std::size_t(f), dy * g * s, dinp_storage);
  }
}

// wide: the [N, 2F] buffers (inp, and dinp in the backward pass); narrow: the [N, F] buffer.
void check(const char* function, const void* wide, const void* other_wide, const void* narrow, int n, int f) {
  detail::require(n >= 0 && f >= 0, function,
                  "needs n >= 0 and f >= 0 (got n " + std::to_string(n) + ", f " + std::to_string(f) + ")");
  const std::size_t count = std::size_t(n) * std::size_t(f);
  detail::check_pointer(wide, 2 * count, function, "inp");
  detail::check_pointer(other_wide, 2 * count, function, "the [N, 2F] buffer");
  detail::check_pointer(narrow, count, function, "the [N, F] buffer");
}

template <class T>
void launch_forward(const char* function, T* out, const T* inp, int n, int f, storage out_storage,
                    cudaStream_t stream) {
  check(function, inp, inp, out, n, f);
  const std::size_t count = std::size_t(n) * std::size_t(f);
  if (count == 0) return;
  swiglu_forward_kernel<<<detail::grid_for(count), detail::block_threads, 0, stream>>>(out, inp, n, f,
                                                                                       out_storage);
  detail::check_launch("swiglu_forward_kernel");
}

template <class T>
void launch_backward(const char* function, T* dinp, const T* dout, const T* inp, int n, int f,
                     storage dinp_storage, cudaStream_t stream) {
  check(function, inp, dinp, dout, n, f);
  const std::size_t count = std::size_t(n) * std::size_t(f);
  if (count == 0) return;
  swiglu_backward_kernel<<<detail::grid_for(count), detail::block_threads, 0, stream>>>(dinp, dout, inp, n, f,
                                                                                        dinp_storage);
  detail::check_launch("swiglu_backward_kernel");
}

const __nv_bfloat16* as_bf16(const std::uint16_t* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }
__nv_bfloat16* as_bf16(std::uint16_t* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

}  // namespace

void swiglu_forward(float* out, const float* inp, int n, int f, storage out_storage, cudaStream_t stream) {
  launch_forward("trainer::cuda::swiglu_forward", out, inp, n, f, out_storage, stream);
}

void swiglu_backward(float* dinp, const float* dout, const float* inp, int n, int f, storage dinp_storage,
                     cudaStream_t stream) {
  launch_backward("trainer::cuda::swiglu_backward", dinp, dout, inp, n, f, dinp_storage, stream);
}

void swiglu_forward(std::uint16_t* out, const std::uint16_t* inp, int n, int f, cudaStream_t stream) {
  launch_forward("trainer::cuda::swiglu_forward (BF16)", as_bf16(out), as_bf16(inp), n, f, storage::bf16,
                 stream);
}

void swiglu_backward(std::uint16_t* dinp, const std::uint16_t* dout, const std::uint16_t* inp, int n, int f,
                     cudaStream_t stream) {
  launch_backward("trainer::cuda::swiglu_backward (BF16)", as_bf16(dinp), as_bf16(dout), as_bf16(inp), n, f,
                  storage::bf16, stream);
}

}  // namespace trainer::cuda
