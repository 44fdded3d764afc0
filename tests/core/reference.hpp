// An independent model of the OCP FP8 formats for the tests, written from the format table alone
// (docs/design.md): values by ldexp, rounding by comparing against midpoints. Slow and obvious on purpose.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include <fp8/fp8.hpp>

namespace reference {

struct fp8_spec {
  const char* name;
  int exponent_bits;
  int mantissa_bits;
  int bias;
  bool ieee_specials;         // E5M2: exponent all ones is Inf/NaN; E4M3: only 0x7F/0xFF is NaN
  std::uint8_t max_code;      // largest finite positive code
  std::uint8_t nan_code;      // what a NaN input becomes
  std::uint8_t overflow_nan;  // what non-saturating overflow gives (before the sign): Inf or NaN
};

inline constexpr fp8_spec e4m3{"e4m3", 4, 3, 7, false, 0x7E, 0x7F, 0x7F};
inline constexpr fp8_spec e5m2{"e5m2", 5, 2, 15, true, 0x7B, 0x7F, 0x7C};

inline bool is_nan(const fp8_spec& spec, std::uint8_t code) {
  const int magnitude = code & 0x7F;
  if (spec.ieee_specials)
    return (magnitude >> spec.mantissa_bits) == (1 << spec.exponent_bits) - 1 &&
           (magnitude & ((1 << spec.mantissa_bits) - 1)) != 0;
  return magnitude == 0x7F;
}

inline bool is_inf(const fp8_spec& spec, std::uint8_t code) {
  return spec.ieee_specials && (code & 0x7F) == 0x7C;
}

// The value of a finite code (or +-Inf), by the textbook formula.
inline double value(const fp8_spec& spec, std::uint8_t code) {
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  if (is_inf(spec, code)) return sign * INFINITY;
  const int magnitude = code & 0x7F;
  const int exponent_field = magnitude >> spec.mantissa_bits;
  const int mantissa = magnitude & ((1 << spec.mantissa_bits) - 1);
  const double fraction = double(mantissa) / double(1 << spec.mantissa_bits);
  if (exponent_field == 0) return sign * std::ldexp(fraction, 1 - spec.bias);
  return sign * std::ldexp(1.0 + fraction, exponent_field - spec.bias);
}

enum class mode { nearest_even, toward_zero };

// The positive finite values in code order, plus one "virtual" value past the largest (the next value
// an unbounded exponent range would have): rounding onto it means overflow.
inline std::vector<double> positive_values(const fp8_spec& spec) {
  std::vector<double> values;
  for (int code = 0; code <= spec.max_code; ++code) values.push_back(value(spec, std::uint8_t(code)));
  const double top_ulp = values[spec.max_code] - values[spec.max_code - 1];
  values.push_back(values[spec.max_code] + top_ulp);
  return values;
}

// The expected code for |x| (finite, >= 0) given the index i with values[i] <= |x| < values[i+1]
// (or i == last when |x| is at or beyond the virtual value). Returns spec.max_code + 1 for overflow.
inline int round_index(const std::vector<double>& values, double magnitude, std::size_t i, mode m) {
  const std::size_t last = values.size() - 1;
  if (i >= last) return int(last);
  if (m == mode::toward_zero) return int(i);
  const double midpoint = (values[i] + values[i + 1]) / 2;  // exact: a one-bit-longer fp8 value
  if (magnitude < midpoint) return int(i);
  if (magnitude > midpoint) return int(i + 1);
  return (i % 2 == 0) ? int(i) : int(i + 1);  // tie: the even code
}

inline std::size_t find_index(const std::vector<double>& values, double magnitude) {
  std::size_t i = 0;
  while (i + 1 < values.size() && values[i + 1] <= magnitude) ++i;
  return i;
}

// Applies sign, specials and the overflow policy to a rounded index.
inline std::uint8_t finish(const fp8_spec& spec, bool negative, int index, bool saturate) {
  const std::uint8_t sign = negative ? 0x80 : 0x00;
  if (index > spec.max_code) return std::uint8_t(sign | (saturate ? spec.max_code : spec.overflow_nan));
  return std::uint8_t(sign | index);
}

// The expected conversion of any double (slow: a linear search).
inline std::uint8_t convert(const fp8_spec& spec, double x, mode m, bool saturate) {
  if (std::isnan(x)) return spec.nan_code;
  const bool negative = std::signbit(x);
  const double magnitude = std::fabs(x);
  if (std::isinf(x)) return finish(spec, negative, spec.max_code + 1, saturate);
  const auto values = positive_values(spec);
  return finish(spec, negative, round_index(values, magnitude, find_index(values, magnitude), m), saturate);
}

}  // namespace reference
