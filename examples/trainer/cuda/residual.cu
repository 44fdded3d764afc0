// The residual add: one thread per element, grid-stride.
#include "residual.hpp"

#include <cuda_bf16.h>

#include "kernel_support.cuh"

namespace trainer::cuda {

namespace {
// out, a, b: [count]; b floats or BF16 (widened exactly). Each element is read before it is written
// by the same thread, so aliasing is safe.
template <class B>
__global__ void residual_kernel(float* out, const float* a, const B* b, std::size_t count, storage stored) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    out[i] = detail::store_value(stored, a[i] + detail::load_element(b, i));
  }
}

template <class B>
void launch(const char* function, float* out, const float* a, const B* b, std::size_t count, storage stored,
            cudaStream_t stream) {
  detail::check_pointer(out, count, function, "out");
  detail::check_pointer(a, count, function, "a");
  detail::check_pointer(b, count, function, "b");
  if (count == 0) return;
  residual_kernel<<<detail::grid_for(count), detail::block_threads, 0, stream>>>(out, a, b, count, stored);
  detail::check_launch("residual_kernel");
}
}  // namespace

void residual_forward(float* out, const float* a, const float* b, std::size_t count, storage stored,
                      cudaStream_t stream) {
  launch("trainer::cuda::residual_forward", out, a, b, count, stored, stream);
}

void residual_forward(float* out, const float* a, const std::uint16_t* b, std::size_t count, storage stored,
                      cudaStream_t stream) {
  launch("trainer::cuda::residual_forward (BF16 b)", out, a, reinterpret_cast<const __nv_bfloat16*>(b), count,
         stored, stream);
}

}  // namespace trainer::cuda
