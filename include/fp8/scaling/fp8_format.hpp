// The two FP8 element formats as a run-time choice (a recipe picks E4M3 or E5M2 per tensor), with
// their largest finite values read from the format descriptors.
#pragma once

#include <cstdint>

#include "../convert.hpp"
#include "../format.hpp"

namespace fp8 {

// Which FP8 format a tensor is stored in. The compile-time descriptors are e4m3_format and e5m2_format.
enum class fp8_format : std::uint8_t {
  e4m3 = 0,  // 4 exponent bits, 3 mantissa bits: precision for forward tensors (max 448)
  e5m2 = 1,  // 5 exponent bits, 2 mantissa bits: range for gradients (max 57344)
};

// Calls `f(descriptor{})` with e4m3_format or e5m2_format, so that run-time choices reach the
// compile-time conversion routine: visit_format(fp8_format::e5m2, [](auto d) { ... decltype(d) ... }).
template <class Function>
constexpr decltype(auto) visit_format(fp8_format format, Function&& f) {
  if (format == fp8_format::e5m2) return f(e5m2_format{});
  return f(e4m3_format{});
}

// Largest finite value of the format, as a float: 448 (E4M3), 57344 (E5M2).
inline FP8_BIT_CAST_CONSTEXPR float max_finite(fp8_format format) noexcept {
  return format == fp8_format::e5m2 ? decode<float, e5m2_format>(format_traits<e5m2_format>::max_finite_code)
                                    : decode<float, e4m3_format>(format_traits<e4m3_format>::max_finite_code);
}

// Exponent of the largest power of two of the format (emax of the OCP MX rule): 8 for E4M3, 15 for E5M2.
FP8_HOST_DEVICE constexpr int max_exponent(fp8_format format) noexcept {
  return format == fp8_format::e5m2 ? format_traits<e5m2_format>::max_exponent
                                    : format_traits<e4m3_format>::max_exponent;
}

constexpr const char* format_name(fp8_format format) noexcept {
  return format == fp8_format::e5m2 ? e5m2_format::name : e4m3_format::name;
}

// True for the two valid enumerators (used to check values read from checkpoints or casts).
constexpr bool is_valid(fp8_format format) noexcept {
  return format == fp8_format::e4m3 || format == fp8_format::e5m2;
}

}  // namespace fp8
