// The formats beyond OCP FP8: every code decoded against the textbook formula, classification,
// numeric_limits, negation, every half and bfloat16 input in every policy against the independent
// reference, and the documented results for NaN / Inf / overflow where a format lacks them.
#include <cmath>
#include <cstdint>
#include <limits>

#include <doctest/doctest.h>

#include <fp8/types.hpp>

#include "format_specs.hpp"

using fp8::overflow;
using fp8::rounding;

namespace {

// All eight policy combinations of one source value, in a fixed order.
template <class Format, class Source>
void convert_all_policies(const Source& x, std::uint32_t random_bits, int out[8]) {
  out[0] = fp8::convert_bits<Format, rounding::nearest_even, overflow::saturate>(x);
  out[1] = fp8::convert_bits<Format, rounding::nearest_even, overflow::nonsaturating>(x);
  out[2] = fp8::convert_bits<Format, rounding::toward_zero, overflow::saturate>(x);
  out[3] = fp8::convert_bits<Format, rounding::toward_zero, overflow::nonsaturating>(x);
  out[4] = fp8::convert_bits<Format, rounding::upward, overflow::saturate>(x);
  out[5] = fp8::convert_bits<Format, rounding::upward, overflow::nonsaturating>(x);
  out[6] = fp8::convert_bits<Format, rounding::stochastic, overflow::saturate>(x, random_bits);
  out[7] = fp8::convert_bits<Format, rounding::stochastic, overflow::nonsaturating>(x, random_bits);
}

void expected_all_policies(const reference::format_spec& spec, const std::vector<double>& values, double x,
                           std::uint32_t random_bits, int out[8]) {
  using reference::round_mode;
  const round_mode modes[4] = {round_mode::nearest_even, round_mode::toward_zero, round_mode::upward,
                               round_mode::stochastic};
  for (int m = 0; m < 4; ++m) {
    out[2 * m] = reference::convert(spec, values, x, modes[m], true, random_bits);
    out[2 * m + 1] = reference::convert(spec, values, x, modes[m], false, random_bits);
  }
}

}  // namespace

TEST_CASE_TEMPLATE("every code decodes to the textbook value and classifies as the table says", T,
                   FP8_NEW_FORMAT_TYPES) {
  const auto& spec = reference::spec_of<T>();
  using format = typename T::format;
  CHECK(fp8::format_traits<format>::total_bits == spec.magnitude_bits() + (spec.is_signed ? 1 : 0));
  const auto values = reference::positive_values(spec);
  for (int code = 0; code < spec.code_count(); ++code) {
    CAPTURE(code);
    const T x = T::from_bits(std::uint8_t(code));
    CHECK(fp8::isnan(x) == spec.is_nan(code));
    CHECK(fp8::isinf(x) == spec.is_inf(code));
    CHECK(fp8::signbit(x) == ((code & spec.sign_bit()) != 0));
    if (spec.is_nan(code)) {
      CHECK(std::isnan(static_cast<float>(x)));
      CHECK(std::isnan(static_cast<double>(x)));
      CHECK(fp8::isnan(-x));
      CHECK(fp8::isnan(fp8::abs(x)));
      continue;
    }
    const double expected = reference::value(spec, code);
    CHECK(static_cast<double>(x) == expected);
    CHECK(double(static_cast<float>(x)) == expected);
    CHECK(std::signbit(static_cast<float>(x)) == ((code & spec.sign_bit()) != 0));
    CHECK(fp8::iszero(x) == (expected == 0));
    // Every value converts back to its own code, in every policy, from float and double.
    // (+-Inf saturates to +-max instead: only the non-saturating policies give Inf back.)
    int got[8];
    convert_all_policies<format>(static_cast<float>(x), 0x9E3779B9u, got);
    for (int p = 0; p < 8; ++p) {
      if (spec.is_inf(code) && p % 2 == 0) {
        CHECK(got[p] == ((code & spec.sign_bit()) | spec.max_code()));
      } else {
        CHECK(got[p] == code);
      }
    }
    CHECK(fp8::convert_bits<format, rounding::toward_zero, overflow::nonsaturating>(expected) == code);
    // Negation: the sign bit flips, except fnuz zero (no -0) and unsigned formats (no sign).
    const int negated = (-x).bits();
    if (!spec.is_signed) {
      CHECK(negated == code);
    } else if (spec.kind == reference::specials::fnuz && code == 0) {
      CHECK(negated == 0);
    } else {
      CHECK(negated == (code ^ spec.sign_bit()));
      CHECK(static_cast<double>(-x) == -expected);
    }
  }
}

