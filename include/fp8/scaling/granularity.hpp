// Scaling granularities (how many elements share one scale) and where each scale lives in the
// scale buffer: the layouts cuBLASLt's scale modes read, so CPU-made scales feed a GEMM unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "../error.hpp"

#include "../config.hpp"

namespace fp8 {

enum class granularity : std::uint8_t {
  per_tensor = 0,     // one scale (cuBLASLt SCALAR_32F)
  per_row = 1,        // one scale per row (cuBLASLt OUTER_VEC_32F)
  tile_1x128 = 2,     // one scale per 128 consecutive elements of a row (cuBLASLt VEC128_32F)
  block_128x128 = 3,  // one scale per 128x128 block (cuBLASLt BLK128x128_32F)
  mx_1x32 = 4,        // one E8M0 power of two per 32 elements of a row (OCP MX v1.0; VEC32_UE8M0)
};

constexpr bool is_valid(granularity g) noexcept {
  return g == granularity::per_tensor || g == granularity::per_row || g == granularity::tile_1x128 ||
         g == granularity::block_128x128 || g == granularity::mx_1x32;
}

constexpr const char* granularity_name(granularity g) noexcept {
  switch (g) {
    case granularity::per_tensor: return "per_tensor";
    case granularity::per_row: return "per_row";
    case granularity::tile_1x128: return "tile_1x128";
    case granularity::block_128x128: return "block_128x128";
    case granularity::mx_1x32: break;
  }
  return "mx_1x32";
}

// Block edges, as in DeepSeek-V3 / Transformer Engine (128) and OCP MX v1.0 (32).
inline constexpr std::size_t tile_length = 128;
inline constexpr std::size_t block_length = 128;
inline constexpr std::size_t mx_block_length = 32;
// cuBLASLt and Transformer Engine align every column of 1x128 scales and every row of 128x128
// scales to 16 bytes, i.e. 4 floats; the padding entries are written as 0.
inline constexpr std::size_t scale_alignment = 16 / sizeof(float);

// Where the scales of a rows x cols row-major matrix live. The matrix is cut into a grid of blocks
// (grid_rows x grid_cols; blocks at the right and bottom edges may be smaller); index(i, j) is the
// position of block (i, j)'s scale in the buffer, which holds `count` entries (padding included).
//
//   per_tensor     1 x 1 grid; count 1.
//   per_row        rows x 1 grid; scale of row r at r.
//   tile_1x128     rows x ceil(cols/128) grid, stored column-major ("outer-dimension major") with
//                  the row count padded to a multiple of 4: tile (r, t) at t * round_up(rows, 4) + r.
//                  Example: rows 3, cols 300 -> 3 tiles per row, ld 4, count 12; tile (2, 1) at 6.
//   block_128x128  ceil(rows/128) x ceil(cols/128) grid, row-major with each row padded to a
//                  multiple of 4: block (i, j) at i * round_up(ceil(cols/128), 4) + j.
//   mx_1x32        rows x ceil(cols/32) grid of E8M0 codes, row-major, unpadded: (r, k) at
//                  r * ceil(cols/32) + k. (cuBLASLt on Blackwell wants these swizzled into 128x4
//                  tiles; that rearrangement is the GEMM wrapper's job.)
struct scale_layout {
  granularity kind;
  std::size_t rows;
  std::size_t cols;
  std::size_t block_rows;  // full block height
  std::size_t block_cols;  // full block width
  std::size_t grid_rows;
  std::size_t grid_cols;
  std::size_t leading;  // stride of the outer dimension of the scale buffer
  std::size_t count;    // entries to allocate

