// The type itself: layout, constexpr use, comparisons, arithmetic, hashing, printing, CUDA interop.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>
#include <type_traits>

#include <cuda_fp8.h>
#include <doctest/doctest.h>

#include <fp8/fp8.hpp>

#include "reference.hpp"

TEST_CASE_TEMPLATE("the types are one trivial byte", T, fp8::fp8_e4m3, fp8::fp8_e5m2, fp8::fp8_e8m0) {
  static_assert(sizeof(T) == 1);
  static_assert(std::is_trivially_default_constructible_v<T>);
  static_assert(std::is_trivially_copyable_v<T>);
  static_assert(std::is_standard_layout_v<T>);
  static_assert(!std::is_convertible_v<float, T>, "conversion from float is explicit");
  static_assert(!std::is_convertible_v<T, float>, "conversion to float is explicit");
  CHECK(T{}.bits() == 0);  // value-initialised
}

#if FP8_CONSTEXPR_CONVERSIONS
// Conversions in both directions are usable in constant expressions.
static_assert(fp8::fp8_e4m3(448.0f).bits() == 0x7E);
static_assert(fp8::fp8_e4m3(1.0625 + 0x1p-30).bits() == 0x39);
static_assert(static_cast<float>(fp8::fp8_e5m2::from_bits(0x7B)) == 57344.0f);
static_assert(fp8::convert<fp8::fp8_e4m3, fp8::rounding::toward_zero>(1.99f).bits() == 0x3F);
static_assert(fp8::fp8_e4m3(1.0f) + fp8::fp8_e4m3(0.125f) == fp8::fp8_e4m3(1.125f));
TEST_CASE("conversions are constexpr on this compiler") { CHECK(FP8_CONSTEXPR_CONVERSIONS == 1); }
#endif

TEST_CASE_TEMPLATE("comparisons follow the values: NaN unordered, +0 == -0", T, fp8::fp8_e4m3,
                   fp8::fp8_e5m2) {
  for (int a = 0; a < 256; ++a) {
    for (int b = 0; b < 256; ++b) {
      const T x = T::from_bits(std::uint8_t(a));
      const T y = T::from_bits(std::uint8_t(b));
      const double dx = static_cast<double>(x);
      const double dy = static_cast<double>(y);
      CAPTURE(a);
      CAPTURE(b);
      REQUIRE((x == y) == (dx == dy));
      REQUIRE((x != y) == (dx != dy));
      REQUIRE((x < y) == (dx < dy));
      REQUIRE((x <= y) == (dx <= dy));
      REQUIRE((x > y) == (dx > dy));
      REQUIRE((x >= y) == (dx >= dy));
    }
  }
  CHECK(T(0.0f) == T(-0.0f));
  CHECK_FALSE(std::numeric_limits<T>::quiet_NaN() == std::numeric_limits<T>::quiet_NaN());
}

TEST_CASE_TEMPLATE("arithmetic is correctly rounded (computed exactly, rounded once, saturating)", T,
                   fp8::fp8_e4m3, fp8::fp8_e5m2) {
  const auto& spec = std::is_same_v<T, fp8::fp8_e4m3> ? reference::e4m3 : reference::e5m2;
  // Sums and products of two FP8 values are exact in double; the reference rounds them once.
  for (int a = 0; a < 256; a += 3) {
    for (int b = 0; b < 256; ++b) {
      const T x = T::from_bits(std::uint8_t(a));
      const T y = T::from_bits(std::uint8_t(b));
      if (!fp8::isfinite(x) || !fp8::isfinite(y)) continue;
      CAPTURE(a);
      CAPTURE(b);
      const double dx = static_cast<double>(x);
      const double dy = static_cast<double>(y);
      REQUIRE((x + y).bits() == reference::convert(spec, dx + dy, reference::mode::nearest_even, true));
      REQUIRE((x - y).bits() == reference::convert(spec, dx - dy, reference::mode::nearest_even, true));
      REQUIRE((x * y).bits() == reference::convert(spec, dx * dy, reference::mode::nearest_even, true));
    }
  }
  T accumulator(1.0f);
  accumulator += T(0.5f);
  accumulator *= T(2.0f);
  accumulator -= T(1.0f);
  accumulator /= T(4.0f);
  CHECK(static_cast<float>(accumulator) == 0.5f);
  // Results round like the constructor, which saturates: even an infinite quotient becomes max.
  CHECK((T(1.0f) / T(0.0f)).bits() == std::numeric_limits<T>::max().bits());
  CHECK(fp8::isnan(T(0.0f) / T(0.0f)));
}

