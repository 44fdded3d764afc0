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
#include "amax.cuh"
#include "convert.cuh"
#include "element.cuh"
#include "launch.cuh"
#include "quantize.cuh"
#include "scale.cuh"

namespace fp8::cuda {
namespace detail {

// The scale layout's index arithmetic, on the device (fp8::scale_layout::index for these kinds).
struct device_scale_layout {
  std::size_t grid_cols;
  std::size_t leading;
  std::size_t grid_rows;
  granularity kind;

  __device__ std::size_t index(std::size_t block_row, std::size_t block_col) const {
    switch (kind) {
      case granularity::per_tensor: return 0;
      case granularity::per_row: return block_row;
      case granularity::tile_1x128: return block_col * leading + block_row;
      default: return block_row * leading + block_col;
    }
  }
};

inline device_scale_layout to_device(const scale_layout& layout) {
  return {layout.grid_cols, layout.leading, layout.grid_rows, layout.kind};
}

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

template <class Format>
__device__ __forceinline__ void store4_guarded(std::uint8_t* row, std::size_t c, std::size_t cols, bool vector,
                                               float4 scaled) {
  const packed_x4 codes = convert_x4<Format, rounding::nearest_even, overflow::saturate>(scaled);
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
    row_quantize_kernel(const T* __restrict__ in, std::size_t rows, std::size_t cols, bool vector, scale_rule rule,
                        std::uint8_t* __restrict__ out, float* scale_inv, float* amax) {
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
      store4_guarded<Format>(out + r * cols, c, cols, vector, scale4(load4_guarded(row, c, cols, vector), scale));
    }
    if (threadIdx.x == 0) scale_inv[r] = 1.0f / scale;
  }
  if (threadIdx.x == 0) atomic_max_amax(amax, tensor_bits);
}

// 1x128 tiles: a warp per tile (32 lanes x 4 elements), tiles in row order (grid-stride over warps).
template <class Format, class T, int Threads>
__global__ void __launch_bounds__(Threads)
    tile_quantize_kernel(const T* __restrict__ in, std::size_t rows, std::size_t cols, bool vector, scale_rule rule,
                         device_scale_layout layout, std::uint8_t* __restrict__ out, float* scale_inv, float* amax) {
  constexpr int warps = Threads / 32;
  const int lane = int(threadIdx.x) % 32;
  const std::size_t tiles = rows * layout.grid_cols;
  const std::size_t total_warps = std::size_t(gridDim.x) * warps;
  std::uint32_t tensor_bits = 0;
  const auto tile_column = [&](std::size_t t) { return (t % layout.grid_cols) * tile_length + 4 * std::size_t(lane); };
  const auto finish = [&](std::size_t t, float4 v) {
    const std::size_t r = t / layout.grid_cols;
    const std::size_t tile = t % layout.grid_cols;
    const std::uint32_t bits = warp_max(amax_bits(v));
    tensor_bits = max(tensor_bits, bits);
    const float scale = scale_from_amax(__uint_as_float(bits), rule, 1.0f);
    store4_guarded<Format>(out + r * cols, tile_column(t), cols, vector, scale4(v, scale));
    if (lane == 0) {
      scale_inv[layout.index(r, tile)] = 1.0f / scale;
      if (r + 1 == rows) {  // the padding rows of this tile column are written as 0, as on the CPU
        for (std::size_t p = rows; p < layout.leading; ++p) scale_inv[layout.index(p, tile)] = 0.0f;
      }
    }
  };
  // Two tiles per warp and step (one grid apart), so that two loads per thread are in flight.
  for (std::size_t t = blockIdx.x * std::size_t(warps) + threadIdx.x / 32; t < tiles; t += 2 * total_warps) {
    const std::size_t t2 = t + total_warps;
    const float4 v = load4_guarded(in + (t / layout.grid_cols) * cols, tile_column(t), cols, vector);
    const float4 v2 = t2 < tiles ? load4_guarded(in + (t2 / layout.grid_cols) * cols, tile_column(t2), cols, vector)
                                 : float4{0.0f, 0.0f, 0.0f, 0.0f};
    finish(t, v);
    if (t2 < tiles) finish(t2, v2);
  }
  tensor_bits = block_max<Threads>(tensor_bits);
  if (threadIdx.x == 0) atomic_max_amax(amax, tensor_bits);
}

// 128x128 blocks: a thread block per block, the block's elements held in registers between the amax
// and the cast (one read). 32 lanes x 4 columns span 128 columns; 8 warps x 16 passes span 128 rows.
inline constexpr int block_threads_2d = 256;
inline constexpr int block_passes_2d = int(block_length) / (block_threads_2d / 32);

template <class Format, class T>
__global__ void __launch_bounds__(block_threads_2d)
    block_quantize_kernel(const T* __restrict__ in, std::size_t rows, std::size_t cols, bool vector, scale_rule rule,
                          device_scale_layout layout, std::uint8_t* __restrict__ out, float* scale_inv, float* amax) {
  const int lane = int(threadIdx.x) % 32;
  const int warp = int(threadIdx.x) / 32;
  constexpr int warps = block_threads_2d / 32;
  const std::size_t blocks = layout.grid_rows * layout.grid_cols;
  std::uint32_t tensor_bits = 0;
  for (std::size_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const std::size_t i = b / layout.grid_cols;
    const std::size_t j = b % layout.grid_cols;
    const std::size_t c = j * block_length + 4 * std::size_t(lane);
    const auto row_of = [&](int pass) { return i * block_length + std::size_t(warp + pass * warps); };
    // A whole, aligned block keeps its values in registers (one read); an edge block reads twice
    // with guards instead, so that the common path stays lean. `whole` is the same for the block.
    const bool whole = vector && (i + 1) * block_length <= rows && (j + 1) * block_length <= cols;
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
        const packed_x4 codes = convert_x4<Format, rounding::nearest_even, overflow::saturate>(scale4(v[pass], scale));
        *reinterpret_cast<std::uint32_t*>(out + row_of(pass) * cols + c) = codes;
      }
    } else {
      std::uint32_t bits = 0;
#pragma unroll 1
      for (int pass = 0; pass < block_passes_2d; ++pass) {
        if (row_of(pass) < rows) bits = max(bits, amax_bits(load4_guarded(in + row_of(pass) * cols, c, cols, vector)));
      }
      bits = block_max<block_threads_2d>(bits);
      tensor_bits = max(tensor_bits, bits);
      scale = scale_from_amax(__uint_as_float(bits), rule, 1.0f);
#pragma unroll 1
      for (int pass = 0; pass < block_passes_2d; ++pass) {
        const std::size_t r = row_of(pass);
        if (r < rows) {
          store4_guarded<Format>(out + r * cols, c, cols, vector, scale4(load4_guarded(in + r * cols, c, cols, vector), scale));
        }
      }
    }
    if (threadIdx.x == 0) {
      scale_inv[layout.index(i, j)] = 1.0f / scale;
      if (j + 1 == layout.grid_cols) {  // padding of this scale row, 0 as on the CPU
        for (std::size_t p = layout.grid_cols; p < layout.leading; ++p) scale_inv[layout.index(i, p)] = 0.0f;
      }
    }
  }
  if (threadIdx.x == 0) atomic_max_amax(amax, tensor_bits);
}

