// The scalar element operations the quantize loops are written against (one element per "vector"):
// each is the library's reference conversion, so this path defines the results the SIMD paths match.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../convert.hpp"
#include "../float8.hpp"
#include "../format.hpp"
#include "../scaling/scale.hpp"

namespace fp8::detail {

// The contract every ops type implements (width elements at a time):
//   vfloat load(const T*)            T = float, bfloat16, float16, widened exactly to float
//   vbits  abs_bits(vfloat)          |x| as float bits
//   vbits  max(vbits, vbits)         unsigned maximum of bit patterns
//   std::uint32_t reduce_max(vbits)
//   vfloat mul(vfloat, vfloat), broadcast(float)
//   encode_store<Format>(vfloat, std::uint8_t*)   RNE + saturate, as convert_bits
//   vfloat decode_load<Format>(const std::uint8_t*)                exact, as decode<float>
//   store(T*, vfloat)                 T = float, or rounded to nearest even for bfloat16 / float16
//   vbits load_bits(const std::uint32_t*), store_bits(std::uint32_t*, vbits)
struct scalar_ops {
  static constexpr std::size_t width = 1;
  using vfloat = float;
  using vbits = std::uint32_t;

  static float load(const float* p) noexcept { return *p; }
  static float load(const bfloat16* p) noexcept { return static_cast<float>(*p); }
  static float load(const float16* p) noexcept { return static_cast<float>(*p); }

  static std::uint32_t abs_bits(float x) noexcept { return detail::abs_bits(bit_cast<std::uint32_t>(x)); }
  static std::uint32_t zero_bits() noexcept { return 0; }
  static std::uint32_t max(std::uint32_t a, std::uint32_t b) noexcept { return max_bits(a, b); }
  static std::uint32_t reduce_max(std::uint32_t a) noexcept { return a; }
  static float mul(float a, float b) noexcept { return a * b; }
  static float broadcast(float x) noexcept { return x; }

  template <class Format>
  static void encode_store(float x, std::uint8_t* out) noexcept {
    *out = convert_bits<Format, rounding::nearest_even, overflow::saturate>(x);
  }
  template <class Format>
  static float decode_load(const std::uint8_t* in) noexcept {
    return decode<float, Format>(*in);
  }

  static void store(float* p, float x) noexcept { *p = x; }
  static void store(bfloat16* p, float x) noexcept { *p = bfloat16(x); }
  static void store(float16* p, float x) noexcept { *p = float16(x); }

  static std::uint32_t load_bits(const std::uint32_t* p) noexcept { return *p; }
  static void store_bits(std::uint32_t* p, std::uint32_t v) noexcept { *p = v; }
};

}  // namespace fp8::detail