TEST_CASE_TEMPLATE("numeric_limits follow the table", T, FP8_NEW_FORMAT_TYPES) {
  const auto& spec = reference::spec_of<T>();
  using limits = std::numeric_limits<T>;
  const double max = reference::value(spec, spec.max_code());
  const double min_normal = std::ldexp(1.0, 1 - spec.bias);
  const double min_subnormal = std::ldexp(1.0, 1 - spec.bias - spec.mantissa_bits);
  CHECK(limits::is_specialized);
  CHECK(limits::is_signed == spec.is_signed);
  CHECK(limits::digits == spec.mantissa_bits + 1);
  CHECK(limits::has_infinity == (spec.kind == reference::specials::ieee));
  CHECK(limits::has_quiet_NaN == (spec.kind != reference::specials::none));
  CHECK(static_cast<double>(limits::max()) == max);
  CHECK(static_cast<double>(limits::lowest()) == (spec.is_signed ? -max : 0.0));
  CHECK(static_cast<double>(limits::min()) == min_normal);
  CHECK(static_cast<double>(limits::denorm_min()) == min_subnormal);
  CHECK(static_cast<double>(limits::epsilon()) == std::ldexp(1.0, -spec.mantissa_bits));
  CHECK(static_cast<double>(limits::round_error()) == 0.5);
  // C convention: max = 0.b * 2^max_exponent, min normal = 0.1b * 2^min_exponent.
  CHECK(std::ldexp(0.5, limits::min_exponent) == min_normal);
  CHECK(max < std::ldexp(1.0, limits::max_exponent));
  CHECK(max >= std::ldexp(1.0, limits::max_exponent - 1));
  if (limits::has_quiet_NaN) CHECK(fp8::isnan(limits::quiet_NaN()));
  if (limits::has_infinity) CHECK(static_cast<double>(limits::infinity()) == INFINITY);
  if (!limits::has_infinity) CHECK(limits::infinity().bits() == 0);
}

TEST_CASE("the anchors of the table: a few values written out") {
  CHECK(static_cast<float>(std::numeric_limits<fp8::fp4_e2m1>::max()) == 6.0f);
  CHECK(static_cast<float>(std::numeric_limits<fp8::fp6_e2m3>::max()) == 7.5f);
  CHECK(static_cast<float>(std::numeric_limits<fp8::fp6_e3m2>::max()) == 28.0f);
  CHECK(static_cast<float>(std::numeric_limits<fp8::fp8_e4m3fnuz>::max()) == 240.0f);
  CHECK(static_cast<float>(std::numeric_limits<fp8::fp8_e5m2fnuz>::max()) == 57344.0f);
  CHECK(static_cast<float>(std::numeric_limits<fp8::fp8_e3m4>::max()) == 15.5f);
  CHECK(static_cast<float>(std::numeric_limits<fp8::fp8_e4m3_ieee>::max()) == 240.0f);
  CHECK(static_cast<float>(std::numeric_limits<fp8::fp8_ue4m3>::max()) == 448.0f);
  CHECK(static_cast<float>(std::numeric_limits<fp8::fp8_e4m3fnuz>::denorm_min()) == std::ldexp(1.0f, -10));
  CHECK(static_cast<float>(std::numeric_limits<fp8::fp8_e5m2fnuz>::denorm_min()) == std::ldexp(1.0f, -17));
  // The FP4 value set.
  const float e2m1_values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int code = 0; code < 16; ++code) {
    CAPTURE(code);
    const float expected = (code & 8) ? -e2m1_values[code & 7] : e2m1_values[code & 7];
    CHECK(static_cast<float>(fp8::fp4_e2m1::from_bits(std::uint8_t(code))) == expected);
  }
#if FP8_CONSTEXPR_CONVERSIONS
  static_assert(fp8::fp4_e2m1(5.0f).bits() == 0b0'11'0);  // tie between 4 and 6 goes to even 4
  static_assert(fp8::fp8_e4m3fnuz(-0.0f).bits() == 0x00);
#endif
}

