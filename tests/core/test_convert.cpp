// Conversions from half, bfloat16, double, integers and other FP8 formats; the double-rounding traps;
// ties at every binade and at the subnormal boundary; stochastic rounding; E8M0 against CUDA.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include <cuda_fp8.h>
#include <doctest/doctest.h>

#include <fp8/fp8.hpp>

#include "reference.hpp"

using fp8::overflow;
using fp8::rounding;

namespace {

template <class Format>
struct format_info;
template <>
struct format_info<fp8::e4m3_format> {
  static constexpr const reference::fp8_spec& spec = reference::e4m3;
  static constexpr __nv_fp8_interpretation_t cuda = __NV_E4M3;
};
template <>
struct format_info<fp8::e5m2_format> {
  static constexpr const reference::fp8_spec& spec = reference::e5m2;
  static constexpr __nv_fp8_interpretation_t cuda = __NV_E5M2;
};

float float_from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

TEST_CASE_TEMPLATE("all 65536 half and bfloat16 inputs convert as CUDA and the reference do", Format,
                   fp8::e4m3_format, fp8::e5m2_format) {
  using info = format_info<Format>;
  for (std::uint32_t code = 0; code < 65536; ++code) {
    CAPTURE(code);
    __half_raw half_raw;
    half_raw.x = std::uint16_t(code);
    __nv_bfloat16_raw bf16_raw;
    bf16_raw.x = std::uint16_t(code);
    const auto ours_half = fp8::float16::from_bits(std::uint16_t(code));
    const auto ours_bf16 = fp8::bfloat16::from_bits(std::uint16_t(code));
    const __half cuda_half(half_raw);
    const __nv_bfloat16 cuda_bf16(bf16_raw);

    for (const bool saturate : {true, false}) {
      CAPTURE(saturate);
      const auto cuda_mode = saturate ? __NV_SATFINITE : __NV_NOSAT;
      const int from_half_rn =
          saturate ? fp8::convert_bits<Format, rounding::nearest_even, overflow::saturate>(ours_half)
                   : fp8::convert_bits<Format, rounding::nearest_even, overflow::nonsaturating>(ours_half);
      const int from_bf16_rn =
          saturate ? fp8::convert_bits<Format, rounding::nearest_even, overflow::saturate>(ours_bf16)
                   : fp8::convert_bits<Format, rounding::nearest_even, overflow::nonsaturating>(ours_bf16);
      const int from_half_rz =
          saturate ? fp8::convert_bits<Format, rounding::toward_zero, overflow::saturate>(ours_half)
                   : fp8::convert_bits<Format, rounding::toward_zero, overflow::nonsaturating>(ours_half);
      const int from_bf16_rz =
          saturate ? fp8::convert_bits<Format, rounding::toward_zero, overflow::saturate>(ours_bf16)
                   : fp8::convert_bits<Format, rounding::toward_zero, overflow::nonsaturating>(ours_bf16);
      CHECK(from_half_rn == __nv_cvt_halfraw_to_fp8(half_raw, cuda_mode, info::cuda));
      CHECK(from_bf16_rn == __nv_cvt_bfloat16raw_to_fp8(bf16_raw, cuda_mode, info::cuda));
      const double half_value = static_cast<double>(ours_half);
      const double bf16_value = static_cast<double>(ours_bf16);
      CHECK(from_half_rn ==
            reference::convert(info::spec, half_value, reference::mode::nearest_even, saturate));
      CHECK(from_bf16_rn ==
            reference::convert(info::spec, bf16_value, reference::mode::nearest_even, saturate));
      CHECK(from_half_rz ==
            reference::convert(info::spec, half_value, reference::mode::toward_zero, saturate));
      CHECK(from_bf16_rz ==
            reference::convert(info::spec, bf16_value, reference::mode::toward_zero, saturate));
    }
    // CUDA's own 16-bit types are accepted directly and give the same codes.
    CHECK(fp8::convert_bits<Format>(cuda_half) == fp8::convert_bits<Format>(ours_half));
    CHECK(fp8::convert_bits<Format>(cuda_bf16) == fp8::convert_bits<Format>(ours_bf16));
  }
}

TEST_CASE("double converts in one rounding: the double-rounding traps") {
  // 1.0625 is the midpoint of 1.0 (0x38) and 1.125 (0x39); 2^-30 above it must round up. Narrowing to
  // float first would lose the 2^-30 and round the tie to even, 0x38.
  const double trap = 1.0625 + std::ldexp(1.0, -30);
  CHECK(fp8::fp8_e4m3(trap).bits() == 0x39);
  CHECK(fp8::fp8_e4m3(float(trap)).bits() == 0x38);
  CHECK(__nv_cvt_double_to_fp8(trap, __NV_SATFINITE, __NV_E4M3) == 0x39);
  // Same for E5M2: 1.125 is the midpoint of 1.0 (0x3C) and 1.25 (0x3D).
  const double trap_e5m2 = 1.125 + std::ldexp(1.0, -40);
  CHECK(fp8::fp8_e5m2(trap_e5m2).bits() == 0x3D);
  CHECK(fp8::fp8_e5m2(float(trap_e5m2)).bits() == 0x3C);
  // And below a tie: just under the midpoint must round down even if float would round to the tie.
  const double under = 1.0625 - std::ldexp(1.0, -35);
  CHECK(float(under) == 1.0625f);
  CHECK(fp8::fp8_e4m3(under).bits() == 0x38);
  CHECK(fp8::fp8_e4m3(float(under)).bits() == 0x38);       // tie to even lands on the same code here
  const double under_odd = 1.1875 - std::ldexp(1.0, -35);  // midpoint of 0x39 and 0x3A
  CHECK(fp8::fp8_e4m3(under_odd).bits() == 0x39);
  CHECK(fp8::fp8_e4m3(float(under_odd)).bits() == 0x3A);
}

TEST_CASE_TEMPLATE("every midpoint, and its neighbours, rounds as the reference and CUDA's double path",
                   Format, fp8::e4m3_format, fp8::e5m2_format) {
  using info = format_info<Format>;
  const auto values = reference::positive_values(info::spec);
  // Between consecutive codes: binade boundaries, the subnormal range, zero-to-min-subnormal, and the
  // overflow threshold (max to the virtual next value).
  for (std::size_t i = 0; i + 1 < values.size(); ++i) {
    const double midpoint = (values[i] + values[i + 1]) / 2;
    for (const double x : {midpoint, std::nextafter(midpoint, 0.0), std::nextafter(midpoint, INFINITY)}) {
      for (const double signed_x : {x, -x}) {
        CAPTURE(signed_x);
        for (const bool saturate : {true, false}) {
          CAPTURE(saturate);
          const auto cuda_mode = saturate ? __NV_SATFINITE : __NV_NOSAT;
          const int rn =
              saturate ? fp8::convert_bits<Format, rounding::nearest_even, overflow::saturate>(signed_x)
                       : fp8::convert_bits<Format, rounding::nearest_even, overflow::nonsaturating>(signed_x);
          const int rz =
              saturate ? fp8::convert_bits<Format, rounding::toward_zero, overflow::saturate>(signed_x)
                       : fp8::convert_bits<Format, rounding::toward_zero, overflow::nonsaturating>(signed_x);
          CHECK(rn == reference::convert(info::spec, signed_x, reference::mode::nearest_even, saturate));
          CHECK(rz == reference::convert(info::spec, signed_x, reference::mode::toward_zero, saturate));
          CHECK(rn == __nv_cvt_double_to_fp8(signed_x, cuda_mode, info::cuda));
        }
      }
    }
  }
}

TEST_CASE("the overflow thresholds of docs/design.md hold") {
  using e4m3_nosat = fp8::fp8_e4m3;
  CHECK(fp8::fp8_e4m3(464.0).bits() == 0x7E);  // the tie rounds to even 448
  CHECK(fp8::convert<e4m3_nosat, rounding::nearest_even, overflow::nonsaturating>(464.0).bits() == 0x7E);
  CHECK(fp8::convert<e4m3_nosat, rounding::nearest_even, overflow::nonsaturating>(std::nextafter(464.0, 1e9))
            .bits() == 0x7F);
  CHECK(fp8::convert<fp8::fp8_e5m2, rounding::nearest_even, overflow::nonsaturating>(61440.0).bits() == 0x7C);
  CHECK(fp8::convert<fp8::fp8_e5m2, rounding::nearest_even, overflow::nonsaturating>(
            std::nextafter(61440.0, 0.0))
            .bits() == 0x7B);
  CHECK(fp8::convert<fp8::fp8_e5m2, rounding::nearest_even, overflow::nonsaturating>(-61440.0).bits() ==
        0xFC);
}

TEST_CASE("special inputs have a documented result in every policy") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // NaN in -> the canonical NaN 0x7F, sign dropped (CUDA's float path and hardware do the same).
  CHECK(fp8::fp8_e4m3(nan).bits() == 0x7F);
  CHECK(fp8::fp8_e4m3(-nan).bits() == 0x7F);
  CHECK(fp8::fp8_e5m2(-nan).bits() == 0x7F);
  CHECK(fp8::convert<fp8::fp8_e5m2, rounding::toward_zero, overflow::nonsaturating>(-nan).bits() == 0x7F);
  CHECK(fp8::fp8_e4m3(-double(nan)).bits() == 0x7F);  // also from double (CUDA's double path keeps the sign)
  CHECK(__nv_cvt_double_to_fp8(-double(nan), __NV_SATFINITE, __NV_E4M3) == 0xFF);  // ...as documented
  // +-Inf: saturate -> +-max; non-saturating -> E4M3 NaN with the sign, E5M2 +-Inf.
  CHECK(fp8::fp8_e4m3(inf).bits() == 0x7E);
  CHECK(fp8::fp8_e4m3(-inf).bits() == 0xFE);
  CHECK(fp8::fp8_e5m2(-inf).bits() == 0xFB);
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::nearest_even, overflow::nonsaturating>(-inf).bits() == 0xFF);
  CHECK(fp8::convert<fp8::fp8_e5m2, rounding::nearest_even, overflow::nonsaturating>(inf).bits() == 0x7C);
  CHECK(fp8::convert<fp8::fp8_e5m2, rounding::toward_zero, overflow::nonsaturating>(-inf).bits() == 0xFC);
  // Out of range finite: toward_zero also overflows when the truncated value lies past max
  // (500 truncates to 480 in E4M3's precision; 480 is not finite in E4M3).
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::toward_zero, overflow::saturate>(500.0f).bits() == 0x7E);
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::toward_zero, overflow::nonsaturating>(500.0f).bits() == 0x7F);
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::toward_zero, overflow::nonsaturating>(479.0f).bits() == 0x7E);
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::nearest_even, overflow::saturate>(1e30f).bits() == 0x7E);
  // Subnormals are kept, ties at the bottom go to even (zero), -0 keeps its sign, underflow keeps sign.
  CHECK(fp8::fp8_e4m3(std::ldexp(1.0f, -9)).bits() == 0x01);
  CHECK(fp8::fp8_e4m3(std::ldexp(1.0f, -10)).bits() == 0x00);
  CHECK(fp8::fp8_e4m3(std::ldexp(3.0f, -10)).bits() == 0x02);  // 1.5 quanta -> 2 (even)
  CHECK(fp8::fp8_e4m3(-std::ldexp(1.0f, -11)).bits() == 0x80);
  CHECK(fp8::fp8_e4m3(-0.0f).bits() == 0x80);
  CHECK(fp8::fp8_e5m2(-0.0).bits() == 0x80);
  CHECK(fp8::fp8_e5m2(std::ldexp(1.0f, -16)).bits() == 0x01);
  CHECK(fp8::fp8_e4m3(std::numeric_limits<float>::denorm_min()).bits() == 0x00);
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::upward>(std::numeric_limits<float>::denorm_min()).bits() ==
        0x01);
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::upward>(-std::numeric_limits<float>::denorm_min()).bits() ==
        0x80);
}

