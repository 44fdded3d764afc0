// std::numeric_limits for every minifloat format, derived from its descriptor. The figures follow
// the C++ definitions: digits counts the implicit bit, min() is the smallest *normal* value.
#pragma once

#include <limits>

#include "float8.hpp"

template <class Format>
class std::numeric_limits<fp8::minifloat<Format>> {
  using type = fp8::minifloat<Format>;
  using traits = fp8::format_traits<Format>;
  using storage = typename Format::storage;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = Format::has_sign;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = traits::has_infinity;
  static constexpr bool has_quiet_NaN = traits::has_nan;
  static constexpr bool has_signaling_NaN = false;
  static constexpr std::float_denorm_style has_denorm =
      Format::has_subnormals ? std::denorm_present : std::denorm_absent;
  static constexpr bool has_denorm_loss = false;
  static constexpr std::float_round_style round_style = std::round_to_nearest;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = traits::mantissa_bits + 1;
  // floor((digits - 1) * log10(2)) and ceil(digits * log10(2) + 1), in integer arithmetic.
  static constexpr int digits10 = (digits - 1) * 30103 / 100000;
  static constexpr int max_digits10 = (digits * 30103 + 99999) / 100000 + 1;
  static constexpr int radix = 2;
  // C convention: the value is m * 2^e with 0.5 <= m < 1, hence the +1 against the unbiased exponent.
  static constexpr int min_exponent = traits::min_normal_exponent + 1;
  static constexpr int min_exponent10 = (min_exponent - 1) * 30103 / 100000;
  static constexpr int max_exponent = traits::max_exponent + 1;
  static constexpr int max_exponent10 = traits::max_exponent * 30103 / 100000;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;

  FP8_HOST_DEVICE static constexpr type min() noexcept { return type::from_bits(traits::min_normal_code); }
  // The most negative value; for unsigned formats the smallest one (0, or 2^-127 for E8M0).
  FP8_HOST_DEVICE static constexpr type lowest() noexcept {
    return type::from_bits(Format::has_sign ? storage(traits::sign_mask | traits::max_finite_code)
                                            : (traits::has_zero ? storage(0) : traits::min_positive_code));
  }
  FP8_HOST_DEVICE static constexpr type max() noexcept { return type::from_bits(traits::max_finite_code); }
  // Distance from 1 to the next value: 2^-mantissa_bits (a subnormal in FP4, 0.5 = 0b0'00'1).
  FP8_HOST_DEVICE static constexpr type epsilon() noexcept { return power_of_two(-traits::mantissa_bits); }
  // Largest rounding error in ulps for round-to-nearest: 0.5.
  FP8_HOST_DEVICE static constexpr type round_error() noexcept { return power_of_two(-1); }
  // Formats without Inf (or NaN) answer +0 here, as std::numeric_limits<int> does.
  FP8_HOST_DEVICE static constexpr type infinity() noexcept { return type::from_bits(traits::infinity_code); }
  FP8_HOST_DEVICE static constexpr type quiet_NaN() noexcept {
    return type::from_bits(traits::has_nan ? Format::canonical_nan : storage(0));
  }
  FP8_HOST_DEVICE static constexpr type signaling_NaN() noexcept { return quiet_NaN(); }
  FP8_HOST_DEVICE static constexpr type denorm_min() noexcept {
    return type::from_bits(traits::min_positive_code);
  }

 private:
  // The code of 2^exponent, through the conversion routine (exact for the powers asked for here).
  FP8_HOST_DEVICE static constexpr type power_of_two(int exponent) noexcept {
    return type::from_bits(
        fp8::detail::round_and_pack<Format, fp8::rounding::nearest_even, fp8::overflow::saturate>(
            {fp8::detail::unpacked::kind::finite, false, exponent, 1}, 0));
  }
};
