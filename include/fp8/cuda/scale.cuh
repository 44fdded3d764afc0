// Scales from amaxes on the device, bit-identical to fp8::scale_from_amax (fp8/scaling/scale.hpp):
// scale = (fp8_max / amax) / 2^margin in float, fallback for an unusable amax, clamps, power of two.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/scale.cuh contains device code: compile it with nvcc"
#endif

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "../format.hpp"
#include "../scaling/fp8_format.hpp"

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

// The same steps as fp8::detail::scale_from_amax_unchecked, in the same order: the IEEE float
// divisions of the device (nvcc's default -prec-div=true, no -use_fast_math) round like the host's.
// Example: amax 3.5, E4M3, margin 0 -> 128; margin 1 -> 64; amax 0 -> fallback.
__host__ __device__ inline float scale_from_amax(float amax, const scale_rule& rule, float fallback) {
  using float_traits = format_traits<binary32_format>;
  const bool usable = amax > 0.0f && amax <= FLT_MAX;  // not 0, not Inf, not NaN
  if (!usable) return fallback;
  float scale = (rule.fp8_max / amax) / ldexpf(1.0f, rule.margin);
  if (scale > FLT_MAX) scale = FLT_MAX;
  if (scale < FLT_MIN) scale = FLT_MIN;
  if (rule.power_of_two) {
    scale = fp8::detail::bit_cast<float>(fp8::detail::bit_cast<std::uint32_t>(scale) &
                                         std::uint32_t(float_traits::exponent_mask));
  }
  return scale;
}

}  // namespace fp8::cuda