TEST_CASE("upward rounding moves toward +Inf") {
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::upward>(1.01f).bits() == 0x39);
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::upward>(-1.01f).bits() == 0xB8);
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::upward>(1.0f).bits() == 0x38);
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::upward, overflow::nonsaturating>(449.0f).bits() == 0x7F);
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::upward, overflow::saturate>(449.0f).bits() == 0x7E);
}

TEST_CASE("integers convert exactly like the same value in double") {
  for (int i = -70000; i <= 70000; ++i) {
    CAPTURE(i);
    CHECK(fp8::fp8_e4m3(i).bits() == fp8::fp8_e4m3(double(i)).bits());
    CHECK(fp8::fp8_e5m2(i).bits() == fp8::fp8_e5m2(double(i)).bits());
    CHECK(fp8::convert_bits<fp8::e5m2_format, rounding::toward_zero, overflow::nonsaturating>(i) ==
          fp8::convert_bits<fp8::e5m2_format, rounding::toward_zero, overflow::nonsaturating>(double(i)));
  }
  CHECK(fp8::fp8_e4m3(std::numeric_limits<std::int64_t>::min()).bits() == 0xFE);
  CHECK(fp8::fp8_e5m2(std::numeric_limits<std::uint64_t>::max()).bits() == 0x7B);
  CHECK(fp8::convert<fp8::fp8_e5m2, rounding::nearest_even, overflow::nonsaturating>(
            std::numeric_limits<std::int64_t>::min())
            .bits() == 0xFC);
  CHECK(fp8::bfloat16(std::numeric_limits<std::uint64_t>::max()).bits() == 0x5F80);  // 2^64 after rounding
  CHECK(fp8::fp8_e4m3(std::uint8_t(255)).bits() == fp8::fp8_e4m3(256.0).bits());
}