template <class T>
void launch_block_quantize(const T* in, std::size_t rows, std::size_t cols, fp8_format format, const scale_rule& rule,
                           const scale_layout& layout, std::uint8_t* out, float* scale_inv, float* amax,
                           cudaStream_t stream) {
  const bool vector = cols % 4 == 0 && is_aligned(in, 4 * sizeof(T)) && is_aligned(out, 4);
  const device_scale_layout device_layout = to_device(layout);
  dispatch_format(format, [&](auto descriptor) {
    using format_t = decltype(descriptor);
    switch (layout.kind) {
      case granularity::per_row:
        row_quantize_kernel<format_t, T, block_threads>
            <<<grid_for(rows, 1), block_threads, 0, stream>>>(in, rows, cols, vector, rule, out, scale_inv, amax);
        break;
      case granularity::tile_1x128: {
        constexpr int warps = block_threads / 32;
        tile_quantize_kernel<format_t, T, block_threads><<<grid_for(rows * layout.grid_cols, warps), block_threads, 0, stream>>>(
            in, rows, cols, vector, rule, device_layout, out, scale_inv, amax);
        break;
      }
      default:
        block_quantize_kernel<format_t, T><<<grid_for(layout.grid_rows * layout.grid_cols, 1), block_threads_2d, 0, stream>>>(
            in, rows, cols, vector, rule, device_layout, out, scale_inv, amax);
        break;
    }
  });
  check_launch("fp8::cuda::detail::block_quantize kernels");
}

// out = T(decode(code) * scale_inv of the element's block), four elements of a row per step.
template <class Format, class T, int Threads>
__global__ void __launch_bounds__(Threads)
    block_dequantize_kernel(const std::uint8_t* __restrict__ in, std::size_t rows, std::size_t cols, bool vector,
                            device_scale_layout layout, std::size_t block_rows, std::size_t block_cols,
                            const float* scale_inv, T* __restrict__ out) {
  __shared__ float table[byte_codes];
  fill_decode_table<Format>(table);
  const std::size_t quads_per_row = (cols + 3) / 4;
  const std::size_t quads = rows * quads_per_row;
  for (std::size_t q = blockIdx.x * std::size_t(Threads) + threadIdx.x; q < quads; q += std::size_t(gridDim.x) * Threads) {
    const std::size_t r = q / quads_per_row;
    const std::size_t c = 4 * (q % quads_per_row);
    // Block widths (1, 128, cols) are multiples of 4 or the whole row, so the 4 share one scale.
    const float s = scale_inv[layout.index(r / block_rows, c / block_cols)];
    const std::size_t base = r * cols + c;
    if (vector && c + 4 <= cols) {
      const std::uint32_t codes = *reinterpret_cast<const std::uint32_t*>(in + base);
      store4(out + base, float4{dequantize_one<Format>(table, codes & 0xFFu, s),
                                dequantize_one<Format>(table, (codes >> 8) & 0xFFu, s),
                                dequantize_one<Format>(table, (codes >> 16) & 0xFFu, s),
                                dequantize_one<Format>(table, codes >> 24, s)});
    } else {
      for (std::size_t j = 0; j < 4 && c + j < cols; ++j) out[base + j] = narrow<T>(dequantize_one<Format>(table, in[base + j], s));
    }
  }
}

}  // namespace detail
}  // namespace fp8::cuda
