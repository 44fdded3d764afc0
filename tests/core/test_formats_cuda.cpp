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
  if constexpr (std::is_same_v<Format, fp8::e2m1_format>)
    return half_bits_to_float(__nv_cvt_fp4_to_halfraw(code, __NV_E2M1).x);
  if constexpr (std::is_same_v<Format, fp8::e2m3_format>)
    return half_bits_to_float(__nv_cvt_fp6_to_halfraw(code, __NV_E2M3).x);
  if constexpr (std::is_same_v<Format, fp8::e3m2_format>)
    return half_bits_to_float(__nv_cvt_fp6_to_halfraw(code, __NV_E3M2).x);
}

}  // namespace

TEST_CASE_TEMPLATE("FP4 and FP6 agree with CUDA's host conversions", Format, fp8::e2m1_format,
                   fp8::e2m3_format, fp8::e3m2_format) {
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
  for (std::uint64_t bits = 0; bits < (std::uint64_t(1) << 32); bits += 4093)
    check(float_from_bits(std::uint32_t(bits)));
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

TEST_CASE("bit-exact interop with CUDA's __nv_fp4_e2m1, __nv_fp6_e2m3 and __nv_fp6_e3m2") {
  for (int code = 0; code < 64; ++code) {
    CAPTURE(code);
    if (code < 16) {
      const __nv_fp4_e2m1 theirs = fp8::fp4_e2m1::from_bits(std::uint8_t(code));
      CHECK(theirs.__x == code);
      CHECK(fp8::fp4_e2m1(theirs).bits() == code);
    }
    const __nv_fp6_e2m3 e2m3 = fp8::fp6_e2m3::from_bits(std::uint8_t(code));
    const __nv_fp6_e3m2 e3m2 = fp8::fp6_e3m2::from_bits(std::uint8_t(code));
    CHECK(e2m3.__x == code);
    CHECK(e3m2.__x == code);
    CHECK(fp8::fp6_e2m3(e2m3).bits() == code);
    CHECK(fp8::fp6_e3m2(e3m2).bits() == code);
  }
  // The constructors agree on a spread of floats (nearest even, saturating).
  for (const float f : {0.1f, -3.3f, 5.0f, 500.0f, -0.3f, 1e-9f}) {
    CAPTURE(f);
    CHECK(fp8::fp4_e2m1(f).bits() == __nv_fp4_e2m1(f).__x);
    CHECK(fp8::fp6_e2m3(f).bits() == __nv_fp6_e2m3(f).__x);
    CHECK(fp8::fp6_e3m2(f).bits() == __nv_fp6_e3m2(f).__x);
  }
}
