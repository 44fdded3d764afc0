// Scales from amaxes on the device: the kernels' argument (scale_rule), a call into the host's own
// formula, fp8::detail::scale_from_amax_unchecked, which is FP8_HOST_DEVICE, and the two kinds of
// block scales (float 1 / scale, E8M0 codes) the block kernels write.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/scale.cuh contains device code: compile it with nvcc"
#endif

#include <cstddef>
#include <cstdint>

#include "../scaling/fp8_format.hpp"
#include "../scaling/scale.hpp"

namespace fp8::cuda {

// What a kernel needs to turn an amax into a scale (fp8::quantization's scale fields).
struct scale_rule {
  float fp8_max = 0.0f;  // max_finite(format): build the rule with make_scale_rule
  int margin = 0;
  bool power_of_two = false;
};

inline scale_rule make_scale_rule(fp8_format format, int margin = 0, bool power_of_two = false) {
  return scale_rule{max_finite(format), margin, power_of_two};
}

// fp8::detail::scale_from_amax_unchecked itself (fp8/scaling/scale.hpp), the one copy of the formula
// for host and device. Example: amax 3.5, E4M3, margin 0 -> 128; margin 1 -> 64; amax 0 -> fallback.
__host__ __device__ inline float scale_from_amax(float amax, const scale_rule& rule, float fallback) {
  return fp8::detail::scale_from_amax_unchecked(amax, rule.fp8_max, rule.margin, rule.power_of_two, fallback);
}

namespace detail {

// What a block-scaling kernel does with a block's amax: the factor that multiplies the block's
// elements into range, and the entry it stores for the block. One template parameter of the tile
// and column kernels, so that the cuBLASLt granularities and MX share their loops.
//
// float_block_scales: scale = scale_from_amax(amax, rule, 1); the entry is 1 / scale (what
// cuBLASLt's scale modes read). Layouts padded to 4 entries get 0 in their padding.
struct float_block_scales {
  static constexpr bool padded = true;
  scale_rule rule;
  float* scale_inv;

  __device__ float apply(std::uint32_t amax_bits, std::size_t index, bool store) const {
    const float scale = scale_from_amax(__uint_as_float(amax_bits), rule, 1.0f);
    if (store) scale_inv[index] = 1.0f / scale;
    return scale;
  }
  __device__ void pad(std::size_t index) const { scale_inv[index] = 0.0f; }
};

// e8m0_block_scales: OCP MX, fp8::mx_scale_code of the amax; the entry is that E8M0 code and the
// factor 2^(127 - code) (fp8::mx_element_scale). MX layouts have no padding.
struct e8m0_block_scales {
  static constexpr bool padded = false;
  fp8_format format;
  std::uint8_t* codes;

  __device__ float apply(std::uint32_t amax_bits, std::size_t index, bool store) const {
    const std::uint8_t code = mx_scale_code(__uint_as_float(amax_bits), format);
    if (store) codes[index] = code;
    return mx_element_scale(code);
  }
  __device__ void pad(std::size_t) const {}
};

// The factor dequantization multiplies a block's codes by: its 1 / scale, or X = 2^(code - 127).
__device__ __forceinline__ float block_scale_inv(float scale_inv) { return scale_inv; }
__device__ __forceinline__ float block_scale_inv(std::uint8_t e8m0) { return mx_scale_inv(e8m0); }

}  // namespace detail
}  // namespace fp8::cuda
