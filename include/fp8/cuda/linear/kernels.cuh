// The small kernels of the FP8 linear layer beside the casts and products: recording an amax into
// the scaling state's slots, and the bias gradient (a column sum of dY, or the BGRADB epilogue's
// output added to the caller's FP32 dbias).
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/linear/kernels.cuh contains device code: compile it with nvcc"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../amax.cuh"
#include "../element.cuh"
#include "../launch.cuh"

namespace fp8::cuda::detail {

// *to0 = max(*to0, *from) and the same for *to1 when set: the amax of one cast recorded into the
// history slots of the operands it feeds (NaN-dominant, as the casts themselves record).
// The kernels here are templates so that every translation unit that includes this header shares
// one definition (a plain __global__ function in a header is defined again by each, and the link fails).
template <int Threads>
__global__ void __launch_bounds__(Threads) record_amax_kernel(const float* from, float* to0, float* to1) {
  const std::uint32_t bits = amax_bits(*from);
  atomic_max_amax(to0, bits);
  if (to1 != nullptr) atomic_max_amax(to1, bits);
}

inline void record_amax(const float* from, float* to0, float* to1, cudaStream_t stream) {
  record_amax_kernel<1><<<1, 1, 0, stream>>>(from, to0, to1);
  check_launch("fp8::cuda::detail::record_amax_kernel");
}

// dbias[j] (+)= sum over rows of dy[i][j] (dy rows x cols, row-major), in FP32. One thread per
// column: neighbouring threads read neighbouring elements of a row, so every load is coalesced.
template <int Threads>
__global__ void __launch_bounds__(Threads)
    column_sum_kernel(const __nv_bfloat16* dy, std::size_t rows, std::size_t cols, bool accumulate,
                      float* dbias) {
  for (std::size_t j = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; j < cols;
       j += std::size_t(gridDim.x) * blockDim.x) {
    float sum = 0.0f;
    for (std::size_t i = 0; i < rows; ++i) sum += widen(dy[i * cols + j]);
    dbias[j] = accumulate ? dbias[j] + sum : sum;
  }
}

inline void column_sum(const __nv_bfloat16* dy, std::size_t rows, std::size_t cols, bool accumulate,
                       float* dbias, cudaStream_t stream) {
  column_sum_kernel<block_threads>
      <<<grid_for(cols), block_threads, 0, stream>>>(dy, rows, cols, accumulate, dbias);
  check_launch("fp8::cuda::detail::column_sum_kernel");
}

// to[i] (+)= from[i]: the BGRADB epilogue writes (it cannot accumulate), the caller's dbias sums.
template <class T>
__global__ void add_vector_kernel(const T* from, std::size_t count, bool accumulate, float* to) {
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const float value = widen(from[i]);
    to[i] = accumulate ? to[i] + value : value;
  }
}

template <class T>
void add_vector(const T* from, std::size_t count, bool accumulate, float* to, cudaStream_t stream) {
  add_vector_kernel<T><<<grid_for(count), block_threads, 0, stream>>>(from, count, accumulate, to);
  check_launch("fp8::cuda::detail::add_vector_kernel");
}

}  // namespace fp8::cuda::detail
