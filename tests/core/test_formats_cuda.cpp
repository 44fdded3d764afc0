// FP4 E2M1 and FP6 E2M3 / E3M2 against CUDA's own host conversions (cuda_fp4.h, cuda_fp6.h): every
// code decoded, and float inputs (a spread of all bit patterns plus every value and midpoint with
// neighbours) rounded to nearest even and toward zero. CUDA always saturates and sends NaN to +max.
#include <cmath>
#include <cstdint>
#include <cstring>

#include <cuda_fp4.h>
#include <cuda_fp6.h>
#include <doctest/doctest.h>

#include <fp8/types.hpp>

namespace {

float half_bits_to_float(std::uint16_t bits) {
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

float float_from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

template <class Format>
int cuda_convert(float x, cudaRoundMode mode) {
  if constexpr (std::is_same_v<Format, fp8::e2m1_format>) return __nv_cvt_float_to_fp4(x, __NV_E2M1, mode);
  if constexpr (std::is_same_v<Format, fp8::e2m3_format>) return __nv_cvt_float_to_fp6(x, __NV_E2M3, mode);
  if constexpr (std::is_same_v<Format, fp8::e3m2_format>) return __nv_cvt_float_to_fp6(x, __NV_E3M2, mode);
}

template <class Format>
float cuda_decode(std::uint8_t code) {
  if constexpr (std::is_same_v<Format, fp8::e2m1_format>) return half_bits_to_float(__nv_cvt_fp4_to_halfraw(code, __NV_E2M1).x);
  if constexpr (std::is_same_v<Format, fp8::e2m3_format>) return half_bits_to_float(__nv_cvt_fp6_to_halfraw(code, __NV_E2M3).x);
  if constexpr (std::is_same_v<Format, fp8::e3m2_format>) return half_bits_to_float(__nv_cvt_fp6_to_halfraw(code, __NV_E3M2).x);
}

}  // namespace

TEST_CASE_TEMPLATE("FP4 and FP6 agree with CUDA's host conversions", Format, fp8::e2m1_format, fp8::e2m3_format,
                   fp8::e3m2_format) {
  using traits = fp8::format_traits<Format>;
  const int codes = 1 << traits::total_bits;
  for (int code = 0; code < codes; ++code) {
    CAPTURE(code);
    const float ours = fp8::decode<float, Format>(std::uint8_t(code));
    CHECK(ours == cuda_decode<Format>(std::uint8_t(code)));
    CHECK(std::signbit(ours) == std::signbit(cuda_decode<Format>(std::uint8_t(code))));
  }
  std::uint64_t mismatches = 0;
  auto check = [&](float x) {
    const int rn = fp8::convert_bits<Format, fp8::rounding::nearest_even, fp8::overflow::saturate>(x);
    const int rz = fp8::convert_bits<Format, fp8::rounding::toward_zero, fp8::overflow::saturate>(x);
    if ((rn != cuda_convert<Format>(x, cudaRoundNearest) || rz != cuda_convert<Format>(x, cudaRoundZero)) &&
        mismatches++ < 5) {
      CAPTURE(x);
      CHECK(rn == cuda_convert<Format>(x, cudaRoundNearest));
      CHECK(rz == cuda_convert<Format>(x, cudaRoundZero));
    }
  };
  for (std::uint64_t bits = 0; bits < (std::uint64_t(1) << 32); bits += 4093) check(float_from_bits(std::uint32_t(bits)));
  for (int code = 0; code < codes; ++code) {
    const float v = fp8::decode<float, Format>(std::uint8_t(code));
    const float next = fp8::decode<float, Format>(std::uint8_t(code + 1 < codes ? code + 1 : code));
    for (const float x : {v, std::nextafter(v, 0.0f), std::nextafter(v, INFINITY), (v + next) / 2,
                          std::nextafter((v + next) / 2, 0.0f), std::nextafter((v + next) / 2, INFINITY)}) {
      check(x);
    }
  }
  CHECK(mismatches == 0);
}
