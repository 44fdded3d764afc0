// Scale formulas: scale = (fp8_max / amax) / 2^margin in float, the fallbacks for amax 0 / Inf / NaN,
// the FLT_MAX and FLT_MIN clamps, power-of-two rounding, and the OCP MX E8M0 exponent.
#include <doctest/doctest.h>

#include <fp8/scaling.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <string>

namespace {
using fp8::fp8_format;
const float inf = std::numeric_limits<float>::infinity();
const float qnan = std::numeric_limits<float>::quiet_NaN();
const float denorm_min = std::numeric_limits<float>::denorm_min();
}  // namespace

TEST_CASE("largest finite values and MX emax come from the format descriptors") {
  CHECK(fp8::max_finite(fp8_format::e4m3) == 448.0f);
  CHECK(fp8::max_finite(fp8_format::e5m2) == 57344.0f);
  CHECK(fp8::max_exponent(fp8_format::e4m3) == 8);
  CHECK(fp8::max_exponent(fp8_format::e5m2) == 15);
}

TEST_CASE("scale = fp8_max / amax / 2^margin, computed in float") {
  CHECK(fp8::scale_from_amax(3.5f, fp8_format::e4m3) == 128.0f);
  CHECK(fp8::scale_from_amax(3.5f, fp8_format::e4m3, 1) == 64.0f);
  CHECK(fp8::scale_from_amax(3.0f, fp8_format::e4m3) == 448.0f / 3.0f);
  CHECK(fp8::scale_from_amax(57344.0f, fp8_format::e5m2) == 1.0f);
  // Against the formula on random amaxes and margins below 128: two float divisions, the second by
  // 2^margin (the library scales by 2^-margin with ldexpf, which rounds alike, subnormals included,
  // before the clamp at FLT_MIN).
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> exponent(-100.0f, 100.0f);
  for (int i = 0; i < 10000; ++i) {
    const float amax = std::exp2(exponent(rng));
    const int margin = i % 2 == 0 ? int(rng() % 5) : int(rng() % 128);
    const volatile float quotient = 448.0f / amax;  // volatile: no fusing or reassociation
    const float expected = std::max(quotient / std::ldexp(1.0f, margin), FLT_MIN);
    CAPTURE(amax);
    CAPTURE(margin);
    CHECK(fp8::scale_from_amax(amax, fp8_format::e4m3, margin) == expected);
  }
}

TEST_CASE("amax 0, Inf or NaN gives the fallback (previous scale, or 1), never Inf or NaN") {
  for (const float amax : {0.0f, -0.0f, inf, qnan}) {
    CAPTURE(amax);
    CHECK(fp8::scale_from_amax(amax, fp8_format::e4m3) == 1.0f);
    CHECK(fp8::scale_from_amax(amax, fp8_format::e5m2, 3, true, 0.125f) == 0.125f);
  }
}

TEST_CASE("a tiny amax whose division overflows gives FLT_MAX; power of two gives 2^127") {
  CHECK(fp8::scale_from_amax(denorm_min, fp8_format::e4m3) == FLT_MAX);
  CHECK(fp8::scale_from_amax(1e-38f, fp8_format::e5m2) == FLT_MAX);
  CHECK(fp8::scale_from_amax(denorm_min, fp8_format::e4m3, 0, true) == std::ldexp(1.0f, 127));
  const fp8::scale_pair pair = fp8::scale_pair_from_amax(denorm_min, fp8_format::e4m3);
  CHECK(std::isfinite(pair.scale_inv));
  CHECK(pair.scale_inv > 0.0f);
}

TEST_CASE("a huge amax gives a small normal scale; a huge margin clamps at FLT_MIN so 1/scale stays finite") {
  CHECK(fp8::scale_from_amax(FLT_MAX, fp8_format::e4m3) == 448.0f / FLT_MAX);
  CHECK(fp8::scale_from_amax(1.0f, fp8_format::e4m3, 200) == FLT_MIN);
  CHECK(fp8::scale_from_amax(FLT_MAX, fp8_format::e4m3, 10) == FLT_MIN);
  CHECK(std::isfinite(fp8::scale_pair_from_amax(FLT_MAX, fp8_format::e4m3, 1000).scale_inv));
}

TEST_CASE("margins of 128 and more (2^margin infinite in float) never give a NaN scale") {
  // fp8_max / amax overflows for these amaxes; a division by 2^margin computed as a float was then
  // inf / inf. The overflowed quotient clamps at FLT_MAX, as it does for small margins.
  for (const float amax : {FLT_MIN, 1e-40f, 1e-45f}) {
    for (const int margin : {127, 128, 130, 1000}) {
      CAPTURE(amax);
      CAPTURE(margin);
      CHECK(fp8::scale_from_amax(amax, fp8_format::e4m3, margin) == FLT_MAX);
      CHECK(fp8::scale_from_amax(amax, fp8_format::e5m2, margin, true) == 0x1p127f);
    }
  }
  CHECK(fp8::scale_from_amax(1.0f, fp8_format::e4m3, 140) == FLT_MIN);  // 448 * 2^-140: clamped up
  CHECK(fp8::scale_from_amax(1.0f, fp8_format::e4m3, 128) ==
        std::ldexp(448.0f, -128));  // 2^-119.2: normal, exact
}

