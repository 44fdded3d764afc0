// Current scaling per row, per 1x128 tile and per 128x128 block on the device: each block's amax, its
// scale, its cast, and 1 / scale in the scale layout cuBLASLt reads (fp8::scale_layout), in one read.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/block_quantize.cuh contains device code: compile it with nvcc"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../scaling/fp8_format.hpp"
#include "../scaling/granularity.hpp"
#include "../scaling/recipe.hpp"
#include "amax.cuh"
#include "byte_transpose.cuh"
#include "convert.cuh"
#include "element.cuh"
#include "launch.cuh"
#include "quantize.cuh"
#include "scale.cuh"

namespace fp8::cuda {
namespace detail {

// Four elements of a row starting at column c: one vector load when `vector` (the row and c are
// 4-aligned and all four exist), else guarded loads with 0 outside the matrix (0 leaves amaxes alone).
template <class T>
__device__ __forceinline__ float4 load4_guarded(const T* row, std::size_t c, std::size_t cols, bool vector) {
  if (vector && c + 4 <= cols) return load4(row + c);
  float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int j = 0; j < 4; ++j) {
    if (c + j < cols) v[j] = widen(row[c + j]);
  }
  return float4{v[0], v[1], v[2], v[3]};
}

// Four codes (scaled_codes_x4) into row[c, c + 4), those inside the row: one 32-bit store where the
// row allows vector access (`vector`) and all four are inside, else byte by byte.
__device__ __forceinline__ void store4_guarded(std::uint8_t* row, std::size_t c, std::size_t cols,
                                               bool vector, packed_x4 codes) {
  if (vector && c + 4 <= cols) {
    *reinterpret_cast<std::uint32_t*>(row + c) = codes;
    return;
  }
  for (int j = 0; j < 4; ++j) {
    if (c + j < cols) row[c + j] = std::uint8_t(codes >> (8 * j));
  }
}

// One block per row (grid-stride): the row's amax, its scale, then its cast (the second read of the
// row mostly hits L1/L2).
template <class Format, class T, int Threads>
__global__ void __launch_bounds__(Threads)
    row_quantize_kernel(const T* __restrict__ in, std::size_t rows, std::size_t cols, bool vector,
                        scale_rule rule, std::uint8_t* __restrict__ out, float* scale_inv, float* amax) {
  std::uint32_t tensor_bits = 0;
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = in + r * cols;
    std::uint32_t bits = 0;
    for (std::size_t c = 4 * std::size_t(threadIdx.x); c < cols; c += 4 * std::size_t(Threads)) {
      bits = max(bits, amax_bits(load4_guarded(row, c, cols, vector)));
    }
    bits = block_max<Threads>(bits);
    tensor_bits = max(tensor_bits, bits);
    const float scale = scale_from_amax(__uint_as_float(bits), rule, 1.0f);
    for (std::size_t c = 4 * std::size_t(threadIdx.x); c < cols; c += 4 * std::size_t(Threads)) {
      store4_guarded(out + r * cols, c, cols, vector,
                     scaled_codes_x4<Format>(load4_guarded(row, c, cols, vector), scale));
    }
    if (threadIdx.x == 0) scale_inv[r] = 1.0f / scale;
  }
  if (threadIdx.x == 0) atomic_max_amax(amax, tensor_bits);
}

// The place of an item (a tile, or four elements) in row order: its row and its index within the
// row, moved on by a fixed number of items without a division. The grid-stride loops of the tile
// quantize and the dequantize kernels step with it: the tile kernel first divided a 64-bit tile
// number by the tiles per row four times per tile, which most likely made it bound by instructions
// rather than memory (on an H100, 1x128 tiles of bf16 ran at 0.42 of copy, slower than f32 for half
// the bytes; the next run measures the stepped form).
struct row_position {
  std::size_t row;
  std::size_t column;  // the item's index within its row, < per_row

