// The per-tensor cast fused with a transpose: one read of a row-major matrix writes its FP8 codes both
// row-major and transposed (the copy the backward GEMMs need in cuBLASLt's TN layout), plus the amax.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/cast_transpose.cuh contains device code: compile it with nvcc"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../scaling/fp8_format.hpp"
#include "amax.cuh"
#include "byte_transpose.cuh"
#include "convert.cuh"
#include "element.cuh"
#include "launch.cuh"
#include "quantize.cuh"

namespace fp8::cuda {
namespace detail {

// A block transposes 64 x 64 tiles with 256 threads. Casting, 16 threads x 4 columns span a tile
// row and 16 groups of them take 16 rows per pass (transpose_tile_row); transposing, each thread
// turns one 4 x 4 micro-tile of codes into four packed words of the transposed copy
// (transpose_micro_tile). Rows of the shared tile are 17 words: both steps are free of bank conflicts.
inline constexpr int transpose_tile = 64;
inline constexpr int transpose_threads = 256;
inline constexpr int transpose_lanes = transpose_tile / 4;  // 16 threads per tile row
inline constexpr int transpose_rows_per_pass = transpose_threads / transpose_lanes;  // 16
inline constexpr int transpose_passes = transpose_tile / transpose_rows_per_pass;    // 4
inline constexpr int transpose_tile_words = transpose_tile / 4 + 1;                  // words per shared row

// The tile row that thread group `group` (0..15) casts in pass `pass` (0..3). The two half-warps of
// a warp take rows 16 apart: with 17-word rows their word stores then fall on 32 different banks
// (neighbouring rows would share one). Over the four passes the groups cover the 64 rows once.
__host__ __device__ constexpr int transpose_tile_row(int group, int pass) {
  return group / 2 + 16 * (group % 2) + 32 * (pass % 2) + 8 * (pass / 2);
}

// The micro-tile thread `thread` (0..255) transposes: transpose_micro_tile, two steps' worth of
// the 128 x 128 kernel's mapping spread over the block's eight warps.
__host__ __device__ inline micro_tile cast_transpose_micro_tile(int thread) {
  const int warp = thread / 32;
  return transpose_micro_tile(warp / 2, thread % 32, warp % 2);
}

// out[r][c] = out_t[c][r] = FP8(in[r][c] * scale); in is rows x cols, row-major.
// The two sides take their 4-wide accesses independently, so that an odd dimension slows only its
// own side: `row_vector` (cols a multiple of 4, in aligned to 4 elements, out to 4 bytes) for the
// loads and the row-major stores, `column_vector` (rows a multiple of 4, out_t aligned to 4 bytes)
// for the transposed stores; each applies to the tiles wholly inside the matrix.
template <class Format, class T, bool WithAmax>
__global__ void __launch_bounds__(transpose_threads)
    cast_transpose_kernel(const T* __restrict__ in, std::size_t rows, std::size_t cols, bool row_vector,
                          bool column_vector, scale_source source, float* amax,
                          std::uint8_t* __restrict__ out, std::uint8_t* __restrict__ out_t) {
  __shared__ std::uint32_t tile[transpose_tile * transpose_tile_words];
  std::uint8_t* const tile_bytes = reinterpret_cast<std::uint8_t*>(tile);
  constexpr int row_bytes = 4 * transpose_tile_words;
  const float scale = source.resolve();
  const std::size_t tiles_across = (cols + transpose_tile - 1) / transpose_tile;
  const std::size_t tiles = tiles_across * ((rows + transpose_tile - 1) / transpose_tile);
  const int lane = int(threadIdx.x) % transpose_lanes;
  const int group = int(threadIdx.x) / transpose_lanes;
  const micro_tile micro = cast_transpose_micro_tile(int(threadIdx.x));
  std::uint32_t bits = 0;

  for (std::size_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const std::size_t r0 = (t / tiles_across) * transpose_tile;
    const std::size_t c0 = (t % tiles_across) * transpose_tile;
    const bool inside = r0 + transpose_tile <= rows && c0 + transpose_tile <= cols;
    const bool full = row_vector && inside;
    const bool full_t = column_vector && inside;  // every code of the tile is in shared memory

    // Rows of the tile: cast, store row-major, keep the codes in shared memory. A full tile loads
    // all its rows first (four loads in flight per thread), a partial one goes element by element.
    const int tc = 4 * lane;
    if (full) {
      float4 v[transpose_passes];
#pragma unroll
      for (int pass = 0; pass < transpose_passes; ++pass) {
        v[pass] =
            load4(in + (r0 + std::size_t(transpose_tile_row(group, pass))) * cols + c0 + std::size_t(tc));
      }
#pragma unroll
      for (int pass = 0; pass < transpose_passes; ++pass) {
        const int tr = transpose_tile_row(group, pass);
        if constexpr (WithAmax) bits = max(bits, amax_bits(v[pass]));
        const packed_x4 codes = scaled_codes_x4<Format>(v[pass], scale);
        *reinterpret_cast<std::uint32_t*>(out + (r0 + std::size_t(tr)) * cols + c0 + std::size_t(tc)) = codes;
        tile[tr * transpose_tile_words + lane] = codes;
      }
    } else {
      for (int pass = 0; pass < transpose_passes; ++pass) {
        const int tr = transpose_tile_row(group, pass);
        const std::size_t r = r0 + std::size_t(tr);
        const std::size_t c = c0 + std::size_t(tc);
        for (int j = 0; j < 4; ++j) {
          if (r < rows && c + j < cols) {
            const float x = widen(in[r * cols + c + j]);
            if constexpr (WithAmax) bits = max(bits, amax_bits(x));
            const auto code = scaled_code<Format>(x, scale);
            out[r * cols + c + j] = code;
            tile_bytes[tr * row_bytes + tc + j] = code;
          }
        }
      }
    }
    __syncthreads();

    // Columns of the tile become rows of out_t.
    if (full_t) {
      // One 4 x 4 micro-tile per thread: four words read, four packed words written.
      const std::uint32_t* from = tile + 4 * micro.row_group * transpose_tile_words + micro.column_word;
      std::uint32_t columns[4];
      transpose_4x4_bytes(from[0], from[transpose_tile_words], from[2 * transpose_tile_words],
                          from[3 * transpose_tile_words], columns);
      const std::size_t r = r0 + std::size_t(4 * micro.row_group);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const std::size_t c = c0 + std::size_t(4 * micro.column_word + k);
        *reinterpret_cast<std::uint32_t*>(out_t + c * rows + r) = columns[k];
      }
    } else {
      // A tile at the edge, or rows not a multiple of 4: byte by byte, four rows of a column per thread.
      for (int pass = 0; pass < transpose_passes; ++pass) {
        const int tc_t = group + pass * transpose_rows_per_pass;
        const int tr = 4 * lane;
        const std::size_t c = c0 + std::size_t(tc_t);
        const std::size_t r = r0 + std::size_t(tr);
        for (int j = 0; j < 4; ++j) {
          if (c < cols && r + j < rows) out_t[c * rows + r + j] = tile_bytes[(tr + j) * row_bytes + tc_t];
        }
      }
    }
    __syncthreads();
  }
  if constexpr (WithAmax) {
    bits = block_max<transpose_threads>(bits);
    if (threadIdx.x == 0) atomic_max_amax(amax, bits);
  }
}

template <class T>
void launch_cast_transpose(const T* in, std::size_t rows, std::size_t cols, fp8_format format,
                           const scale_source& source, float* amax, std::uint8_t* out, std::uint8_t* out_t,
                           cudaStream_t stream) {
  const bool row_vector = cols % 4 == 0 && is_aligned(in, 4 * sizeof(T)) && is_aligned(out, 4);
  const bool column_vector = rows % 4 == 0 && is_aligned(out_t, 4);
  const std::size_t tiles =
      ((rows + transpose_tile - 1) / transpose_tile) * ((cols + transpose_tile - 1) / transpose_tile);
  const unsigned grid = grid_for(tiles, 1);
  visit_format(format, [&](auto descriptor) {
    using format_t = decltype(descriptor);
    if (amax != nullptr) {
      cast_transpose_kernel<format_t, T, true><<<grid, transpose_threads, 0, stream>>>(
          in, rows, cols, row_vector, column_vector, source, amax, out, out_t);
    } else {
      cast_transpose_kernel<format_t, T, false><<<grid, transpose_threads, 0, stream>>>(
          in, rows, cols, row_vector, column_vector, source, nullptr, out, out_t);
    }
  });
  check_launch("fp8::cuda::detail::cast_transpose_kernel", rows, cols, grid, transpose_threads);
}

inline void check_matrix(const void* in, const void* out, const void* out_t, std::size_t rows,
                         std::size_t cols, fp8_format format, const char* function) {
  (void)checked_size(rows, cols, function);
  check_pointer(in, rows * cols, function, "in");
  check_pointer(out, rows * cols, function, "out");
  check_pointer(out_t, rows * cols, function, "out_t");
  check_format(format, function);
}

}  // namespace detail

// Delayed-scaling cast of a rows x cols row-major matrix with its transpose, in one read:
//   out[r * cols + c] = out_t[c * rows + r] = FP8(in[r * cols + c] * *s.scale)  (nearest even, saturating)
//   *s.amax = max(*s.amax, amax(in)); *s.scale_inv = 1 / *s.scale   (each when set)
// out is what fp8::cuda::quantize writes; out_t is its transpose (cols x rows, row-major). Shapes
// and pointers that are multiples of 4 take the vector path. Throws as fp8::cuda::quantize does.
template <class T>
void quantize_transpose(const T* in, std::size_t rows, std::size_t cols, fp8_format format,
                        const tensor_scale& s, std::uint8_t* out, std::uint8_t* out_t,
                        cudaStream_t stream = nullptr) {
  static_assert(is_element_v<T>, "float, bfloat16 or half elements");
  detail::check_matrix(in, out, out_t, rows, cols, format, "fp8::cuda::quantize_transpose");
  if (rows * cols == 0 && s.scale_inv == nullptr) return;
  detail::launch_cast_transpose(in, rows, cols, format, detail::scale_source::given(s.scale, s.scale_inv),
                                s.amax, out, out_t, stream);
}

}  // namespace fp8::cuda