TEST_CASE("FP8 to FP8 rounds once from the exact value") {
  for (int code = 0; code < 256; ++code) {
    CAPTURE(code);
    const auto e5m2 = fp8::fp8_e5m2::from_bits(std::uint8_t(code));
    const auto e4m3 = fp8::fp8_e4m3::from_bits(std::uint8_t(code));
    CHECK(fp8::fp8_e4m3(e5m2).bits() == fp8::fp8_e4m3(static_cast<double>(e5m2)).bits());
    CHECK(fp8::fp8_e5m2(e4m3).bits() == fp8::fp8_e5m2(static_cast<double>(e4m3)).bits());
  }
}

TEST_CASE("stochastic rounding goes up with probability equal to the discarded fraction") {
  // 1.03125 lies a quarter of the way from 1.0 (0x38) to 1.125 (0x39).
  const float x = 1.03125f;
  int ups = 0;
  for (std::uint64_t random = 0; random < (std::uint64_t(1) << 32); random += (std::uint64_t(1) << 16)) {
    const auto r = fp8::convert<fp8::fp8_e4m3, rounding::stochastic>(x, std::uint32_t(random));
    REQUIRE((r.bits() == 0x38 || r.bits() == 0x39));
    ups += r.bits() == 0x39;
  }
  CHECK(ups == 65536 / 4);  // exactly: up iff random >= 3/4 * 2^32
  // Random bits 0 truncate; all ones round up anything inexact; exact values never move.
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::stochastic>(x, 0u).bits() == 0x38);
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::stochastic>(x, 0xFFFFFFFFu).bits() == 0x39);
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::stochastic>(1.125f, 0xFFFFFFFFu).bits() == 0x39);
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::stochastic>(-x, 0xFFFFFFFFu).bits() == 0xB9);  // magnitude
  // Near max, rounding up overflows and the policy applies.
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::stochastic, overflow::saturate>(460.0f, 0xFFFFFFFFu).bits() ==
        0x7E);
  CHECK(fp8::convert<fp8::fp8_e4m3, rounding::stochastic, overflow::nonsaturating>(460.0f, 0xFFFFFFFFu)
            .bits() == 0x7F);
  // Unbiased on average: over an even grid of random bits the mean equals the input.
  for (const float value : {0.3f, -1.7f, 0.0123f, 300.0f, std::ldexp(1.3f, -8)}) {
    CAPTURE(value);
    double sum = 0;
    const int steps = 1 << 12;
    for (int k = 0; k < steps; ++k) {
      const auto random = std::uint32_t((std::uint64_t(k) << 32) / steps);
      sum += static_cast<double>(fp8::convert<fp8::fp8_e5m2, rounding::stochastic>(value, random));
    }
    // The grid resolves the fraction to 2^-12 of an ulp; the ulp of these values is < |value|/2.
    CHECK(std::fabs(sum / steps - double(value)) <= std::fabs(double(value)) * std::ldexp(1.0, -12));
  }
}

