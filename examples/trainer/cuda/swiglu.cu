// SwiGLU: one thread per (token, hidden unit), grid-stride; the formulas in the CPU layer's order.
#include "swiglu.hpp"

#include <cstddef>
#include <string>

#include "kernel_support.cuh"

namespace trainer::cuda {

namespace {

// expf is the accurate exponential (the build does not use --use_fast_math).
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// out: [N, F]; inp: [N, 2F].
__global__ void swiglu_forward_kernel(float* out, const float* inp, int n, int f, storage out_storage) {
  const std::size_t count = std::size_t(n) * std::size_t(f);
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const std::size_t row = i / std::size_t(f), j = i % std::size_t(f);
    const float* gate = inp + row * 2 * std::size_t(f);
    const float g = gate[j], up = gate[std::size_t(f) + j];
    out[i] = detail::store_value(out_storage, g * sigmoid(g) * up);
  }
}

// dinp: [N, 2F]; dout: [N, F]; inp: [N, 2F].
__global__ void swiglu_backward_kernel(float* dinp, const float* dout, const float* inp, int n, int f,
                                       storage dinp_storage) {
  const std::size_t count = std::size_t(n) * std::size_t(f);
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const std::size_t row = i / std::size_t(f), j = i % std::size_t(f);
    const std::size_t at = row * 2 * std::size_t(f) + j;
    const float g = inp[at], up = inp[at + std::size_t(f)], dy = dout[i];
    const float s = sigmoid(g);
    dinp[at] = detail::store_value(dinp_storage, dy * up * s * (1.0f + g * (1.0f - s)));
    dinp[at + std::size_t(f)] = detail::store_value(dinp_storage, dy * g * s);
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

}  // namespace

void swiglu_forward(float* out, const float* inp, int n, int f, storage out_storage, cudaStream_t stream) {
  check("trainer::cuda::swiglu_forward", inp, inp, out, n, f);
  const std::size_t count = std::size_t(n) * std::size_t(f);
  if (count == 0) return;
  swiglu_forward_kernel<<<detail::grid_for(count), detail::block_threads, 0, stream>>>(out, inp, n, f,
                                                                                       out_storage);
  detail::check_launch("swiglu_forward_kernel");
}

void swiglu_backward(float* dinp, const float* dout, const float* inp, int n, int f, storage dinp_storage,
                     cudaStream_t stream) {
  check("trainer::cuda::swiglu_backward", inp, dinp, dout, n, f);
  const std::size_t count = std::size_t(n) * std::size_t(f);
  if (count == 0) return;
  swiglu_backward_kernel<<<detail::grid_for(count), detail::block_threads, 0, stream>>>(dinp, dout, inp, n, f,
                                                                                        dinp_storage);
  detail::check_launch("swiglu_backward_kernel");
}

}  // namespace trainer::cuda
