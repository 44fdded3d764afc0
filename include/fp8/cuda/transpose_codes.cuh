// fp8::cuda::transpose_codes: the transposed copy of FP8 codes that already exist, byte for byte,
// with the copies' inverse scale. A kernel of the caller's that writes a tensor can write its FP8
// codes itself (linear_layer::fp8_input); the layer then needs only their transpose for the backward
// product: a byte read and a byte written per element, against the two bytes read and two written
// of a cast + transpose from BF16, and the producer's own BF16 store of the tensor gone as well.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/transpose_codes.cuh contains device code: compile it with nvcc"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "block_quantize.cuh"
#include "launch.cuh"
#include "quantize.cuh"

namespace fp8::cuda {
namespace detail {

// A thread block per 128x128 block of codes (grid-stride), laid out as the block kernels': lane l
// reads columns 4l..4l+3 of rows w, w + 8, ..., w + 120 as one 32-bit word (`vector`: cols % 4 == 0
// and `in` 4-aligned; else byte by byte, 0 past the edge) into the shared tile, whose transpose
// store_transposed_block writes (4 codes per store where `packed_t`: rows % 4 == 0 and out_t
// 4-aligned, for blocks inside the matrix). Block 0 publishes 1 / scale into both inverse scales.
// (A template, as every kernel in these headers, so that translation units may share it.)
template <int Threads>
__global__ void __launch_bounds__(Threads)
    transpose_codes_kernel(const std::uint8_t* __restrict__ in, std::size_t rows, std::size_t cols,
                           bool vector, bool packed_t, const float* scale, float* scale_inv,
                           float* scale_inv_t, std::uint8_t* __restrict__ out_t) {
  static_assert(Threads == block_threads_2d, "the block kernels' layout: 8 warps x 16 passes");
  constexpr int warps = Threads / 32;
  __shared__ std::uint32_t tile[block_length * block_tile_words];
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const float inverse = 1.0f / read_scale(scale);  // as a cast with this scale computes it
    if (scale_inv != nullptr) *scale_inv = inverse;
    if (scale_inv_t != nullptr) *scale_inv_t = inverse;
  }
  const int lane = int(threadIdx.x) % 32;
  const int warp = int(threadIdx.x) / 32;
  const std::size_t block_cols = (cols + block_length - 1) / block_length;
  const std::size_t blocks = ((rows + block_length - 1) / block_length) * block_cols;
  for (std::size_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const std::size_t r0 = (b / block_cols) * block_length;
    const std::size_t c0 = (b % block_cols) * block_length;
    const std::size_t c = c0 + 4 * std::size_t(lane);
#pragma unroll 4
    for (int pass = 0; pass < block_passes_2d; ++pass) {
      const int row = warp + pass * warps;
      const std::size_t r = r0 + std::size_t(row);
      std::uint32_t word = 0;  // byte k: column c + k (little-endian, as convert_x4 packs them)
      if (r < rows) {
        const std::uint8_t* at = in + r * cols + c;
        if (vector && c + 4 <= cols) {
          word = *reinterpret_cast<const std::uint32_t*>(at);
        } else {
          for (int k = 0; k < 4; ++k) {
            if (c + std::size_t(k) < cols) word |= std::uint32_t(at[k]) << (8 * k);
          }
        }
      }
      tile[row * block_tile_words + lane] = word;  // bytes past the edge are never read
    }
    __syncthreads();
    const bool inside = r0 + block_length <= rows && c0 + block_length <= cols;
    store_transposed_block(tile, r0, c0, rows, cols, inside && packed_t, out_t);
    __syncthreads();  // the tile is refilled by the next block of this grid-stride loop
  }
}

}  // namespace detail

// out_t (cols x rows) = codes (rows x cols) transposed, byte for byte, on `stream`; and, each when
// set, *scale_inv = *scale_inv_t = 1 / *scale (scale in device memory, null meaning 1): the inverse
// scales of both copies, as a cast with that scale writes them. Throws fp8::invalid_argument on null
// matrices (of a non-empty shape), fp8::cuda_error if the launch fails.
inline void transpose_codes(const std::uint8_t* codes, std::size_t rows, std::size_t cols,
                            std::uint8_t* out_t, const float* scale, float* scale_inv, float* scale_inv_t,
                            cudaStream_t stream = nullptr) {
  constexpr const char* function = "fp8::cuda::transpose_codes";
  (void)detail::checked_size(rows, cols, function);
  detail::require(rows == 0 || cols == 0 || (codes != nullptr && out_t != nullptr), function,
                  "codes and out_t must be set for a non-empty matrix");
  const std::size_t blocks =
      ((rows + block_length - 1) / block_length) * ((cols + block_length - 1) / block_length);
  if (blocks == 0 && scale_inv == nullptr && scale_inv_t == nullptr) return;
  const bool vector = cols % 4 == 0 && detail::is_aligned(codes, 4);
  const bool packed_t = rows % 4 == 0 && detail::is_aligned(out_t, 4);
  const unsigned grid = detail::grid_for(blocks, 1);
  detail::transpose_codes_kernel<detail::block_threads_2d><<<grid, detail::block_threads_2d, 0, stream>>>(
      codes, rows, cols, vector, packed_t, scale, scale_inv, scale_inv_t, out_t);
  detail::check_launch("fp8::cuda::detail::transpose_codes_kernel", rows, cols, grid,
                       detail::block_threads_2d);
}

}  // namespace fp8::cuda