  // Host and device (the quantize kernels index with this same function).
  FP8_HOST_DEVICE constexpr std::size_t index(std::size_t block_row, std::size_t block_col) const noexcept {
    switch (kind) {
      case granularity::per_tensor: return 0;
      case granularity::per_row: return block_row;
      case granularity::tile_1x128: return block_col * leading + block_row;
      case granularity::block_128x128:
      case granularity::mx_1x32: break;
    }
    return block_row * leading + block_col;
  }
  // The scale that applies to element (row, col): index(row / block_rows, col / block_cols), with
  // each kind's block size as a constant, so that the divisions are shifts (the device dequantize
  // calls this per four elements, where a 64-bit division costs more than the memory traffic).
  FP8_HOST_DEVICE constexpr std::size_t index_of_element(std::size_t row, std::size_t col) const noexcept {
    switch (kind) {
      case granularity::per_tensor: return 0;
      case granularity::per_row: return row;
      case granularity::tile_1x128: return index(row, col / tile_length);
      case granularity::block_128x128: return index(row / block_length, col / block_length);
      case granularity::mx_1x32: break;
    }
    return index(row, col / mx_block_length);
  }
};

namespace detail {
// Neither wraps around: ceil_div is exact for every a, and round_up reports whether the rounded value
// fits in size_t.
constexpr std::size_t ceil_div(std::size_t a, std::size_t b) noexcept { return a / b + (a % b != 0 ? 1 : 0); }
constexpr bool round_up_fits(std::size_t a, std::size_t b) noexcept {
  return ceil_div(a, b) <= std::numeric_limits<std::size_t>::max() / b;
}
constexpr std::size_t round_up(std::size_t a, std::size_t b) noexcept { return ceil_div(a, b) * b; }
constexpr bool product_fits(std::size_t a, std::size_t b) noexcept {
  return b == 0 || a <= std::numeric_limits<std::size_t>::max() / b;
}

[[noreturn]] inline void throw_scale_count_overflow(granularity g, std::size_t rows, std::size_t cols) {
  throw invalid_argument(std::string("fp8::make_scale_layout: the ") + granularity_name(g) +
                         " scale count of a " + std::to_string(rows) + " x " + std::to_string(cols) +
                         " matrix overflows size_t");
}
}  // namespace detail

// The layout of the scales of a rows x cols matrix under granularity `g` (see scale_layout). Throws
// fp8::invalid_argument if the number of scale entries (padding included) does not fit in size_t.
constexpr scale_layout make_scale_layout(granularity g, std::size_t rows, std::size_t cols) {
  using detail::ceil_div;
  using detail::round_up;
  // A block is never taken as 0 wide, so index_of_element never divides by zero on empty matrices.
  const std::size_t all_rows = rows == 0 ? 1 : rows;
  const std::size_t all_cols = cols == 0 ? 1 : cols;
  switch (g) {
    case granularity::per_tensor: return {g, rows, cols, all_rows, all_cols, 1, 1, 1, 1};
    case granularity::per_row: return {g, rows, cols, 1, all_cols, rows, 1, 1, rows};
    case granularity::tile_1x128: {
      const std::size_t tiles = ceil_div(cols, tile_length);
      if (tiles == 0) return {g, rows, cols, 1, tile_length, rows, 0, rows, 0};  // no columns: no scales
      if (!detail::round_up_fits(rows, scale_alignment)) detail::throw_scale_count_overflow(g, rows, cols);
      const std::size_t leading = round_up(rows, scale_alignment);
      if (!detail::product_fits(tiles, leading)) detail::throw_scale_count_overflow(g, rows, cols);
      return {g, rows, cols, 1, tile_length, rows, tiles, leading, tiles * leading};
    }
    case granularity::block_128x128: {
      const std::size_t grid_rows = ceil_div(rows, block_length);
      const std::size_t grid_cols = ceil_div(cols, block_length);
      const std::size_t leading = round_up(grid_cols, scale_alignment);  // grid_cols <= SIZE_MAX / 128: fits
      if (!detail::product_fits(grid_rows, leading)) detail::throw_scale_count_overflow(g, rows, cols);
      return {g, rows, cols, block_length, block_length, grid_rows, grid_cols, leading, grid_rows * leading};
    }
    case granularity::mx_1x32: break;
  }
  const std::size_t blocks = ceil_div(cols, mx_block_length);
  if (!detail::product_fits(rows, blocks)) detail::throw_scale_count_overflow(g, rows, cols);
  return {g, rows, cols, 1, mx_block_length, rows, blocks, blocks, rows * blocks};
}

// Number of scale entries (floats, or E8M0 bytes for mx_1x32) to allocate. Throws
// fp8::invalid_argument if it does not fit in size_t.
constexpr std::size_t scale_count(granularity g, std::size_t rows, std::size_t cols) {
  return make_scale_layout(g, rows, cols).count;
}

}  // namespace fp8