  // For the first items of a grid only (below 2^32): a 32-bit division, or none where the item lies
  // in the first row. (A 64-bit division is a subroutine call on the GPU, whose saved registers
  // spilled.)
  FP8_HOST_DEVICE static row_position of(std::uint32_t item, std::size_t per_row) noexcept {
    if (item < per_row) return {0, item};
    const auto divisor = std::uint32_t(per_row);  // <= item < 2^32
    return {item / divisor, item % divisor};
  }
  // Moves on by `step`, itself a position (step.column < per_row): an addition and a carry.
  FP8_HOST_DEVICE void advance(row_position step, std::size_t per_row) noexcept {
    row += step.row;
    column += step.column;
    if (column >= per_row) {
      column -= per_row;
      ++row;
    }
  }
};

// 1 x (4 Lanes) tiles of a row, Lanes lanes x 4 elements per tile: 1x128 tiles (Lanes 32, a warp
// per tile, float 1 / scale entries) and MX 1x32 blocks (Lanes 8, four blocks per warp, E8M0 codes).
// A warp takes 32 / Lanes consecutive tiles in row order (grid-stride over warps); Scales is
// float_block_scales or e8m0_block_scales (scale.cuh).
template <class Format, class T, int Threads, int Lanes, class Scales>
__global__ void __launch_bounds__(Threads)
    tile_quantize_kernel(const T* __restrict__ in, std::size_t rows, std::size_t cols, bool vector,
                         Scales scales, scale_layout layout, std::uint8_t* __restrict__ out, float* amax) {
  constexpr int warps = Threads / 32;
  constexpr int tiles_per_warp = 32 / Lanes;
  constexpr std::size_t length = 4 * std::size_t(Lanes);
  const int lane = int(threadIdx.x) % 32;
  const int member = lane % Lanes;  // which four elements of its tile the lane holds
  const std::size_t tiles = rows * layout.grid_cols;
  const std::size_t tiles_per_step = std::size_t(gridDim.x) * warps * tiles_per_warp;
  const std::size_t per_row = layout.grid_cols;
  if (per_row == 0) return;  // no tiles (and no division by 0 below); the same for the whole block
  std::uint32_t tensor_bits = 0;
  const auto first_column = [&](row_position at) { return at.column * length + 4 * std::size_t(member); };
  const auto load = [&](std::size_t t, row_position at) {
    return t < tiles ? load4_guarded(in + at.row * cols, first_column(at), cols, vector)
                     : float4{0.0f, 0.0f, 0.0f, 0.0f};
  };
  // Every lane takes part in the group's shuffles, also one past the last tile (whose zeros leave
  // the maximum alone); only then do lanes without a tile stop.
  const auto finish = [&](std::size_t t, row_position at, float4 v) {
    const std::uint32_t bits = group_max<Lanes>(amax_bits(v));
    if (t >= tiles) return;
    tensor_bits = max(tensor_bits, bits);
    const float scale = scales.apply(bits, layout.index(at.row, at.column), member == 0);
    store4_guarded(out + at.row * cols, first_column(at), cols, vector, scaled_codes_x4<Format>(v, scale));
    if constexpr (Scales::padded) {
      // The padding rows of this tile column are written as 0, as on the CPU.
      if (member == 0 && at.row + 1 == rows) {
        for (std::size_t p = rows; p < layout.leading; ++p) scales.pad(layout.index(p, at.column));
      }
    }
  };
  // Two tiles per lane and step (one grid apart), so that two loads per thread are in flight. The
  // positions of both move on by 2 * tiles_per_step tiles per step: divisions only here, of numbers
  // below tiles_per_step, which grid_for's cap on the grid keeps far below 2^32.
  const std::size_t first = (blockIdx.x * std::size_t(warps) + threadIdx.x / 32) * tiles_per_warp;
  const std::size_t own = first + std::size_t(lane / Lanes);
  const row_position grid_step = row_position::of(std::uint32_t(tiles_per_step), per_row);
  row_position at = row_position::of(std::uint32_t(own), per_row);
  row_position at2 = at;
  at2.advance(grid_step, per_row);
  row_position step = grid_step;  // 2 * tiles_per_step
  step.advance(grid_step, per_row);
  for (std::size_t base = first; base < tiles; base += 2 * tiles_per_step) {
    const std::size_t t = base + std::size_t(lane / Lanes);
    const std::size_t t2 = t + tiles_per_step;
    const float4 v = load(t, at);
    const float4 v2 = load(t2, at2);
    finish(t, at, v);
    if (base + tiles_per_step < tiles) finish(t2, at2, v2);  // the same for the whole warp
    at.advance(step, per_row);
    at2.advance(step, per_row);
  }
  tensor_bits = block_max<Threads>(tensor_bits);
  if (threadIdx.x == 0) atomic_max_amax(amax, tensor_bits);
}

