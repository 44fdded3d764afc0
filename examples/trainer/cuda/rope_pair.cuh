// The rotation of one RoPE pair on the device, shared by the kernels that rotate head vectors in
// either layout (per head, rope.cu; per token, the fused attention's conversions in attention.cu).
#pragma once

#if !defined(__CUDACC__)
#error "rope_pair.cuh holds device code: compile it with nvcc"
#endif

namespace trainer::cuda::detail {

struct rotated_pair {
  float first, second;
};

// Pair (a, b) = (x[i], x[i + D/2]) turned by the angle whose cosine is c and sine s (s negated for
// the inverse rotation): (a c - b s, a s + b c). Each product is rounded on its own (__fmul_rn) so
// that the compiler does not fuse them into FMAs: the CPU layer's operations in its order.
__device__ __forceinline__ rotated_pair rotate_pair(float a, float b, float c, float s) {
  return {__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)), __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c))};
}

}  // namespace trainer::cuda::detail
