// Amax on the device with the CPU layer's rules: |x| compared as float bits, NaN above +Inf above any
// finite value, every NaN reported as the canonical quiet NaN; block reductions and the amax kernel.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/amax.cuh contains device code: compile it with nvcc"
#endif

#include <cuda_runtime.h>

#include <cassert>
#include <cstddef>
#include <cstdint>

#include "../format.hpp"
#include "element.cuh"
#include "launch.cuh"

namespace fp8::cuda {
namespace detail {

using float_traits = format_traits<binary32_format>;

// |x| as float bits with every NaN made canonical (0x7FC00000), so that the maximum of these bits is
// the amax itself: 0x7FC00000 > +Inf (0x7F800000) > every finite magnitude.
__device__ __forceinline__ std::uint32_t amax_bits(float x) {
  const std::uint32_t magnitude = __float_as_uint(x) & std::uint32_t(float_traits::magnitude_mask);
  return magnitude > std::uint32_t(float_traits::infinity_code)
             ? std::uint32_t(binary32_format::canonical_nan)
             : magnitude;
}
__device__ __forceinline__ std::uint32_t amax_bits(float4 v) {
  return max(max(amax_bits(v.x), amax_bits(v.y)), max(amax_bits(v.z), amax_bits(v.w)));
}

// The maximum over each group of Lanes consecutive lanes (a power of two up to 32), returned to every
// lane of the group. All 32 lanes of the warp must call it.
template <int Lanes>
__device__ __forceinline__ std::uint32_t group_max(std::uint32_t bits) {
  static_assert(Lanes > 0 && Lanes <= 32 && (Lanes & (Lanes - 1)) == 0, "a power of two up to 32");
  for (int offset = Lanes / 2; offset > 0; offset /= 2)
    bits = max(bits, __shfl_xor_sync(0xFFFFFFFFu, bits, offset));
  return bits;
}
__device__ __forceinline__ std::uint32_t warp_max(std::uint32_t bits) { return group_max<32>(bits); }

// The maximum over the block, returned to every thread. All threads must call it.
template <int Threads>
__device__ __forceinline__ std::uint32_t block_max(std::uint32_t bits) {
  static_assert(Threads % 32 == 0 && Threads <= 1024, "whole warps");
  // Fewer threads would read partial[] entries no warp wrote, more would leave warps out.
  assert(blockDim.x == unsigned(Threads) && blockDim.y == 1 && blockDim.z == 1);
  constexpr int warps = Threads / 32;
  __shared__ std::uint32_t partial[warps];
  bits = warp_max(bits);
  const int warp = int(threadIdx.x) / 32;
  const int lane = int(threadIdx.x) % 32;
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = bits;
  __syncthreads();
  bits = lane < warps ? partial[lane] : 0u;
  return warp_max(bits);
}

// *amax = max(*amax, the amax whose bits are given). *amax must hold a non-negative float or NaN
// (e.g. zeroed with cudaMemset): as unsigned integers their bits order like the amaxes themselves.
__device__ __forceinline__ void atomic_max_amax(float* amax, std::uint32_t bits) {
  atomicMax(reinterpret_cast<unsigned int*>(amax), bits);
}

template <class T, int Threads>
__global__ void __launch_bounds__(Threads)
    amax_kernel(const T* in, std::size_t count, bool vector, float* amax) {
  std::uint32_t bits = 0;
  const std::size_t thread = blockIdx.x * std::size_t(Threads) + threadIdx.x;
  const std::size_t stride = std::size_t(gridDim.x) * Threads;
  std::size_t scalar_begin = 0;
  if (vector) {
    const std::size_t quads = count / 4;
    for (std::size_t q = thread; q < quads; q += stride) bits = max(bits, amax_bits(load4(in + 4 * q)));
    scalar_begin = quads * 4;
  }
  for (std::size_t i = scalar_begin + thread; i < count; i += stride)
    bits = max(bits, amax_bits(widen(in[i])));
  bits = block_max<Threads>(bits);
  if (threadIdx.x == 0) atomic_max_amax(amax, bits);
}

}  // namespace detail

// *amax = max(*amax, max |in[i]|) on `stream`, with the CPU layer's NaN and Inf rules (fp8::compute_amax).
// `amax` is device memory holding a non-negative value (zero it first for a fresh amax).
// Throws fp8::invalid_argument on null pointers, fp8::cuda_error if the launch fails.
template <class T>
void compute_amax(const T* in, std::size_t count, float* amax, cudaStream_t stream = nullptr) {
  static_assert(is_element_v<T>, "float, bfloat16 or half elements");
  constexpr const char* function = "fp8::cuda::compute_amax";
  detail::check_pointer(in, count, function, "in");
  detail::require(amax != nullptr, function, "amax is null");
  if (count == 0) return;
  const bool vector = detail::is_aligned(in, 4 * sizeof(T));
  const unsigned grid = detail::grid_for(vector ? count / 4 + count % 4 : count);
  detail::amax_kernel<T, detail::block_threads>
      <<<grid, detail::block_threads, 0, stream>>>(in, count, vector, amax);
  detail::check_launch("fp8::cuda::detail::amax_kernel", count, grid, detail::block_threads);
}

}  // namespace fp8::cuda