// 128x128 blocks: a thread block per block, the block's elements held in registers between the amax
// and the cast (one read). 32 lanes x 4 columns span 128 columns; 8 warps x 16 passes span 128 rows.
inline constexpr int block_threads_2d = 256;
inline constexpr int block_passes_2d = int(block_length) / (block_threads_2d / 32);
// The transposed copy goes through a shared tile of the block's codes, 128 rows of 32 words padded
// to 33 words, so that both the row writes and the 4 x 4 column reads below are free of bank
// conflicts (a row step moves one bank).
inline constexpr int block_tile_words = int(block_length) / 4 + 1;

// Writes the codes of one 128x128 block of X, which `tile` holds in the block kernels' shared layout
// (row k of the block at word k * block_tile_words), transposed into out_t (cols x rows), where the
// block's rows r0.. become columns and its columns c0.. rows. `packed` (a whole block, rows % 4 == 0
// and out_t 4-aligned): 32 x 32 micro-tiles of 4 x 4 codes, four per thread (transpose_micro_tile),
// each column's four codes in one 32-bit store; otherwise a byte per element, guarded at the edges.
// Every thread of the block calls it, after the barrier that completes the tile.
__device__ __forceinline__ void store_transposed_block(const std::uint32_t* tile, std::size_t r0,
                                                       std::size_t c0, std::size_t rows, std::size_t cols,
                                                       bool packed, std::uint8_t* __restrict__ out_t) {
  const int lane = int(threadIdx.x) % 32;
  const int warp = int(threadIdx.x) / 32;
  if (packed) {
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      const auto [row_group, column_word] = transpose_micro_tile(warp, lane, g);
      const std::uint32_t* source = tile + 4 * row_group * block_tile_words + column_word;
      std::uint32_t columns[4];
      transpose_4x4_bytes(source[0], source[block_tile_words], source[2 * block_tile_words],
                          source[3 * block_tile_words], columns);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const std::size_t column = c0 + std::size_t(4 * column_word + k);
        *reinterpret_cast<std::uint32_t*>(out_t + column * rows + r0 + std::size_t(4 * row_group)) =
            columns[k];
      }
    }
    return;
  }
  const auto* tile_bytes = reinterpret_cast<const std::uint8_t*>(tile);
  for (int e = int(threadIdx.x); e < int(block_length * block_length); e += block_threads_2d) {
    const int tc = e / int(block_length);
    const int tr = e % int(block_length);
    if (r0 + std::size_t(tr) < rows && c0 + std::size_t(tc) < cols) {
      out_t[(c0 + std::size_t(tc)) * rows + r0 + std::size_t(tr)] =
          tile_bytes[tr * 4 * block_tile_words + tc];
    }
  }
}

