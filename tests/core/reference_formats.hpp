// An independent model of every small format beyond OCP FP8 (FP4, FP6, fnuz, E3M4, IEEE-style E4M3,
// UE4M3), written from the format table alone: it never reads fp8's descriptors or traits. Values come
// from the textbook formula by ldexp; rounding compares with the exact neighbours in double.
// Slow and obvious on purpose.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace reference {

enum class specials { ieee, nan_all_ones, fnuz, none };
enum class round_mode { nearest_even, toward_zero, upward, stochastic };

struct format_spec {
  const char* name;
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool is_signed;
  specials kind;
  int nan_input_code;  // what a NaN input becomes (the library's documented choice, see docs/numerics.md)

  int magnitude_bits() const { return exponent_bits + mantissa_bits; }
  int sign_bit() const { return is_signed ? 1 << magnitude_bits() : 0; }
  int code_count() const { return 1 << (magnitude_bits() + (is_signed ? 1 : 0)); }
  int max_code() const {
    const int all_ones = (1 << magnitude_bits()) - 1;
    switch (kind) {
      case specials::ieee: return (((1 << exponent_bits) - 1) << mantissa_bits) - 1;
      case specials::nan_all_ones: return all_ones - 1;
      default: return all_ones;
    }
  }
  bool is_nan(int code) const {
    const int magnitude = code & ((1 << magnitude_bits()) - 1);
    switch (kind) {
      case specials::ieee:
        return (magnitude >> mantissa_bits) == (1 << exponent_bits) - 1 &&
               (magnitude & ((1 << mantissa_bits) - 1)) != 0;
      case specials::nan_all_ones: return magnitude == (1 << magnitude_bits()) - 1;
      case specials::fnuz: return code == sign_bit();
      case specials::none: return false;
    }
    return false;
  }
  bool is_inf(int code) const {
    return kind == specials::ieee && (code & ((1 << magnitude_bits()) - 1)) == ((1 << exponent_bits) - 1)
                                                                                   << mantissa_bits;
  }
  // Non-saturating overflow result before the sign: Inf, else NaN, else (no specials) max.
  int overflow_code() const {
    switch (kind) {
      case specials::ieee: return ((1 << exponent_bits) - 1) << mantissa_bits;
      case specials::nan_all_ones: return (1 << magnitude_bits()) - 1;
      case specials::fnuz: return sign_bit();
      case specials::none: return max_code();
    }
    return 0;
  }
};

// ml_dtypes names in comments.
inline constexpr format_spec e2m1{"e2m1", 2, 1, 1, true, specials::none, 0b0'11'1};       // float4_e2m1fn
inline constexpr format_spec e2m3{"e2m3", 2, 3, 1, true, specials::none, 0b0'11'111};     // float6_e2m3fn
inline constexpr format_spec e3m2{"e3m2", 3, 2, 3, true, specials::none, 0b0'111'11};     // float6_e3m2fn
inline constexpr format_spec e4m3fnuz{"e4m3fnuz", 4, 3, 8, true, specials::fnuz, 0x80};   // float8_e4m3fnuz
inline constexpr format_spec e5m2fnuz{"e5m2fnuz", 5, 2, 16, true, specials::fnuz, 0x80};  // float8_e5m2fnuz
inline constexpr format_spec e3m4{"e3m4", 3, 4, 3, true, specials::ieee, 0b0'111'1000};   // float8_e3m4
inline constexpr format_spec e4m3_ieee{"e4m3_ieee",    4,           3, 7, true,
                                       specials::ieee, 0b0'1111'100};                       // float8_e4m3
inline constexpr format_spec ue4m3{"ue4m3", 4, 3, 7, false, specials::nan_all_ones, 0x7F};  // NVFP4 scale

// The value of a finite code (or +-Inf) by the textbook formula.
inline double value(const format_spec& spec, int code) {
  const double sign = (code & spec.sign_bit()) ? -1.0 : 1.0;
  if (spec.is_inf(code)) return sign * INFINITY;
  const int magnitude = code & ((1 << spec.magnitude_bits()) - 1);
  const int exponent_field = magnitude >> spec.mantissa_bits;
  const double fraction =
      double(magnitude & ((1 << spec.mantissa_bits) - 1)) / double(1 << spec.mantissa_bits);
  if (exponent_field == 0) return sign * std::ldexp(fraction, 1 - spec.bias);
  return sign * std::ldexp(1.0 + fraction, exponent_field - spec.bias);
}

// Positive finite values in code order plus the virtual next value past max (rounding onto it is
// overflow).
inline std::vector<double> positive_values(const format_spec& spec) {
  std::vector<double> values;
  for (int code = 0; code <= spec.max_code(); ++code) values.push_back(value(spec, code));
  values.push_back(values.back() + (values.back() - values[values.size() - 2]));
  return values;
}

// The expected code of any double under a rounding mode and overflow policy. `random_bits` is read
// by stochastic rounding only: up iff floor(fraction * 2^32) + random_bits >= 2^32.
inline int convert(const format_spec& spec, const std::vector<double>& values, double x, round_mode mode,
                   bool saturate, std::uint32_t random_bits = 0) {
  if (std::isnan(x)) return spec.nan_input_code;
  const bool negative = spec.is_signed && std::signbit(x);
  const int sign = negative ? spec.sign_bit() : 0;
  const double magnitude = std::fabs(x);
  const int last = int(values.size()) - 1;  // the virtual value: overflow
  int index = last;
  if (!std::isinf(x) && magnitude < values[last]) {
    const int below = int(std::upper_bound(values.begin(), values.end(), magnitude) - values.begin()) - 1;
    const bool exact = values[below] == magnitude;
    bool up = false;
    if (!exact) {
      const double fraction = (magnitude - values[below]) / (values[below + 1] - values[below]);  // exact
      switch (mode) {
        case round_mode::nearest_even: up = fraction > 0.5 || (fraction == 0.5 && below % 2 == 1); break;
        case round_mode::toward_zero: up = false; break;
        case round_mode::upward: up = !negative; break;
        case round_mode::stochastic:
          up = std::uint64_t(std::ldexp(fraction, 32)) + random_bits >= (std::uint64_t(1) << 32);
          break;
      }
    }
    index = below + (up ? 1 : 0);
  }
  if (index == last) return sign | (saturate ? spec.max_code() : spec.overflow_code());
  if (index == 0 && spec.kind == specials::fnuz) return 0;  // no -0
  return sign | index;
}

}  // namespace reference
