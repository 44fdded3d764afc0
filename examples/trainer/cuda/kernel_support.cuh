// What every kernel of the CUDA trainer shares: the BF16 rounding of stored values, element loads
// and stores over float or BF16 buffers, warp and block reductions, grid sizes and the launch check
// (the last two are the library's own helpers).
#pragma once

#if !defined(__CUDACC__)
#error "kernel_support.cuh holds device code: compile it with nvcc"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include <fp8/cuda/convert.cuh>
#include <fp8/cuda/element.cuh>
#include <fp8/cuda/launch.cuh>
#include <fp8/format.hpp>

#include "../precision.hpp"

namespace trainer::cuda::detail {

using fp8::cuda::detail::block_threads;  // 256: threads per block of the element-wise kernels
using fp8::cuda::detail::check_launch;
using fp8::cuda::detail::grid_2d;   // two axes, each grid-strided; the test cap counts both
using fp8::cuda::detail::grid_for;  // blocks for a grid-stride loop, capped at 8 per SM
using fp8::cuda::detail::require;
using fp8::detail::check_pointer;  // a null pointer with work to do is an error naming it

inline constexpr int warp_size = 32;
inline constexpr unsigned full_mask = 0xffffffffu;  // every lane takes part in the shuffle
inline constexpr int warps_per_block = block_threads / warp_size;

// Blocks for a grid-stride loop over `rows` rows handled by one block each (or one warp each with
// `rows_per_block` = warps_per_block): never more than the work, never more than grid_for's cap
// (grid_cap_for_testing included, so that tests reach the loops over several rows per block).
inline unsigned grid_for_rows(std::size_t rows, int rows_per_block = 1) {
  return grid_for(rows, rows_per_block);
}

// BF16's canonical NaN, widened to a float's bits (0x7FC00000), as fp8::bfloat16 produces it.
inline constexpr std::uint32_t bf16_canonical_nan_bits = std::uint32_t(fp8::bf16_format::canonical_nan) << 16;

// The nearest BF16 value (ties to even) as a float: the hardware conversion (cvt.rn.bf16.f32), with
// NaN made canonical so that the bits equal trainer::round_to_bf16 and fp8::bfloat16 on the host.
__device__ __forceinline__ float round_to_bf16(float x) {
  if (isnan(x)) return __uint_as_float(bf16_canonical_nan_bits);
  return __bfloat162float(__float2bfloat16_rn(x));
}

// A freshly computed value as it is stored: rounded to BF16 in bf16 and fp8 runs (the CPU trainer's
// store(), applied per element where the kernel writes it).
__device__ __forceinline__ float store_value(storage where, float x) {
  return where == storage::bf16 ? round_to_bf16(x) : x;
}

// An element of a buffer that holds floats (any run) or BF16 (raw __nv_bfloat16: the tensors that
// bf16 and fp8 runs keep as the linear layers read them), as a kernel templated over the element
// type reads it: widening BF16 is exact.
__device__ __forceinline__ float load_element(const float* p, std::size_t i) { return p[i]; }
__device__ __forceinline__ float load_element(const __nv_bfloat16* p, std::size_t i) {
  return __bfloat162float(p[i]);
}

// One FP8 code of a linear layer's operand that its producer writes as the layer's codes
// (fp8_output.hpp), as an element type of its own, so that the kernels templated over their output's
// element type take it. Format: fp8::e4m3_format or fp8::e5m2_format.
template <class Format>
struct fp8_code {
  std::uint8_t bits;
};

// What store_element needs beside the value: the storage of float results, the scale of FP8 codes
// (the layer's, read once per thread from fp8_output::scale). Implicit from a storage, which is
// all the float and BF16 forms need.
struct store_rule {
  storage where = storage::fp32;
  float scale = 1.0f;
  __host__ __device__ store_rule(storage stored) : where(stored) {}  // NOLINT: implicit by design
  __host__ __device__ store_rule(storage stored, float code_scale) : where(stored), scale(code_scale) {}
};

// A result as it is stored. Floats: per `where`. BF16 (whose launchers pass storage::bf16): the
// float form's BF16 value, narrowed exactly; the bits are those to_bf16 makes of the float form, so
// a linear layer reads the same operand either way. Returns the value stored, as a float (exact;
// for FP8 codes, the BF16 value they were made from): what an amax_tracker of the tensor adds.
__device__ __forceinline__ float store_element(float* p, std::size_t i, float x, store_rule rule) {
  const float stored = store_value(rule.where, x);
  p[i] = stored;
  return stored;
}
__device__ __forceinline__ float store_element(__nv_bfloat16* p, std::size_t i, float x, store_rule) {
  const float stored = round_to_bf16(x);
  // Not __float2bfloat16_rn(stored): the hardware conversion writes a NaN as 0x7FFF, not the
  // canonical 0x7FC0 that round_to_bf16 kept in the float.
  p[i] = fp8::cuda::narrow<__nv_bfloat16>(stored);
  return stored;
}
// FP8 codes: the BF16 form's value (so the same amax), through the library's scaled cast of one
// value (fp8::cuda::scaled_code): the code the linear layer's cast makes of the BF16 form's output.
template <class Format>
__device__ __forceinline__ float store_element(fp8_code<Format>* p, std::size_t i, float x, store_rule rule) {
  const float stored = round_to_bf16(x);
  p[i].bits = fp8::cuda::scaled_code<Format>(stored, rule.scale);
  return stored;
}

// Butterfly reductions over a full warp: every lane must call them (full mask), and every lane gets
// the result. The order of the additions is fixed, so results are reproducible run to run.
template <class T>
__device__ __forceinline__ T warp_sum(T value) {
  for (int offset = warp_size / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(full_mask, value, offset);
  return value;
}
__device__ __forceinline__ float warp_max(float value) {
  for (int offset = warp_size / 2; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(full_mask, value, offset));
  }
  return value;
}

// Sum over the whole block; every thread gets the result. blockDim.x must be a multiple of 32 (at
// most 1024) and every thread of the block must call it. `scratch`: 32 elements of shared memory.
template <class T>
__device__ T block_sum(T value, T* scratch) {
  const int lane = int(threadIdx.x) % warp_size;
  const int warp = int(threadIdx.x) / warp_size;
  const int warps = int(blockDim.x) / warp_size;
  value = warp_sum(value);
  __syncthreads();  // a previous call's readers are done with scratch
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  T total = lane < warps ? scratch[lane] : T(0);
  return warp_sum(total);
}

}  // namespace trainer::cuda::detail
