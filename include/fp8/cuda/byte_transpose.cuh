// Transposing FP8 codes in registers, four by four: the step both transposing casts (the per-tensor
// 64 x 64 cast_transpose and the 128 x 128 block kernel) take from their shared tile of codes to the
// packed 32-bit stores of the transposed copy. Host and device: the tests check it without a GPU.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/byte_transpose.cuh contains device code: compile it with nvcc"
#endif

#include <cstdint>

namespace fp8::cuda::detail {

// __byte_perm on the device, the same selection on the host (so the transpose below is tested on
// machines without a GPU): byte i of the result is byte (selector >> 4i) & 7 of the pair (y:x).
__host__ __device__ inline std::uint32_t byte_perm(std::uint32_t x, std::uint32_t y, std::uint32_t selector) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(x, y, selector);
#else
  const std::uint64_t pair = (std::uint64_t(y) << 32) | x;
  std::uint32_t result = 0;
  for (int i = 0; i < 4; ++i) {
    const unsigned source = (selector >> (4 * i)) & 7u;
    result |= std::uint32_t((pair >> (8 * source)) & 0xFFu) << (8 * i);
  }
  return result;
#endif
}

// Four words (rows r..r+3 of four columns) to four words (columns c..c+3 of four rows): word j of
// the result holds byte j of each input, in row order, i.e. column j's four codes.
__host__ __device__ inline void transpose_4x4_bytes(std::uint32_t r0, std::uint32_t r1, std::uint32_t r2,
                                                    std::uint32_t r3, std::uint32_t (&columns)[4]) {
  const std::uint32_t low01 = byte_perm(r0, r1, 0x5140);   // r0.b0 r1.b0 r0.b1 r1.b1
  const std::uint32_t high01 = byte_perm(r0, r1, 0x7362);  // r0.b2 r1.b2 r0.b3 r1.b3
  const std::uint32_t low23 = byte_perm(r2, r3, 0x5140);
  const std::uint32_t high23 = byte_perm(r2, r3, 0x7362);
  columns[0] = byte_perm(low01, low23, 0x5410);
  columns[1] = byte_perm(low01, low23, 0x7632);
  columns[2] = byte_perm(high01, high23, 0x5410);
  columns[3] = byte_perm(high01, high23, 0x7632);
}

// Which 4 x 4 micro-tile of a tile of codes a thread transposes in step g: its row group (rows
// 4·row_group..+3) and column word (columns 4·column_word..+3). Lanes 0-7 take consecutive row
// groups, so eight lanes write 32 contiguous bytes of one row of the transposed copy, and, with
// tile rows of 4k + 1 words, the 32 lanes of a warp read 32 different banks. The 128 x 128 tile
// takes 8 warps x 4 steps; the 64 x 64 tile gives warp w step w % 2 of warp w / 2.
struct micro_tile {
  int row_group;
  int column_word;
};
__host__ __device__ inline micro_tile transpose_micro_tile(int warp, int lane, int g) {
  return {lane % 8 + 8 * g, lane / 8 + 4 * warp};
}

}  // namespace fp8::cuda::detail