// out (rows x cols) and, when Transposed, out_t (cols x rows) with the transposed scales
// scale_inv_t in layout_t, all from the one read of each block: the codes go to a shared tile and
// come out as columns, four rows per 32-bit store (`packed_t`: rows % 4 == 0 and out_t 4-aligned).
template <class Format, class T, bool Transposed>
__global__ void __launch_bounds__(block_threads_2d)
    block_quantize_kernel(const T* __restrict__ in, std::size_t rows, std::size_t cols, bool vector,
                          scale_rule rule, scale_layout layout, std::uint8_t* __restrict__ out,
                          float* scale_inv, float* amax, bool packed_t, scale_layout layout_t,
                          std::uint8_t* __restrict__ out_t, float* scale_inv_t) {
  __shared__ std::uint32_t tile[Transposed ? int(block_length) * block_tile_words : 1];
  const int lane = int(threadIdx.x) % 32;
  const int warp = int(threadIdx.x) / 32;
  constexpr int warps = block_threads_2d / 32;
  const std::size_t blocks = layout.grid_rows * layout.grid_cols;
  std::uint32_t tensor_bits = 0;
  for (std::size_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const std::size_t i = b / layout.grid_cols;
    const std::size_t j = b % layout.grid_cols;
    const std::size_t c = j * block_length + 4 * std::size_t(lane);
    const auto row_in_block = [&](int pass) { return warp + pass * warps; };
    const auto row_of = [&](int pass) { return i * block_length + std::size_t(row_in_block(pass)); };
    // A whole, aligned block keeps its values in registers (one read); an edge block reads twice
    // with guards instead, so that the common path stays lean. `whole` is the same for the block.
    // The transposed copy's packed stores need the block inside the matrix, not X's alignment.
    const bool inside = (i + 1) * block_length <= rows && (j + 1) * block_length <= cols;
    const bool whole = vector && inside;
    float scale = 1.0f;
    if (whole) {
      float4 v[block_passes_2d];
      std::uint32_t bits = 0;
#pragma unroll
      for (int pass = 0; pass < block_passes_2d; ++pass) {
        v[pass] = load4(in + row_of(pass) * cols + c);
        bits = max(bits, amax_bits(v[pass]));
      }
      bits = block_max<block_threads_2d>(bits);
      tensor_bits = max(tensor_bits, bits);
      scale = scale_from_amax(__uint_as_float(bits), rule, 1.0f);
#pragma unroll
      for (int pass = 0; pass < block_passes_2d; ++pass) {
        const packed_x4 codes = scaled_codes_x4<Format>(v[pass], scale);
        *reinterpret_cast<std::uint32_t*>(out + row_of(pass) * cols + c) = codes;
        if constexpr (Transposed) tile[row_in_block(pass) * block_tile_words + lane] = codes;
      }
    } else {
      std::uint32_t bits = 0;
#pragma unroll 1
      for (int pass = 0; pass < block_passes_2d; ++pass) {
        if (row_of(pass) < rows)
          bits = max(bits, amax_bits(load4_guarded(in + row_of(pass) * cols, c, cols, vector)));
      }
      bits = block_max<block_threads_2d>(bits);
      tensor_bits = max(tensor_bits, bits);
      scale = scale_from_amax(__uint_as_float(bits), rule, 1.0f);
#pragma unroll 1
      for (int pass = 0; pass < block_passes_2d; ++pass) {
        const std::size_t r = row_of(pass);
        if (r < rows) {
          const packed_x4 codes =
              scaled_codes_x4<Format>(load4_guarded(in + r * cols, c, cols, vector), scale);
          store4_guarded(out + r * cols, c, cols, vector, codes);
          if constexpr (Transposed) {
            tile[row_in_block(pass) * block_tile_words + lane] = codes;  // bytes past the edge are never read
          }
        }
      }
    }
    if (threadIdx.x == 0) {
      scale_inv[layout.index(i, j)] = 1.0f / scale;
      if (j + 1 == layout.grid_cols) {  // padding of this scale row, 0 as on the CPU
        for (std::size_t p = layout.grid_cols; p < layout.leading; ++p) scale_inv[layout.index(i, p)] = 0.0f;
      }
      if constexpr (Transposed) {  // block (i, j) of X is block (j, i) of Xᵀ: the same elements, scale
        scale_inv_t[layout_t.index(j, i)] = 1.0f / scale;
        if (i + 1 == layout.grid_rows) {
          for (std::size_t p = layout_t.grid_cols; p < layout_t.leading; ++p)
            scale_inv_t[layout_t.index(j, p)] = 0.0f;
        }
      }
    }
    if constexpr (Transposed) {
      __syncthreads();
      store_transposed_block(tile, i * block_length, j * block_length, rows, cols, inside && packed_t, out_t);
      __syncthreads();  // the tile is refilled by the next block of this grid-stride loop
    }
  }
  if (threadIdx.x == 0) atomic_max_amax(amax, tensor_bits);
}

