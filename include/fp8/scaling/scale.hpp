// Scale factors from amaxes: scale = fp8_max / amax / 2^margin (Transformer Engine's formula, in
// float), never Inf or NaN, optionally a power of two; and the OCP MX E8M0 block exponent.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>

#include "../config.hpp"
#include "../error.hpp"
#include "../format.hpp"
#include "fp8_format.hpp"

namespace fp8 {

// A scale and its inverse. `scale` multiplies high-precision values into FP8 range before the cast;
// `scale_inv` = 1 / scale is stored beside the FP8 data and is what a GEMM or dequantize multiplies by.
struct scale_pair {
  float scale = 1.0f;
  float scale_inv = 1.0f;
};

namespace detail {

using float_traits = format_traits<binary32_format>;

// Amaxes are |x|: non-negative floats or NaN. Their bit patterns order like their values, with every
// NaN above +Inf, so the running maximum of the bits is a maximum in which NaN wins over Inf and Inf
// over any finite value, exactly and in any order (which is what lets SIMD lanes agree with a loop).
FP8_HOST_DEVICE constexpr std::uint32_t abs_bits(std::uint32_t float_bits) noexcept {
  return float_bits & ~std::uint32_t(float_traits::sign_mask);
}
FP8_HOST_DEVICE constexpr std::uint32_t max_bits(std::uint32_t a, std::uint32_t b) noexcept {
  return a > b ? a : b;
}
// The amax as a float; every NaN comes out as the canonical quiet NaN so results compare bit-exact.
inline float amax_from_bits(std::uint32_t amax_bits) noexcept {
  const std::uint32_t nan_above = float_traits::infinity_code;
  return bit_cast<float>(amax_bits > nan_above ? std::uint32_t(binary32_format::canonical_nan) : amax_bits);
}
// An amax as it is held (amax_history, its checkpoints, the device slots): without a sign bit, so
// -0 is +0, and every NaN the canonical quiet NaN.
inline float canonical_amax(float amax) noexcept {
  return amax_from_bits(abs_bits(bit_cast<std::uint32_t>(amax)));
}
// NaN-dominant maximum of two amaxes (as float values).
inline float amax_max(float a, float b) noexcept {
  return amax_from_bits(max_bits(abs_bits(bit_cast<std::uint32_t>(a)), abs_bits(bit_cast<std::uint32_t>(b))));
}

// Not 0, not Inf, not NaN (NaN fails both comparisons). Host and device.
FP8_HOST_DEVICE inline bool usable_amax(float amax) noexcept { return amax > 0.0f && amax <= FLT_MAX; }

// Rounds a positive normal float down to a power of two by clearing its mantissa.
FP8_HOST_DEVICE inline float power_of_two_below(float x) noexcept {
  const std::uint32_t exponent_only = bit_cast<std::uint32_t>(x) & std::uint32_t(float_traits::exponent_mask);
  return bit_cast<float>(exponent_only);
}

// scale_from_amax without argument checks (callers validated margin and fallback once). The one
// copy of the formula: the device kernels call it too (IEEE float division on both sides, nvcc's
// default -prec-div=true, so the results are bit-identical).
FP8_HOST_DEVICE inline float scale_from_amax_unchecked(float amax, float fp8_max, int margin,
                                                       bool power_of_two, float fallback) noexcept {
  if (!usable_amax(amax)) return fallback;
  // fp8_max / amax, then divided by 2^margin, as Transformer Engine computes it. The second step is
  // ldexpf, not a division by ldexpf(1, margin): for margin >= 128 that power of two is infinite in
  // float, and inf / inf gave NaN for tiny amaxes. ldexpf rounds once, like the division did for
  // smaller margins (exact unless the result leaves the normal range), on the host and the device.
  float scale = ldexpf(fp8_max / amax, -margin);
  if (scale > FLT_MAX) scale = FLT_MAX;  // amax so small that fp8_max / amax overflowed
  if (scale < FLT_MIN) scale = FLT_MIN;  // huge margin: keep 1 / scale finite (<= 2^126)
  return power_of_two ? power_of_two_below(scale) : scale;
}

inline void check_margin(int margin) {
  if (margin < 0) {
    throw invalid_argument(
        "fp8 scaling: margin must be >= 0 (the scale is divided by 2^margin to "
        "leave headroom); got " +
        std::to_string(margin));
  }
}

inline void check_scale(float scale, const char* what) {
  if (!(scale > 0.0f) || !std::isfinite(scale)) {
    throw invalid_argument(std::string("fp8: ") + what + " must be a positive finite float; got " +
                           std::to_string(scale));
  }
}

}  // namespace detail

// The scale that maps `amax` onto the largest finite value of `format`, divided by 2^margin:
//   scale = (fp8_max / amax) / 2^margin, computed in float in that order.
// - amax 0, Inf or NaN: returns `fallback` (the previous scale under delayed scaling, 1 under current
//   scaling); a scale is never Inf or NaN.
// - the division overflows (amax below fp8_max / FLT_MAX, e.g. a denormal amax): FLT_MAX.
// - the result would be below FLT_MIN (only with a large margin): FLT_MIN, so that 1/scale is finite.
// - power_of_two: the result is rounded down to a power of two (its mantissa cleared), so that scaling
//   is exact and amax * scale still fits.
// Example: amax 3.5, E4M3, margin 0: 448 / 3.5 = 128; with margin 1: 64; amax 3 -> 149.33334 (or 128
// as a power of two).
// Throws fp8::invalid_argument if margin < 0 or fallback is not a positive finite float.
inline float scale_from_amax(float amax, fp8_format format, int margin = 0, bool power_of_two = false,
                             float fallback = 1.0f) {
  detail::check_margin(margin);
  detail::check_scale(fallback, "fallback scale");
  return detail::scale_from_amax_unchecked(amax, max_finite(format), margin, power_of_two, fallback);
}

// Both halves at once: scale_inv = 1 / scale (a correctly rounded float division).
inline scale_pair scale_pair_from_amax(float amax, fp8_format format, int margin = 0,
                                       bool power_of_two = false, float fallback = 1.0f) {
  const float scale = scale_from_amax(amax, format, margin, power_of_two, fallback);
  return {scale, 1.0f / scale};
}

namespace detail {

// OCP MX: the E8M0 code of a finite block's scale from its amax bits. floor(log2(amax)) + 127 - emax
// is the float's biased exponent minus emax (float subnormals have biased exponent 0 and clamp to
// code 0); an all-zero block gets X = 1 (code 127). The one copy of the rule: the FP8 MX quantizers
// (host and device) and the MXFP4 / MXFP6 block kernels all call it.
FP8_HOST_DEVICE constexpr std::uint8_t mx_scale_code_from_amax_bits(std::uint32_t amax_bits,
                                                                    int emax) noexcept {
  if (amax_bits == 0) return std::uint8_t(format_traits<e8m0_format>::bias);
  const int code = int(amax_bits >> float_traits::mantissa_bits) - emax;
  return std::uint8_t(code < 0 ? 0 : code);
}

// 1 / X = 2^(127 - code) as a float, built from its exponent field: normal for every code a finite
// amax produces (0..252 for the formats here; any code up to 253).
FP8_HOST_DEVICE FP8_BIT_CAST_CONSTEXPR inline float mx_element_multiplier(std::uint8_t code) noexcept {
  return bit_cast<float>(std::uint32_t(2 * float_traits::bias - code) << float_traits::mantissa_bits);
}

}  // namespace detail

// OCP MX v1.0 shared scale of a block, as an E8M0 code: X = 2^(floor(log2(amax)) - emax), emax = 8
// (E4M3) or 15 (E5M2); the E8M0 code is that exponent + 127. The exponent is clamped at -127 (code 0,
// E8M0's smallest value) for tiny amaxes. An amax of 0, Inf or NaN gives X = 1 (code 127) so that no
// scale is NaN; the elements then keep their own NaN or saturate. Host and device.
// Example: amax 100 = 1.5625 * 2^6 under E4M3: 6 - 8 = -2, code 125, X = 0.25; the elements are
// divided by 0.25, so 100 becomes 400, which rounds (a tie) to the even neighbour 384.
FP8_HOST_DEVICE inline std::uint8_t mx_scale_code(float amax, fp8_format format) noexcept {
  if (!detail::usable_amax(amax)) return std::uint8_t(format_traits<e8m0_format>::bias);
  return detail::mx_scale_code_from_amax_bits(detail::bit_cast<std::uint32_t>(amax), max_exponent(format));
}

// The factor that multiplies elements into range for an E8M0 scale code: 1 / X = 2^(127 - code),
// exact for every code (2^-127 and 2^-128, float denormals, for codes 254 and 255). Host and device.
FP8_HOST_DEVICE inline float mx_element_scale(std::uint8_t code) noexcept {
  constexpr std::uint8_t last_normal = 2 * detail::float_traits::bias - 1;  // 253: 2^-126
  if (code <= last_normal) return detail::mx_element_multiplier(code);
  return detail::mx_element_multiplier(last_normal) * (code == last_normal + 1 ? 0.5f : 0.25f);
}

// X itself, what dequantization multiplies by: 2^(code - 127) (a float denormal for code 0).
FP8_HOST_DEVICE inline float mx_scale_inv(std::uint8_t code) noexcept {
  return decode<float, e8m0_format>(code);
}

}  // namespace fp8
