// GELU: one thread per element, grid-stride; the CPU layer's formulas in its order.
#include "gelu.hpp"

#include "../gelu.hpp"
#include "kernel_support.cuh"

namespace trainer::cuda {

namespace {

// tanhf is the accurate one (the build does not use --use_fast_math): within 2 ulp of the host's.
__global__ void gelu_forward_kernel(float* out, const float* inp, std::size_t count, storage out_storage) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float x = inp[i];
    const float u = gelu_sqrt_2_over_pi * (x + gelu_cubic_coefficient * x * x * x);
    out[i] = detail::store_value(out_storage, 0.5f * x * (1.0f + tanhf(u)));
  }
}

__global__ void gelu_backward_kernel(float* dinp, const float* dout, const float* inp, std::size_t count,
                                     storage dinp_storage) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float x = inp[i];
    const float u = gelu_sqrt_2_over_pi * (x + gelu_cubic_coefficient * x * x * x);
    const float th = tanhf(u);
    const float du_dx = gelu_sqrt_2_over_pi * (1.0f + 3.0f * gelu_cubic_coefficient * x * x);
    dinp[i] = detail::store_value(dinp_storage,
                                  dout[i] * (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du_dx));
  }
}

}  // namespace

void gelu_forward(float* out, const float* inp, std::size_t count, storage out_storage, cudaStream_t stream) {
  detail::check_pointer(out, count, "trainer::cuda::gelu_forward", "out");
  detail::check_pointer(inp, count, "trainer::cuda::gelu_forward", "inp");
  if (count == 0) return;
  gelu_forward_kernel<<<detail::grid_for(count), detail::block_threads, 0, stream>>>(out, inp, count,
                                                                                     out_storage);
  detail::check_launch("gelu_forward_kernel");
}

void gelu_backward(float* dinp, const float* dout, const float* inp, std::size_t count, storage dinp_storage,
                   cudaStream_t stream) {
  detail::check_pointer(dinp, count, "trainer::cuda::gelu_backward", "dinp");
  detail::check_pointer(dout, count, "trainer::cuda::gelu_backward", "dout");
  detail::check_pointer(inp, count, "trainer::cuda::gelu_backward", "inp");
  if (count == 0) return;
  gelu_backward_kernel<<<detail::grid_for(count), detail::block_threads, 0, stream>>>(dinp, dout, inp, count,
                                                                                      dinp_storage);
  detail::check_launch("gelu_backward_kernel");
}

}  // namespace trainer::cuda