// Launches the current-scaling kernel of layout.kind. For block_128x128, a non-null out_t also gets
// the transposed codes (cols x rows) and scale_inv_t the transposed scales (layout_t), in the same pass.
template <class T>
void launch_block_quantize(const T* in, std::size_t rows, std::size_t cols, fp8_format format,
                           const scale_rule& rule, const scale_layout& layout, std::uint8_t* out,
                           float* scale_inv, float* amax, cudaStream_t stream, std::uint8_t* out_t = nullptr,
                           float* scale_inv_t = nullptr, const scale_layout* layout_t = nullptr) {
  const bool vector = cols % 4 == 0 && is_aligned(in, 4 * sizeof(T)) && is_aligned(out, 4);
  const bool packed_t = rows % 4 == 0 && is_aligned(out_t, 4);
  const char* kernel = "fp8::cuda::detail::block_quantize_kernel";
  unsigned grid = 0;
  int threads = block_threads_2d;
  visit_format(format, [&](auto descriptor) {
    using format_t = decltype(descriptor);
    switch (layout.kind) {
      case granularity::per_row:
        kernel = "fp8::cuda::detail::row_quantize_kernel";
        grid = grid_for(rows, 1);
        threads = block_threads;
        row_quantize_kernel<format_t, T, block_threads>
            <<<grid, block_threads, 0, stream>>>(in, rows, cols, vector, rule, out, scale_inv, amax);
        break;
      case granularity::tile_1x128: {
        constexpr int warps = block_threads / 32;
        kernel = "fp8::cuda::detail::tile_quantize_kernel";
        grid = grid_for(rows * layout.grid_cols, warps);
        threads = block_threads;
        tile_quantize_kernel<format_t, T, block_threads, 32, float_block_scales>
            <<<grid, block_threads, 0, stream>>>(in, rows, cols, vector, float_block_scales{rule, scale_inv},
                                                 layout, out, amax);
        break;
      }
      default: {
        grid = grid_for(layout.grid_rows * layout.grid_cols, 1);
        if (out_t != nullptr) {
          block_quantize_kernel<format_t, T, true>
              <<<grid, block_threads_2d, 0, stream>>>(in, rows, cols, vector, rule, layout, out, scale_inv,
                                                      amax, packed_t, *layout_t, out_t, scale_inv_t);
        } else {
          block_quantize_kernel<format_t, T, false><<<grid, block_threads_2d, 0, stream>>>(
              in, rows, cols, vector, rule, layout, out, scale_inv, amax, false, layout, nullptr, nullptr);
        }
        break;
      }
    }
  });
  check_launch(kernel, rows, cols, grid, threads);
}

