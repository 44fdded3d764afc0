// fp8::cuda::amax_tracker: the amax of a tensor recorded by the kernel that writes it, so that a
// current-scaled cast of the tensor needs no amax pass of its own (quantize_from_amax, and the linear
// layer's x_amax / dy_amax): one read of memory instead of two. A kernel that writes a tensor already
// holds every value in a register, so the amax costs it a max per value and one atomic per block.
//
//   __global__ void __launch_bounds__(256) my_norm(..., __nv_bfloat16* out, float* out_amax) {
//     fp8::cuda::amax_tracker amax;
//     for (...) {
//       const __nv_bfloat16 v = __float2bfloat16(y);
//       out[i] = v;
//       amax.add(v);  // the value as stored
//     }
//     amax.record<256>(out_amax);  // every thread of the block, once, at the end
//   }
//
// Rules:
//  - add() the values as stored, after their rounding to the tensor's type: rounding can raise a
//    magnitude, and an amax below an element the cast reads would saturate that element;
//  - *out_amax is max-accumulated (an atomic max on the float's bits): zero it on the producer's
//    stream before the producer runs, and give a cast the amax of exactly the tensor it reads;
//  - NaN and Inf count as in compute_amax: NaN above Inf above every finite value, every NaN
//    reported as the canonical quiet NaN, so the recorded amax equals compute_amax's bit for bit.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/amax_tracker.cuh contains device code: compile it with nvcc"
#endif

#include <cstdint>

#include "amax.cuh"
#include "element.cuh"

namespace fp8::cuda {

class amax_tracker {
 public:
  // One value of the tensor (float, bfloat16 or half), as stored.
  template <class T>
  __device__ __forceinline__ void add(T value) {
    bits_ = max(bits_, detail::amax_bits(widen(value)));
  }

  // Records the block's amax into *amax with one atomic. Every thread of a one-dimensional block of
  // Threads threads calls it once, after its last add().
  template <int Threads>
  __device__ __forceinline__ void record(float* amax) {
    const std::uint32_t block = detail::block_max<Threads>(bits_);
    if (threadIdx.x == 0) detail::atomic_max_amax(amax, block);
  }

  // Records the warp's amax into *amax with one atomic: every lane of a full warp calls it (for
  // kernels whose warps finish at different times; one-dimensional blocks).
  __device__ __forceinline__ void record_warp(float* amax) {
    const std::uint32_t warp = detail::warp_max(bits_);
    if (threadIdx.x % 32 == 0) detail::atomic_max_amax(amax, warp);
  }

  // The amax so far of this thread's values.
  __device__ __forceinline__ float value() const { return __uint_as_float(bits_); }

 private:
  std::uint32_t bits_ = 0;  // the largest amax_bits so far: they order like the amaxes
};

}  // namespace fp8::cuda
