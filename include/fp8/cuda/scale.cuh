// Scales from amaxes on the device: the kernels' argument (scale_rule) and a call into the host's
// own formula, fp8::detail::scale_from_amax_unchecked, which is FP8_HOST_DEVICE.
#pragma once

#if !defined(__CUDACC__)
#error "fp8/cuda/scale.cuh contains device code: compile it with nvcc"
#endif

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

}  // namespace fp8::cuda
