// The small kernels of the FP8 linear layer beside the casts and products: recording an amax into
// the scaling state's slots, the bias gradient (a column sum of dY, or the BGRADB epilogue's output
// added to the caller's FP32 dbias), and the statistics of a cast (saturated and flushed counts).
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/linear/kernels.cuh contains device code: compile it with nvcc"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../../scaling/granularity.hpp"
#include "../amax.cuh"
#include "../element.cuh"
#include "../launch.cuh"
#include "statistics.hpp"

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

// dbias[j] (+)= sum over rows of dy[i][j] (dy rows x cols, row-major), in FP32, in two passes so that
// every SM has work whatever the shape (one thread per column alone leaves most of a GPU idle: 4096
// columns are 16 blocks): partial sums over chunks of column_sum_rows rows, then each column's
// partials added in chunk order. Deterministic: no atomics, the same order on every run.
inline constexpr std::size_t column_sum_rows = 64;

// Floats of the partials buffer for a rows x cols dY.
inline std::size_t column_sum_workspace(std::size_t rows, std::size_t cols) noexcept {
  return fp8::detail::ceil_div(rows, column_sum_rows) * cols;
}

// partials[p][j] = sum of dy[i][j] over rows i of chunk p, in order. Grid: x over columns (one
// thread each: neighbouring threads read neighbouring elements of a row, so every load is
// coalesced), y over chunks; both grid-stride.
template <int Threads>
__global__ void __launch_bounds__(Threads)
    column_partials_kernel(const __nv_bfloat16* __restrict__ dy, std::size_t rows, std::size_t cols,
                           std::size_t chunks, float* __restrict__ partials) {
  for (std::size_t p = blockIdx.y; p < chunks; p += gridDim.y) {
    const std::size_t first = p * column_sum_rows;
    const std::size_t last = first + column_sum_rows < rows ? first + column_sum_rows : rows;
    for (std::size_t j = std::size_t(blockIdx.x) * Threads + threadIdx.x; j < cols;
         j += std::size_t(gridDim.x) * Threads) {
      float sum = 0.0f;
      for (std::size_t i = first; i < last; ++i) sum += widen(dy[i * cols + j]);
      partials[p * cols + j] = sum;
    }
  }
}

// dbias[j] (+)= sum over p (in order) of partials[p][j]. Grid-stride over columns.
template <int Threads>
__global__ void __launch_bounds__(Threads)
    column_totals_kernel(const float* __restrict__ partials, std::size_t chunks, std::size_t cols,
                         bool accumulate, float* __restrict__ dbias) {
  for (std::size_t j = std::size_t(blockIdx.x) * Threads + threadIdx.x; j < cols;
       j += std::size_t(gridDim.x) * Threads) {
    float sum = 0.0f;
    for (std::size_t p = 0; p < chunks; ++p) sum += partials[p * cols + j];
    dbias[j] = accumulate ? dbias[j] + sum : sum;
  }
}

// `partials` holds column_sum_workspace(rows, cols) floats.
inline void column_sum(const __nv_bfloat16* dy, std::size_t rows, std::size_t cols, bool accumulate,
                       float* partials, float* dbias, cudaStream_t stream) {
  if (cols == 0) return;
  const std::size_t chunks = fp8::detail::ceil_div(rows, column_sum_rows);
  if (chunks > 0) {
    const std::size_t column_blocks = fp8::detail::ceil_div(cols, std::size_t(block_threads));
    const dim3 grid = grid_2d(column_blocks, chunks);
    column_partials_kernel<block_threads>
        <<<grid, block_threads, 0, stream>>>(dy, rows, cols, chunks, partials);
    check_launch("fp8::cuda::detail::column_partials_kernel", rows, cols, grid.x * grid.y, block_threads);
  }
  // No rows: the sum is 0 (dbias kept, or overwritten with zeros).
  const unsigned totals_grid = grid_for(cols);
  column_totals_kernel<block_threads>
      <<<totals_grid, block_threads, 0, stream>>>(partials, chunks, cols, accumulate, dbias);
  check_launch("fp8::cuda::detail::column_totals_kernel", cols, totals_grid, block_threads);
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

// The counters before a statistics pass: zero counts, amax 0, the scale range empty.
template <int Threads>
__global__ void __launch_bounds__(Threads) reset_counters_kernel(cast_counters* counters) {
  *counters = cast_counters{0, 0, 0, 0, 0.0f, 0xFFFFFFFFu, 0u, 0u};
}

__device__ __forceinline__ unsigned long long warp_sum(unsigned long long value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xFFFFFFFFu, value, offset);
  return value;
}

