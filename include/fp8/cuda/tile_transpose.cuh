// Current scaling in 1x128 tiles into both copies from one read of memory: out (rows x cols) with a
// scale per row and 128 columns, and out_t (cols x rows) with a scale per column of X and 128 rows,
// the 1x128 tiles of Xᵀ (the operand layout of a wgrad under DeepSeek-V3's recipe). Two passes over X
// (a row-wise kernel, then a column-wise one) read it from memory twice; this kernel takes a 128x128
// block of X, both kinds of amaxes from it, and writes both copies.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/tile_transpose.cuh contains device code: compile it with nvcc"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../scaling/fp8_format.hpp"
#include "../scaling/granularity.hpp"
#include "amax.cuh"
#include "block_quantize.cuh"
#include "convert.cuh"
#include "element.cuh"
#include "launch.cuh"
#include "scale.cuh"

namespace fp8::cuda::detail {

// A thread block per 128x128 block of X (grid-stride), laid out as block_quantize_kernel's: lane l
// holds columns 4l..4l+3, warp w the rows w, w + 8, ..., w + 120, so that
//  - a row's 1x128 tile is one warp's (a warp maximum gives its amax), and
//  - a column's 128 rows are one lane's in each warp (its maximum over its passes, then over the
//    warps through shared memory, gives the amax of Xᵀ's tile).
// The rows are cast straight to out, the columns through the shared tile of codes to out_t
// (store_transposed_block). The column cast reads the block a second time, from L1, where the first
// read has just put its 32 or 64 KiB: holding the values through both casts took more than 128
// registers per thread (ptxas: 220, one block per SM), while this way two blocks share an SM with
// no spills (the launch bounds ask for two). Scales as the tile kernels store them
// (float_block_scales, layouts `layout` of X and `layout_t` of Xᵀ, padding 0), *amax max-ed with the
// matrix's amax. Every element is multiplied and converted as in the row-wise and column-wise
// kernels, so the codes and scales are bit-identical to theirs and to the CPU's quantize().
template <class Format, class T>
__global__ void __launch_bounds__(block_threads_2d, 2)
    tile_quantize_transpose_kernel(const T* __restrict__ in, std::size_t rows, std::size_t cols, bool vector,
                                   float_block_scales scales, scale_layout layout,
                                   std::uint8_t* __restrict__ out, float* amax, bool packed_t,
                                   float_block_scales scales_t, scale_layout layout_t,
                                   std::uint8_t* __restrict__ out_t) {
  constexpr int warps = block_threads_2d / 32;
  constexpr int length = int(block_length);
  __shared__ std::uint32_t tile[length * block_tile_words];  // the codes of the transposed copy
  // A lane's 4 columns are written and read as one 16-byte access: 4-byte ones at 4 * lane + k put
  // lanes 8 apart on one bank (4-way conflicts), a quarter-warp's 16-byte ones never share a bank.
  __shared__ alignas(16) std::uint32_t column_bits[warps][length];  // per warp, each column's amax bits
  __shared__ alignas(16) float column_scale[length];
  const int lane = int(threadIdx.x) % 32;
  const int warp = int(threadIdx.x) / 32;
  const std::size_t block_cols = (cols + block_length - 1) / block_length;
  const std::size_t blocks = ((rows + block_length - 1) / block_length) * block_cols;
  std::uint32_t tensor_bits = 0;  // this thread's rows' amax (the same for the lanes of a warp)
  for (std::size_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const std::size_t i = b / block_cols;  // block row: X's rows r0.., Xᵀ's tile column i
    const std::size_t j = b % block_cols;  // block column: X's tile column j, Xᵀ's rows c0..
    const std::size_t r0 = i * block_length;
    const std::size_t c0 = j * block_length;
    const std::size_t c = c0 + 4 * std::size_t(lane);
    const auto row_of = [&](int pass) { return r0 + std::size_t(warp + pass * warps); };
    // The same for the whole block. The transposed copy's packed stores need the block inside the
    // matrix, not X's alignment.
    const bool inside = r0 + block_length <= rows && c0 + block_length <= cols;
    const bool whole = vector && inside;
    // The thread's 16 x 4 values: plain vector loads for an aligned block inside the matrix; guarded
    // loads at the edges, 0 outside (0 leaves every amax alone).
    const auto load_block = [&](float4(&v)[block_passes_2d]) {
      if (whole) {
        const T* first = in + row_of(0) * cols + c;
        const std::size_t step = std::size_t(warps) * cols;
#pragma unroll
        for (int pass = 0; pass < block_passes_2d; ++pass) v[pass] = load4(first + pass * step);
      } else {
#pragma unroll
        for (int pass = 0; pass < block_passes_2d; ++pass) {
          const std::size_t r = row_of(pass);
          v[pass] = r < rows ? load4_guarded(in + r * cols, c, cols, vector) : float4{0.0f, 0.0f, 0.0f, 0.0f};
        }
      }
    };
    float4 v[block_passes_2d];
    load_block(v);
    // X's copy: each row's tile scaled by its own amax. A warp's 16 rows get their scales from 16 of
    // its lanes at once (lane p computes pass p's scale and stores its entry), then each pass reads
    // its row's scale from that lane: one scale computation per thread instead of 16 in a row.
    std::uint32_t own_columns[4] = {0u, 0u, 0u, 0u};  // this thread's columns' amaxes, on the way
    std::uint32_t own_row_bits = 0;                   // lane p: the amax of pass p's row
#pragma unroll
    for (int pass = 0; pass < block_passes_2d; ++pass) {
      own_columns[0] = max(own_columns[0], amax_bits(v[pass].x));
      own_columns[1] = max(own_columns[1], amax_bits(v[pass].y));
      own_columns[2] = max(own_columns[2], amax_bits(v[pass].z));
      own_columns[3] = max(own_columns[3], amax_bits(v[pass].w));
      const std::uint32_t bits = warp_max(amax_bits(v[pass]));  // every lane takes part
      if (lane == pass) own_row_bits = bits;
      if (row_of(pass) < rows) tensor_bits = max(tensor_bits, bits);
    }
    const bool own_row = lane < block_passes_2d && row_of(lane) < rows;
    const float own_row_scale =
        scales.apply(own_row_bits, own_row ? layout.index(row_of(lane), j) : 0, own_row);
#pragma unroll
    for (int pass = 0; pass < block_passes_2d; ++pass) {
      const std::size_t r = row_of(pass);
      const float scale = __shfl_sync(0xFFFFFFFFu, own_row_scale, pass);
      if (r < rows) {  // the same for the whole warp
        const packed_x4 codes = scaled_codes_x4<Format>(v[pass], scale);
        if (whole) {
          *reinterpret_cast<std::uint32_t*>(out + r * cols + c) = codes;
        } else {
          store4_guarded(out + r * cols, c, cols, vector, codes);
        }
      }
    }
    if (threadIdx.x == 0 && r0 + block_length >= rows) {  // the last block row: padding rows of tile column j
      for (std::size_t p = rows; p < layout.leading; ++p) scales.pad(layout.index(p, j));
    }
    // Xᵀ's copy: each column's amax over the block's rows (its tile in Xᵀ), then its scale.
    *reinterpret_cast<uint4*>(&column_bits[warp][4 * lane]) =
        make_uint4(own_columns[0], own_columns[1], own_columns[2], own_columns[3]);
    __syncthreads();  // (the previous block's readers of column_scale and tile are done too)
    if (int(threadIdx.x) < length) {
      std::uint32_t bits = 0;
#pragma unroll
      for (int w = 0; w < warps; ++w) bits = max(bits, column_bits[w][threadIdx.x]);
      const std::size_t column = c0 + threadIdx.x;
      const bool store = column < cols;
      column_scale[threadIdx.x] = scales_t.apply(bits, store ? layout_t.index(column, i) : 0, store);
    }
    if (threadIdx.x == 0 && c0 + block_length >= cols) {  // the last block column: padding rows of Xᵀ
      for (std::size_t p = cols; p < layout_t.leading; ++p) scales_t.pad(layout_t.index(p, i));
    }
    __syncthreads();
    const float4 s = *reinterpret_cast<const float4*>(&column_scale[4 * lane]);
    load_block(v);  // again, from L1 (see above)
#pragma unroll
    for (int pass = 0; pass < block_passes_2d; ++pass) {
      // Codes past the matrix's edge are never read.
      tile[(warp + pass * warps) * block_tile_words + lane] = scaled_codes_x4<Format>(v[pass], s);
    }
    __syncthreads();
    store_transposed_block(tile, r0, c0, rows, cols, inside && packed_t, out_t);
    // The next block's first writes to column_bits, column_scale and tile each follow a barrier that
    // every reader here reaches first.
  }
  tensor_bits = block_max<block_threads_2d>(tensor_bits);
  if (threadIdx.x == 0) atomic_max_amax(amax, tensor_bits);
}

// Launches tile_quantize_transpose_kernel over every 128x128 block of X: layout and layout_t are
// make_scale_layout(tile_1x128, rows, cols) and (.., cols, rows); the caller has checked the
// arguments and set *amax to 0.
template <class T>
void launch_tile_quantize_transpose(const T* in, std::size_t rows, std::size_t cols, fp8_format format,
                                    const scale_rule& rule, const scale_layout& layout, std::uint8_t* out,
                                    float* scale_inv, const scale_layout& layout_t, std::uint8_t* out_t,
                                    float* scale_inv_t, float* amax, cudaStream_t stream) {
  const bool vector = cols % 4 == 0 && is_aligned(in, 4 * sizeof(T)) && is_aligned(out, 4);
  const bool packed_t = rows % 4 == 0 && is_aligned(out_t, 4);
  const std::size_t blocks =
      ((rows + block_length - 1) / block_length) * ((cols + block_length - 1) / block_length);
  const unsigned grid = grid_for(blocks, 1);
  visit_format(format, [&](auto descriptor) {
    using format_t = decltype(descriptor);
    tile_quantize_transpose_kernel<format_t, T><<<grid, block_threads_2d, 0, stream>>>(
        in, rows, cols, vector, float_block_scales{rule, scale_inv}, layout, out, amax, packed_t,
        float_block_scales{rule, scale_inv_t}, layout_t, out_t);
  });
  check_launch("fp8::cuda::detail::tile_quantize_transpose_kernel", rows, cols, grid, block_threads_2d);
}

}  // namespace fp8::cuda::detail