TEST_CASE("E8M0 conversions agree with CUDA's round-toward-zero and round-up, both saturation modes") {
  auto check = [](float x) {
    CAPTURE(x);
    CHECK(fp8::convert_bits<fp8::e8m0_format, rounding::toward_zero, overflow::saturate>(x) ==
          __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero));
    CHECK(fp8::convert_bits<fp8::e8m0_format, rounding::toward_zero, overflow::nonsaturating>(x) ==
          __nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundZero));
    CHECK(fp8::convert_bits<fp8::e8m0_format, rounding::upward, overflow::saturate>(x) ==
          __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf));
    CHECK(fp8::convert_bits<fp8::e8m0_format, rounding::upward, overflow::nonsaturating>(x) ==
          __nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundPosInf));
  };
  // Every power of two, its neighbours, and specials; then a spread of all bit patterns.
  for (int e = -149; e <= 127; ++e) {
    const float p = std::ldexp(1.0f, e);
    for (const float x : {p, std::nextafter(p, 0.0f), std::nextafter(p, INFINITY), -p, 1.5f * p}) check(x);
  }
  for (const float x :
       {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
        std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max()}) {
    check(x);
  }
  for (std::uint64_t bits = 0; bits < (std::uint64_t(1) << 32); bits += 65521)
    check(float_from_bits(std::uint32_t(bits)));
}
