// The block-scale layout cuBLASLt reads on Blackwell for MXFP8 / MXFP4 (VEC32_UE8M0) and NVFP4
// (VEC16_UE4M3) operands: the cuBLAS documentation's "1D block scaling factors layout".
//
// The scales of an operand form a matrix S with one row per row of the operand (the outer dimension)
// and one column per block along K: S is rows x (K / block). cuBLASLt wants S cut into 128 x 4 tiles,
// tiles in row-major order (all tiles of rows 0..127 first), each tile stored as 512 contiguous bytes
// in which scale (r, c) of the tile (r < 128, c < 4) sits at byte
//     (r % 32) * 16 + (r / 32) * 4 + c
// i.e. the four 32-row slices of the tile are interleaved, so that one 16-byte load fetches the four
// K-scales of rows r, r + 32, r + 64, r + 96. S is padded with zero scales to a multiple of 128 rows
// and 4 columns. Example: rows = 256, K / block = 8 -> 2 x 2 tiles, 2048 bytes; scale (130, 5) is in
// tile (1, 1) at r = 2, c = 1: byte (1 * 2 + 1) * 512 + 2 * 16 + 0 * 4 + 1 = 1569.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../config.hpp"

namespace fp8 {

inline constexpr std::size_t swizzle_tile_rows = 128;
inline constexpr std::size_t swizzle_tile_cols = 4;
inline constexpr std::size_t swizzle_tile_bytes = swizzle_tile_rows * swizzle_tile_cols;  // 512

// Bytes of the swizzled (padded) scale buffer for a rows x scale_cols scale matrix.
FP8_HOST_DEVICE constexpr std::size_t swizzled_scale_bytes(std::size_t rows,
                                                           std::size_t scale_cols) noexcept {
  return (rows + swizzle_tile_rows - 1) / swizzle_tile_rows *
         ((scale_cols + swizzle_tile_cols - 1) / swizzle_tile_cols) * swizzle_tile_bytes;
}

// Where scale (row, col) goes in the swizzled buffer.
FP8_HOST_DEVICE constexpr std::size_t swizzled_scale_offset(std::size_t row, std::size_t col,
                                                            std::size_t scale_cols) noexcept {
  const std::size_t tiles_per_row = (scale_cols + swizzle_tile_cols - 1) / swizzle_tile_cols;
  const std::size_t tile = (row / swizzle_tile_rows) * tiles_per_row + col / swizzle_tile_cols;
  const std::size_t r = row % swizzle_tile_rows;
  const std::size_t c = col % swizzle_tile_cols;
  return tile * swizzle_tile_bytes + (r % 32) * 16 + (r / 32) * 4 + c;
}

// Rearranges a row-major rows x scale_cols scale matrix (as quantize_mx / quantize_nvfp4 write it)
// into the swizzled layout; the padding bytes are zero. `out` holds swizzled_scale_bytes(...) bytes.
inline void swizzle_block_scales(const std::uint8_t* scales, std::size_t rows, std::size_t scale_cols,
                                 std::uint8_t* out) noexcept {
  std::memset(out, 0, swizzled_scale_bytes(rows, scale_cols));
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < scale_cols; ++c)
      out[swizzled_scale_offset(r, c, scale_cols)] = scales[r * scale_cols + c];
  }
}

// The inverse, for reading scales back (padding dropped).
inline void unswizzle_block_scales(const std::uint8_t* swizzled, std::size_t rows, std::size_t scale_cols,
                                   std::uint8_t* scales) noexcept {
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < scale_cols; ++c)
      scales[r * scale_cols + c] = swizzled[swizzled_scale_offset(r, c, scale_cols)];
  }
}

}  // namespace fp8