TEST_CASE("NaN, Inf, overflow, -0 and underflow have the documented result in every policy") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // FP4 / FP6: no NaN, no Inf. NaN -> +max (as CUDA); Inf and overflow -> +-max under both policies.
  CHECK(fp8::fp4_e2m1(nan).bits() == 0x7);
  CHECK(fp8::fp4_e2m1(-nan).bits() == 0x7);
  CHECK(fp8::convert<fp8::fp4_e2m1, rounding::nearest_even, overflow::nonsaturating>(-inf).bits() == 0xF);
  CHECK(fp8::convert<fp8::fp4_e2m1, rounding::toward_zero, overflow::nonsaturating>(1e30f).bits() == 0x7);
  CHECK(fp8::fp6_e2m3(-inf).bits() == 0b1'11'111);
  CHECK(fp8::fp6_e3m2(nan).bits() == 0b0'111'11);
  CHECK(fp8::convert<fp8::fp6_e3m2, rounding::upward, overflow::nonsaturating>(29.0f).bits() == 0b0'111'11);
  CHECK(fp8::fp4_e2m1(-0.0f).bits() == 0x8);   // FP4/FP6 have -0
  CHECK(fp8::fp4_e2m1(-0.25f).bits() == 0x8);  // the tie at half the min subnormal goes to even -0
  CHECK(fp8::fp4_e2m1(0.26f).bits() == 0x1);
  // fnuz: NaN, Inf and non-saturating overflow -> the single NaN 0x80; saturation -> +-max; no -0.
  CHECK(fp8::fp8_e4m3fnuz(nan).bits() == 0x80);
  CHECK(fp8::fp8_e4m3fnuz(inf).bits() == 0x7F);
  CHECK(fp8::fp8_e4m3fnuz(-inf).bits() == 0xFF);
  CHECK(fp8::convert<fp8::fp8_e4m3fnuz, rounding::nearest_even, overflow::nonsaturating>(-inf).bits() ==
        0x80);
  CHECK(fp8::convert<fp8::fp8_e4m3fnuz, rounding::nearest_even, overflow::nonsaturating>(248.0f).bits() ==
        0x80);
  CHECK(fp8::convert<fp8::fp8_e4m3fnuz, rounding::nearest_even, overflow::nonsaturating>(247.9f).bits() ==
        0x7F);
  CHECK(fp8::fp8_e4m3fnuz(-0.0f).bits() == 0x00);
  CHECK(fp8::fp8_e5m2fnuz(-std::ldexp(1.0f, -20)).bits() == 0x00);  // underflow: +0, not NaN
  CHECK(fp8::convert<fp8::fp8_e5m2fnuz, rounding::upward>(-std::ldexp(1.0f, -20)).bits() == 0x00);
  CHECK(fp8::convert<fp8::fp8_e5m2fnuz, rounding::nearest_even, overflow::nonsaturating>(inf).bits() == 0x80);
  CHECK(fp8::fp8_e5m2fnuz(1e9f).bits() == 0x7F);
  // IEEE-style: Inf exists; saturate -> +-max, non-saturating -> +-Inf.
  CHECK(fp8::fp8_e4m3_ieee(inf).bits() == 0x77);
  CHECK(fp8::convert<fp8::fp8_e4m3_ieee, rounding::nearest_even, overflow::nonsaturating>(-inf).bits() ==
        0xF8);
  CHECK(fp8::convert<fp8::fp8_e4m3_ieee, rounding::nearest_even, overflow::nonsaturating>(248.0f).bits() ==
        0x78);
  CHECK(fp8::convert<fp8::fp8_e4m3_ieee, rounding::nearest_even, overflow::nonsaturating>(247.9f).bits() ==
        0x77);
  CHECK(fp8::fp8_e3m4(16.0f).bits() == 0x6F);
  CHECK(fp8::convert<fp8::fp8_e3m4, rounding::nearest_even, overflow::nonsaturating>(15.75f).bits() == 0x70);
  CHECK(fp8::fp8_e3m4(-nan).bits() == 0x78);
  // UE4M3: unsigned; negative inputs convert their magnitude; NaN 0x7F; overflow as OCP E4M3.
  CHECK(fp8::fp8_ue4m3(-2.0f).bits() == fp8::fp8_ue4m3(2.0f).bits());
  CHECK(fp8::fp8_ue4m3(nan).bits() == 0x7F);
  CHECK(fp8::fp8_ue4m3(1e6f).bits() == 0x7E);
  CHECK(fp8::convert<fp8::fp8_ue4m3, rounding::nearest_even, overflow::nonsaturating>(1e6f).bits() == 0x7F);
  CHECK(fp8::fp8_ue4m3(-0.0f).bits() == 0x00);
  // fnuz negation and abs keep NaN NaN and zero zero.
  CHECK((-fp8::fp8_e4m3fnuz::from_bits(0x80)).bits() == 0x80);
  CHECK(fp8::abs(fp8::fp8_e4m3fnuz::from_bits(0x80)).bits() == 0x80);
  CHECK(fp8::abs(fp8::fp8_e4m3fnuz::from_bits(0x81)).bits() == 0x01);
  CHECK_FALSE(fp8::iszero(fp8::fp8_e4m3fnuz::from_bits(0x80)));
}

TEST_CASE_TEMPLATE("every half and bfloat16 input converts as the reference says, every policy", T,
                   FP8_NEW_FORMAT_TYPES) {
  const auto& spec = reference::spec_of<T>();
  const auto values = reference::positive_values(spec);
  using format = typename T::format;
  std::uint64_t mismatches = 0;
  for (std::uint32_t code = 0; code < 65536; ++code) {
    const auto half = fp8::float16::from_bits(std::uint16_t(code));
    const auto bf16 = fp8::bfloat16::from_bits(std::uint16_t(code));
    const std::uint32_t random_bits = code * 2654435761u;
    int got[8], expected[8];
    convert_all_policies<format>(half, random_bits, got);
    expected_all_policies(spec, values, static_cast<double>(half), random_bits, expected);
    for (int p = 0; p < 8; ++p) {
      if (got[p] != expected[p] && mismatches++ < 5) {
        CAPTURE(code);
        CAPTURE(p);
        CHECK(got[p] == expected[p]);
      }
    }
    convert_all_policies<format>(bf16, random_bits, got);
    expected_all_policies(spec, values, static_cast<double>(bf16), random_bits, expected);
    for (int p = 0; p < 8; ++p) {
      if (got[p] != expected[p] && mismatches++ < 5) {
        CAPTURE(code);
        CAPTURE(p);
        CHECK(got[p] == expected[p]);
      }
    }
  }
  CHECK(mismatches == 0);
}