// Counts what the cast of `in` (rows x cols, row-major) into `codes` did: element (r, c) of the
// copy holds in[r][c], or in[c][r] when the copy is the transpose (cols x rows); its scale is
// 1 / scale_inv[layout.index_of_element(r, c)] in the copy's coordinates (the layout the cast wrote).
// Reads the input and the codes once more: it runs only in statistics passes.
template <int Threads>
__global__ void __launch_bounds__(Threads)
    count_cast_kernel(const __nv_bfloat16* in, std::size_t rows, std::size_t cols, const std::uint8_t* codes,
                      bool transposed, scale_layout layout, const float* scale_inv, float max_finite,
                      std::uint32_t magnitude_mask, cast_counters* counters) {
  const std::size_t copy_cols = transposed ? rows : cols;
  const std::size_t count = rows * cols;
  const std::size_t stride = std::size_t(gridDim.x) * Threads;
  const std::size_t first = std::size_t(blockIdx.x) * Threads + threadIdx.x;
  unsigned long long nonzero = 0, saturated = 0, flushed = 0;
  std::uint32_t amax = 0;
  for (std::size_t e = first; e < count; e += stride) {
    const std::size_t r = e / copy_cols, c = e % copy_cols;
    const float x = widen(in[transposed ? c * cols + r : e]);
    const float scale = 1.0f / scale_inv[layout.index_of_element(r, c)];
    amax = max(amax, amax_bits(x));
    if (fabsf(x) * scale > max_finite) ++saturated;
    if (x != 0.0f) {
      ++nonzero;
      if ((codes[e] & magnitude_mask) == 0u) ++flushed;
    }
  }
  nonzero = warp_sum(nonzero);
  saturated = warp_sum(saturated);
  flushed = warp_sum(flushed);
  amax = warp_max(amax);
  if (threadIdx.x % 32 == 0) {
    atomicAdd(&counters->nonzero, nonzero);
    atomicAdd(&counters->saturated, saturated);
    atomicAdd(&counters->flushed, flushed);
    atomic_max_amax(&counters->amax, amax);
  }
  // The scale range over the copy's blocks (not over the padding of the scale buffer).
  const std::size_t blocks = layout.grid_rows * layout.grid_cols;
  for (std::size_t b = first; b < blocks; b += stride) {
    const float scale = 1.0f / scale_inv[layout.index(b / layout.grid_cols, b % layout.grid_cols)];
    atomicMin(&counters->scale_min_bits, __float_as_uint(scale));
    atomicMax(&counters->scale_max_bits, __float_as_uint(scale));
  }
  if (first == 0) counters->elements = count;
}

// Zeroes `counters` and counts the cast of `in` (rows x cols) into `codes` (the copy as stored, or
// its transpose) with its inverse scales at granularity `g`, on `stream`.
inline void count_cast(const __nv_bfloat16* in, std::size_t rows, std::size_t cols, const std::uint8_t* codes,
                       bool transposed, granularity g, const float* scale_inv, float max_finite,
                       std::uint32_t magnitude_mask, cast_counters* counters, cudaStream_t stream) {
  reset_counters_kernel<1><<<1, 1, 0, stream>>>(counters);
  check_launch("fp8::cuda::detail::reset_counters_kernel");
  const scale_layout layout =
      transposed ? make_scale_layout(g, cols, rows) : make_scale_layout(g, rows, cols);
  count_cast_kernel<block_threads><<<grid_for(rows * cols), block_threads, 0, stream>>>(
      in, rows, cols, codes, transposed, layout, scale_inv, max_finite, magnitude_mask, counters);
  check_launch("fp8::cuda::detail::count_cast_kernel");
}

}  // namespace fp8::cuda::detail