// MX 1x32 blocks with E8M0 codes in scale_e8m0 (layout: make_scale_layout(mx_1x32, rows, cols)):
// the tile kernel with eight lanes per block.
template <class T>
void launch_mx_quantize(const T* in, std::size_t rows, std::size_t cols, fp8_format format,
                        const scale_layout& layout, std::uint8_t* out, std::uint8_t* scale_e8m0, float* amax,
                        cudaStream_t stream) {
  constexpr int lanes = int(mx_block_length) / 4;
  constexpr int tiles_per_block = (block_threads / 32) * (32 / lanes);
  const bool vector = cols % 4 == 0 && is_aligned(in, 4 * sizeof(T)) && is_aligned(out, 4);
  const unsigned grid = grid_for(rows * layout.grid_cols, tiles_per_block);
  visit_format(format, [&](auto descriptor) {
    using format_t = decltype(descriptor);
    tile_quantize_kernel<format_t, T, block_threads, lanes, e8m0_block_scales>
        <<<grid, block_threads, 0, stream>>>(in, rows, cols, vector, e8m0_block_scales{format, scale_e8m0},
                                             layout, out, amax);
  });
  check_launch("fp8::cuda::detail::tile_quantize_kernel (MX)", rows, cols, grid, block_threads);
}

// out = T(decode(code) * the scale_inv of the element's block), four elements of a row per step.
// Scale is float (1 / scale) or std::uint8_t (an E8M0 code: X = 2^(code - 127)).
// The grid-stride loop steps its (row, quad) position (row_position), so each thread divides by
// quads_per_row only before the loop: a 64-bit division per four elements would cost more than
// their memory traffic.
template <class Format, class T, int Threads, class Scale>
__global__ void __launch_bounds__(Threads)
    block_dequantize_kernel(const std::uint8_t* __restrict__ in, std::size_t rows, std::size_t cols,
                            bool vector, scale_layout layout, const Scale* scales, T* __restrict__ out) {
  __shared__ float table[byte_codes];
  fill_decode_table<Format>(table);
  const std::size_t quads_per_row = (cols + 3) / 4;
  // Both below the grid's thread count, which grid_for's cap keeps far below 2^32.
  const auto first = std::uint32_t(blockIdx.x * Threads + threadIdx.x);
  const auto stride = std::uint32_t(gridDim.x * Threads);
  const row_position step = row_position::of(stride, quads_per_row);
  for (row_position at = row_position::of(first, quads_per_row); at.row < rows;
       at.advance(step, quads_per_row)) {
    const std::size_t r = at.row;
    const std::size_t c = 4 * at.column;
    // Block widths (32, 128, cols) are multiples of 4 or the whole row, so the 4 share one scale.
    const float s = block_scale_inv(scales[layout.index_of_element(r, c)]);
    const std::size_t base = r * cols + c;
    if (vector && c + 4 <= cols) {
      dequantize4<Format>(table, *reinterpret_cast<const std::uint32_t*>(in + base), s, out + base);
    } else {
      for (std::size_t j = 0; j < 4 && c + j < cols; ++j)
        out[base + j] = narrow<T>(dequantize_one<Format>(table, in[base + j], s));
    }
  }
}

// The matrix dequantize of either scale kind (float 1 / scale, or E8M0 codes under mx_1x32), the
// arguments checked by the caller.
template <class T, class Scale>
void launch_block_dequantize(const std::uint8_t* in, std::size_t rows, std::size_t cols,
                             const quantization& q, const Scale* scales, T* out, cudaStream_t stream) {
  if (rows * cols == 0) return;
  const scale_layout layout = make_scale_layout(q.granularity, rows, cols);
  const bool vector = cols % 4 == 0 && is_aligned(in, 4) && is_aligned(out, 4 * sizeof(T));
  const unsigned grid = grid_for(rows * ((cols + 3) / 4));
  visit_format(q.format, [&](auto descriptor) {
    using format_t = decltype(descriptor);
    block_dequantize_kernel<format_t, T, block_threads, Scale>
        <<<grid, block_threads, 0, stream>>>(in, rows, cols, vector, layout, scales, out);
  });
  check_launch("fp8::cuda::detail::block_dequantize_kernel", rows, cols, grid, block_threads);
}

}  // namespace detail
}  // namespace fp8::cuda