TEST_CASE("hash agrees with equality and streams print the value") {
  const std::hash<fp8::fp8_e4m3> hash;
  CHECK(hash(fp8::fp8_e4m3(0.0f)) == hash(fp8::fp8_e4m3(-0.0f)));
  CHECK(hash(fp8::fp8_e4m3(1.0f)) != hash(fp8::fp8_e4m3(2.0f)));
  std::ostringstream out;
  out << fp8::fp8_e4m3(448.0f) << ' ' << fp8::fp8_e5m2(-0.25f) << ' ' << fp8::fp8_e8m0(4.0f);
  CHECK(out.str() == "448 -0.25 4");
}

TEST_CASE_TEMPLATE("bit-exact interop with CUDA's __nv_fp8 types", T, fp8::fp8_e4m3, fp8::fp8_e5m2) {
  using cuda_type = std::conditional_t<std::is_same_v<T, fp8::fp8_e4m3>, __nv_fp8_e4m3, __nv_fp8_e5m2>;
  for (int code = 0; code < 256; ++code) {
    CAPTURE(code);
    const T ours = T::from_bits(std::uint8_t(code));
    const cuda_type theirs = ours;
    CHECK(theirs.__x == code);
    CHECK(T(theirs).bits() == code);
  }
  // The default constructors agree on a spread of floats (the exhaustive tests cover all of them).
  for (const float f : {0.1f, -3.3f, 500.0f, 1e-9f, 70000.0f}) {
    CAPTURE(f);
    CHECK(T(f).bits() == cuda_type(f).__x);
  }
}

TEST_CASE("numeric_limits match the numeric contract of docs/design.md") {
  using l4 = std::numeric_limits<fp8::fp8_e4m3>;
  using l5 = std::numeric_limits<fp8::fp8_e5m2>;
  using l8 = std::numeric_limits<fp8::fp8_e8m0>;
  CHECK(l4::is_specialized);
  CHECK(l4::digits == 4);
  CHECK(l5::digits == 3);
  CHECK(l4::min_exponent == -5);
  CHECK(l5::min_exponent == -13);
  CHECK(l4::max_exponent == 9);
  CHECK(l5::max_exponent == 16);
  CHECK(static_cast<float>(l4::epsilon()) == 0.125f);
  CHECK(static_cast<float>(l5::epsilon()) == 0.25f);
  CHECK(static_cast<float>(l4::min()) == std::ldexp(1.0f, -6));
  CHECK(static_cast<float>(l5::min()) == std::ldexp(1.0f, -14));
  CHECK(static_cast<float>(l4::denorm_min()) == std::ldexp(1.0f, -9));
  CHECK(static_cast<float>(l5::denorm_min()) == std::ldexp(1.0f, -16));
  CHECK(static_cast<float>(l4::max()) == 448.0f);
  CHECK(static_cast<float>(l5::max()) == 57344.0f);
  CHECK(static_cast<float>(l4::lowest()) == -448.0f);
  CHECK(static_cast<float>(l5::lowest()) == -57344.0f);
  CHECK_FALSE(l4::has_infinity);
  CHECK(l5::has_infinity);
  CHECK(std::isinf(static_cast<float>(l5::infinity())));
  CHECK(fp8::isnan(l4::quiet_NaN()));
  CHECK(fp8::isnan(l5::quiet_NaN()));
  CHECK(static_cast<float>(l4::round_error()) == 0.5f);
  CHECK(l4::digits10 == 0);
  CHECK(l4::max_digits10 == 3);
  CHECK(l4::has_denorm == std::denorm_present);
  // E8M0: unsigned powers of two from 2^-127 to 2^127, no zero, no subnormals.
  CHECK_FALSE(l8::is_signed);
  CHECK(l8::digits == 1);
  CHECK(static_cast<double>(l8::min()) == std::ldexp(1.0, -127));
  CHECK(static_cast<double>(l8::denorm_min()) == std::ldexp(1.0, -127));
  CHECK(static_cast<double>(l8::max()) == std::ldexp(1.0, 127));
  CHECK(static_cast<float>(l8::epsilon()) == 1.0f);
  CHECK(l8::has_denorm == std::denorm_absent);
  CHECK(l8::min_exponent == -126);
  CHECK(l8::max_exponent == 128);
}
