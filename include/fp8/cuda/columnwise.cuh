// Kernels of the transposed FP8 copy under column-wise scales: the rows of Xᵀ are the columns of X,
// so Xᵀ's per-row and MX 1x32 scales come from columns of X (128x128 blocks are transposed by the
// block kernel itself, block_quantize.cuh; 1x128 tiles by tile_transpose.cuh, which casts both
// copies from one read).
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/columnwise.cuh contains device code: compile it with nvcc"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../scaling/granularity.hpp"
#include "amax.cuh"
#include "block_quantize.cuh"
#include "cast_transpose.cuh"
#include "convert.cuh"
#include "element.cuh"
#include "launch.cuh"
#include "scale.cuh"

namespace fp8::cuda::detail {

// A block covers a chunk of 128 rows x 32 columns of X: lane l owns column l, warp w the rows
// w, w + 8, ..., w + 120, so every warp load reads 32 consecutive elements of one row.
inline constexpr int column_threads = 256;
inline constexpr int column_width = 32;
inline constexpr int column_warps = column_threads / 32;
inline constexpr int column_chunk_rows = int(tile_length);
inline constexpr int column_values = column_chunk_rows / column_warps;  // 16 per thread
inline constexpr int column_stride = column_chunk_rows + 4;             // bytes per shared row

// Chunks of a rows x cols X: 128-row bands, each split into 32-column chunks.
__host__ __device__ inline std::size_t column_chunk_count(std::size_t rows, std::size_t cols) {
  return ((rows + column_chunk_rows - 1) / column_chunk_rows) * ((cols + column_width - 1) / column_width);
}

struct column_chunk {
  std::size_t r0;  // first row of X
  std::size_t c0;  // first column of X
};

__device__ __forceinline__ column_chunk chunk_of(std::size_t index, std::size_t cols) {
  const std::size_t groups = (cols + column_width - 1) / column_width;
  return {(index / groups) * column_chunk_rows, (index % groups) * column_width};
}

template <class T>
__device__ __forceinline__ void load_column_chunk(const T* in, std::size_t rows, std::size_t cols,
                                                  column_chunk chunk, float (&v)[column_values]) {
  const int lane = int(threadIdx.x) % 32;
  const int warp = int(threadIdx.x) / 32;
  const std::size_t c = chunk.c0 + std::size_t(lane);
#pragma unroll
  for (int k = 0; k < column_values; ++k) {
    const std::size_t r = chunk.r0 + std::size_t(warp + k * column_warps);
    v[k] = r < rows && c < cols ? widen(in[r * cols + c]) : 0.0f;
  }
}

// The NaN-dominant amaxes of each column of the chunk, per group of 128 / Groups rows (1: the whole
// chunk; 4: MX blocks of 32 rows), returned to every thread for its own column. A thread's value k
// is row warp + 8k of the chunk, so its values 4g .. 4g + 3 are rows 32g + warp + {0, 8, 16, 24}:
// group g of the MX split, and values 16g / Groups .. 16(g + 1) / Groups - 1 in general.
template <int Groups>
__device__ __forceinline__ void chunk_column_bits(const float (&v)[column_values],
                                                  std::uint32_t (&bits)[Groups]) {
  static_assert(Groups == 1 || Groups == 4, "whole chunks or MX blocks of 32 rows");
  constexpr int per_group = column_values / Groups;
  __shared__ std::uint32_t partial[column_warps][Groups][column_width];
  const int warp = int(threadIdx.x) / 32;
  const int lane = int(threadIdx.x) % 32;
  __syncthreads();  // partial[] may still be read by the previous chunk
#pragma unroll
  for (int g = 0; g < Groups; ++g) {
    std::uint32_t b = 0;
#pragma unroll
    for (int k = 0; k < per_group; ++k) b = max(b, amax_bits(v[g * per_group + k]));
    partial[warp][g][lane] = b;
  }
  __syncthreads();
#pragma unroll
  for (int g = 0; g < Groups; ++g) {
    bits[g] = 0;
    for (int w = 0; w < column_warps; ++w) bits[g] = max(bits[g], partial[w][g][lane]);
  }
}

// Per-column amaxes of all rows (the per_row scales of Xᵀ): atomically max-ed into column_amax[c].
template <class T>
__global__ void __launch_bounds__(column_threads)
    column_amax_kernel(const T* __restrict__ in, std::size_t rows, std::size_t cols, float* column_amax) {
  const std::size_t chunks = column_chunk_count(rows, cols);
  for (std::size_t index = blockIdx.x; index < chunks; index += gridDim.x) {
    const column_chunk chunk = chunk_of(index, cols);
    float v[column_values];
    load_column_chunk(in, rows, cols, chunk, v);
    std::uint32_t bits[1];
    chunk_column_bits(v, bits);
    const std::size_t c = chunk.c0 + threadIdx.x % 32;
    if (threadIdx.x < 32 && c < cols) atomic_max_amax(column_amax + c, bits[0]);
  }
}

// Casts chunks of X with one scale per column and group of rows, and writes them transposed into
// out_t (cols x rows). Scales: Groups 1, from column_amax (per_row of Xᵀ, float scales: the kernel
// stores none, finish_columns writes them); Groups 4, from the chunk's own column amaxes per group of
// 32 rows (the MX 1x32 blocks of Xᵀ; the entries go to Scales' buffer in layout_t).
template <class Format, class T, int Groups, class Scales>
__global__ void __launch_bounds__(column_threads)
    column_quantize_transpose_kernel(const T* __restrict__ in, std::size_t rows, std::size_t cols,
                                     Scales scales, const float* column_amax, scale_layout layout_t,
                                     std::uint8_t* __restrict__ out_t) {
  static_assert(Groups == 1 || !Scales::padded, "a layout with padding (float scales) has Groups 1 here");
  constexpr std::size_t group_rows = std::size_t(column_chunk_rows) / Groups;
  constexpr int per_group = column_values / Groups;
  __shared__ alignas(4) std::uint8_t codes[column_width][column_stride];
  const int lane = int(threadIdx.x) % 32;
  const int warp = int(threadIdx.x) / 32;
  const std::size_t chunks = column_chunk_count(rows, cols);
  for (std::size_t index = blockIdx.x; index < chunks; index += gridDim.x) {
    const column_chunk chunk = chunk_of(index, cols);
    float v[column_values];
    load_column_chunk(in, rows, cols, chunk, v);
    const std::size_t c = chunk.c0 + std::size_t(lane);
    float scale[Groups];
    if constexpr (Groups == 1) {
      scale[0] = c < cols ? scales.apply(__float_as_uint(column_amax[c]), 0, false) : 1.0f;
    } else {
      std::uint32_t bits[Groups];
      chunk_column_bits(v, bits);
#pragma unroll
      for (int g = 0; g < Groups; ++g) {
        const std::size_t first_row = chunk.r0 + std::size_t(g) * group_rows;
        const std::size_t tile = first_row / group_rows;
        // A group below the last row has no block in Xᵀ's layout (MX: rows not a multiple of 128).
        const bool store = warp == 0 && c < cols && first_row < rows;
        scale[g] = scales.apply(bits[g], store ? layout_t.index(c, tile) : 0, store);
      }
    }
#pragma unroll
    for (int k = 0; k < column_values; ++k) {
      codes[lane][warp + k * column_warps] = scaled_code<Format>(v[k], scale[k / per_group]);
    }
    __syncthreads();
    // Row cc of the chunk's transpose: 128 codes, 16 per thread (8 threads per row).
    const int cc = int(threadIdx.x) / 8;
    const int part = int(threadIdx.x) % 8;
    const std::size_t out_row = chunk.c0 + std::size_t(cc);
    const std::size_t first = chunk.r0 + 16 * std::size_t(part);
    if (out_row < cols) {
      std::uint8_t* destination = out_t + out_row * rows;
      const bool whole = first + 16 <= rows && rows % 4 == 0 && is_aligned(destination, 4);
      for (int j = 0; j < 16; j += 4) {
        const std::uint8_t* source = &codes[cc][16 * part + j];
        if (whole) {
          *reinterpret_cast<std::uint32_t*>(destination + first + j) =
              *reinterpret_cast<const std::uint32_t*>(source);
        } else {
          for (int b = 0; b < 4; ++b) {
            if (first + j + b < rows) destination[first + j + b] = source[b];
          }
        }
      }
    }
    __syncthreads();
  }
}

// column_quantize_transpose_kernel over every chunk of X; `kernel` names it in a launch failure.
template <int Groups, class T, class Scales>
void launch_column_quantize_transpose(const T* in, std::size_t rows, std::size_t cols, fp8_format format,
                                      const Scales& scales, const float* column_amax,
                                      const scale_layout& layout_t, std::uint8_t* out_t, cudaStream_t stream,
                                      const char* kernel) {
  // Groups 1 scales every column from column_amax: the kernel reads it for every column.
  if constexpr (Groups == 1) require(column_amax != nullptr, kernel, "column_amax must be set");
  const unsigned grid = grid_for(column_chunk_count(rows, cols), 1);
  visit_format(format, [&](auto descriptor) {
    using format_t = decltype(descriptor);
    column_quantize_transpose_kernel<format_t, T, Groups, Scales>
        <<<grid, column_threads, 0, stream>>>(in, rows, cols, scales, column_amax, layout_t, out_t);
  });
  check_launch(kernel, rows, cols, grid, column_threads);
}

// scale_inv_t[c] = 1 / scale of column c's amax (which column_amax_kernel left there). A template, so
// that two translation units including this header share one definition (a plain __global__ function
// defined in a header is defined by each, and the program fails to link).
template <int Threads>
__global__ void __launch_bounds__(Threads)
    finish_columns_kernel(float* column_amax_then_scale_inv, std::size_t cols, scale_rule rule) {
  for (std::size_t c = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; c < cols;
       c += std::size_t(gridDim.x) * blockDim.x) {
    column_amax_then_scale_inv[c] = 1.0f / scale_from_amax(column_amax_then_scale_inv[c], rule, 1.0f);
  }
}

}  // namespace fp8::cuda::detail