TEST_CASE("denormal amaxes that do not overflow the division") {
  const float amax = 1e-36f;  // normal, but 448 / amax = 4.48e38 overflows
  CHECK(fp8::scale_from_amax(amax, fp8_format::e4m3) == FLT_MAX);
  const float small = 2e-36f;  // 448 / 2e-36 = 2.24e38 fits
  CHECK(fp8::scale_from_amax(small, fp8_format::e4m3) == 448.0f / small);
}

TEST_CASE("power-of-two scales round down, so amax * scale still fits") {
  CHECK(fp8::scale_from_amax(3.0f, fp8_format::e4m3, 0, true) == 128.0f);
  CHECK(fp8::scale_from_amax(3.5f, fp8_format::e4m3, 0, true) == 128.0f);
  CHECK(fp8::scale_from_amax(448.0f, fp8_format::e4m3, 0, true) == 1.0f);
  CHECK(fp8::scale_from_amax(449.0f, fp8_format::e4m3, 0, true) == 0.5f);
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> exponent(-60.0f, 60.0f);
  for (int i = 0; i < 1000; ++i) {
    const float amax = std::exp2(exponent(rng));
    const float scale = fp8::scale_from_amax(amax, fp8_format::e5m2, 0, true);
    int e = 0;
    CHECK(std::frexp(scale, &e) == 0.5f);
    CHECK(double(amax) * scale <= 57344.0);
  }
}

TEST_CASE("bad margin and fallback are refused with a message") {
  CHECK_THROWS_WITH_AS(fp8::scale_from_amax(1.0f, fp8_format::e4m3, -1),
                       doctest::Contains("margin must be >= 0"), fp8::invalid_argument);
  CHECK_THROWS_WITH_AS(fp8::scale_from_amax(1.0f, fp8_format::e4m3, 0, false, 0.0f),
                       doctest::Contains("fallback"), fp8::invalid_argument);
  CHECK_THROWS_AS(fp8::scale_from_amax(1.0f, fp8_format::e4m3, 0, false, inf), fp8::invalid_argument);
  CHECK_THROWS_AS(fp8::scale_from_amax(1.0f, fp8_format::e4m3, 0, false, qnan), fp8::invalid_argument);
}

TEST_CASE("OCP MX shared exponent: floor(log2(amax)) - emax as E8M0, clamped, 1 for unusable amaxes") {
  CHECK(int(fp8::mx_scale_code(100.0f, fp8_format::e4m3)) == 127 + 6 - 8);
  CHECK(int(fp8::mx_scale_code(100.0f, fp8_format::e5m2)) == 127 + 6 - 15);
  CHECK(int(fp8::mx_scale_code(448.0f, fp8_format::e4m3)) == 127);  // 448 = 1.75 * 2^8
  CHECK(int(fp8::mx_scale_code(512.0f, fp8_format::e4m3)) == 128);
  CHECK(int(fp8::mx_scale_code(std::nextafter(512.0f, 0.0f), fp8_format::e4m3)) == 127);
  CHECK(int(fp8::mx_scale_code(FLT_MAX, fp8_format::e4m3)) == 127 + 127 - 8);
  CHECK(int(fp8::mx_scale_code(denorm_min, fp8_format::e4m3)) == 0);  // clamped at 2^-127
  CHECK(int(fp8::mx_scale_code(FLT_MIN, fp8_format::e4m3)) == 0);     // 2^-126 - 8 < -127
  CHECK(int(fp8::mx_scale_code(std::ldexp(1.0f, -119), fp8_format::e4m3)) == 0);
  CHECK(int(fp8::mx_scale_code(std::ldexp(1.0f, -118), fp8_format::e4m3)) == 1);
  for (const float amax : {0.0f, inf, qnan}) CHECK(int(fp8::mx_scale_code(amax, fp8_format::e4m3)) == 127);
  // The element factor and the inverse are exact powers of two for every code an amax can give; the
  // factor, built from float exponent bits, also for the codes past that (denormals 2^-127, 2^-128).
  for (int code = 0; code <= 255; ++code) {
    CAPTURE(code);
    CHECK(fp8::mx_element_scale(std::uint8_t(code)) == float(std::ldexp(1.0, 127 - code)));
    if (code <= 127 + 127 - 8)
      CHECK(fp8::mx_scale_inv(std::uint8_t(code)) == float(std::ldexp(1.0, code - 127)));
  }
}

TEST_CASE("amax helpers: NaN wins over Inf wins over finite, in either order") {
  CHECK(std::isnan(fp8::detail::amax_max(qnan, inf)));
  CHECK(std::isnan(fp8::detail::amax_max(inf, qnan)));
  CHECK(std::isinf(fp8::detail::amax_max(3.0f, inf)));
  CHECK(fp8::detail::amax_max(3.0f, 2.0f) == 3.0f);
  CHECK(fp8::detail::amax_max(-0.0f, 0.0f) == 0.0f);
  const std::uint32_t canonical =
      fp8::detail::bit_cast<std::uint32_t>(fp8::detail::amax_from_bits(0x7F800001u));
  CHECK(canonical == 0x7FC00000u);
}
