// All 256 codes of every format: decoded values, classification and round trips, against the
// textbook formula and CUDA's own decoders.
#include <cmath>
#include <cstdint>
#include <cstring>

#include <cuda_fp8.h>
#include <doctest/doctest.h>

#include <fp8/fp8.hpp>

#include "reference.hpp"

namespace {

template <class T>
const reference::fp8_spec& spec_of();
template <>
const reference::fp8_spec& spec_of<fp8::fp8_e4m3>() {
  return reference::e4m3;
}
template <>
const reference::fp8_spec& spec_of<fp8::fp8_e5m2>() {
  return reference::e5m2;
}

template <class T>
constexpr __nv_fp8_interpretation_t cuda_kind_of() {
  return std::is_same_v<T, fp8::fp8_e4m3> ? __NV_E4M3 : __NV_E5M2;
}

float half_bits_to_float(std::uint16_t bits) {
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

}  // namespace

TEST_CASE_TEMPLATE("every code decodes to the textbook value and classifies correctly", T, fp8::fp8_e4m3,
                   fp8::fp8_e5m2) {
  const auto& spec = spec_of<T>();
  for (int code = 0; code < 256; ++code) {
    CAPTURE(code);
    const T x = T::from_bits(std::uint8_t(code));
    CHECK(x.bits() == code);
    CHECK(fp8::isnan(x) == reference::is_nan(spec, std::uint8_t(code)));
    CHECK(fp8::isinf(x) == reference::is_inf(spec, std::uint8_t(code)));
    CHECK(fp8::isfinite(x) ==
          (!reference::is_nan(spec, std::uint8_t(code)) && !reference::is_inf(spec, std::uint8_t(code))));
    CHECK(fp8::signbit(x) == ((code & 0x80) != 0));
    const float as_float = static_cast<float>(x);
    const double as_double = static_cast<double>(x);
    // CUDA decodes FP8 to half, which holds every FP8 value exactly.
    const float cuda_value =
        half_bits_to_float(__nv_cvt_fp8_to_halfraw(std::uint8_t(code), cuda_kind_of<T>()).x);
    if (reference::is_nan(spec, std::uint8_t(code))) {
      CHECK(std::isnan(as_float));
      CHECK(std::isnan(as_double));
      CHECK(std::isnan(cuda_value));
      CHECK(std::signbit(as_float) == ((code & 0x80) != 0));  // decoding keeps the sign of NaN
      continue;
    }
    const double expected = reference::value(spec, std::uint8_t(code));
    CHECK(as_double == expected);
    CHECK(double(as_float) == expected);
    CHECK(cuda_value == as_float);
    CHECK(std::signbit(as_float) == ((code & 0x80) != 0));  // including -0
    // Every value converts back to its own code, from float and from double.
    CHECK(fp8::convert_bits<typename T::format, fp8::rounding::nearest_even, fp8::overflow::nonsaturating>(
              as_float) == code);
    CHECK(fp8::convert_bits<typename T::format, fp8::rounding::toward_zero, fp8::overflow::nonsaturating>(
              as_double) == code);
    // Negation flips exactly the sign bit.
    CHECK((-x).bits() == (code ^ 0x80));
  }
}

TEST_CASE("every E8M0 code is a power of two 2^(code-127), 0xFF is NaN, as CUDA decodes it") {
  for (int code = 0; code < 256; ++code) {
    CAPTURE(code);
    const auto x = fp8::fp8_e8m0::from_bits(std::uint8_t(code));
    const __nv_bfloat16_raw cuda = __nv_cvt_e8m0_to_bf16raw(std::uint8_t(code));
    std::uint32_t cuda_float_bits = std::uint32_t(cuda.x) << 16;
    float cuda_value;
    std::memcpy(&cuda_value, &cuda_float_bits, sizeof cuda_value);
    if (code == 0xFF) {
      CHECK(fp8::isnan(x));
      CHECK(std::isnan(static_cast<float>(x)));
      CHECK(std::isnan(cuda_value));
      continue;
    }
    CHECK_FALSE(fp8::isnan(x));
    CHECK_FALSE(fp8::signbit(x));
    CHECK(static_cast<double>(x) == std::ldexp(1.0, code - 127));
    CHECK(static_cast<float>(x) == cuda_value);
    CHECK(fp8::fp8_e8m0(static_cast<float>(x)).bits() == code);
  }
}

TEST_CASE("bfloat16 and float16 decode every code as CUDA does and round trip") {
  for (std::uint32_t code = 0; code < 65536; ++code) {
    CAPTURE(code);
    const auto h = fp8::float16::from_bits(std::uint16_t(code));
    const auto b = fp8::bfloat16::from_bits(std::uint16_t(code));
    const float cuda_half = half_bits_to_float(std::uint16_t(code));
    const std::uint32_t bf16_as_float_bits = code << 16;
    float bf16_value;
    std::memcpy(&bf16_value, &bf16_as_float_bits, sizeof bf16_value);
    if (std::isnan(cuda_half)) {
      CHECK(fp8::isnan(h));
    } else {
      CHECK(static_cast<float>(h) == cuda_half);
      CHECK(std::signbit(static_cast<float>(h)) == std::signbit(cuda_half));
      CHECK(fp8::float16(static_cast<float>(h)).bits() == code);
    }
    if (std::isnan(bf16_value)) {
      CHECK(fp8::isnan(b));
    } else {
      CHECK(static_cast<float>(b) == bf16_value);
      CHECK(fp8::bfloat16(static_cast<float>(b)).bits() == code);
    }
  }
}
