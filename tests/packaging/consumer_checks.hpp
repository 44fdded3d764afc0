// Conversions whose codes the OCP FP8 spec fixes, checked by every packaging consumer (find_package,
// add_subdirectory, vendored headers; on the host and, under nvcc, on the device too).
#pragma once

#include <cmath>  // HUGE_VALF, NAN: builtins that device code can use, unlike std::numeric_limits
#include <cstdio>

#include <fp8/fp8.hpp>

namespace consumer {

// Counts one wrong result and says which.
FP8_HOST_DEVICE inline int check_code(const char* expression, unsigned got, unsigned expected) {
  if (got == expected) return 0;
  std::printf("wrong: %s gave 0x%02X, expected 0x%02X\n", expression, got, expected);
  return 1;
}
FP8_HOST_DEVICE inline int check_value(const char* expression, float got, float expected) {
  if (got == expected) return 0;
  std::printf("wrong: %s gave %a, expected %a\n", expression, double(got), double(expected));
  return 1;
}
#define FP8_CHECK_CODE(expression, expected) consumer::check_code(#expression, (expression), (expected))
#define FP8_CHECK_VALUE(expression, expected) consumer::check_value(#expression, (expression), (expected))

// The codes are written in fields, sign'exponent'mantissa: E4M3 0b0'1111'110 = 1.75 * 2^8 = 448.
// Returns how many conversions gave the wrong result (0 when all is well).
FP8_HOST_DEVICE inline int count_wrong_conversions() {
  using fp8::fp8_e4m3;
  using fp8::fp8_e5m2;
  using fp8::overflow;
  using fp8::rounding;
  constexpr auto nearest_even = rounding::nearest_even;
  constexpr auto nonsaturating = overflow::nonsaturating;
  int wrong = 0;

  // E4M3: 448 is the largest finite value. 464 lies halfway to the next step (480) and rounds to the
  // even 448; above that, values saturate to 448 by default and become NaN when not saturating.
  wrong += FP8_CHECK_CODE(fp8_e4m3(448.0f).bits(), 0b0'1111'110);
  wrong += FP8_CHECK_CODE(fp8_e4m3(464.0f).bits(), 0b0'1111'110);
  wrong += FP8_CHECK_CODE(fp8_e4m3(465.0f).bits(), 0b0'1111'110);
  wrong += FP8_CHECK_CODE((fp8::convert<fp8_e4m3, nearest_even, nonsaturating>(465.0f).bits()), 0b0'1111'111);
  wrong += FP8_CHECK_CODE(fp8_e4m3(-HUGE_VALF).bits(), 0b1'1111'110);
  wrong += FP8_CHECK_CODE(fp8_e4m3(NAN).bits(), 0b0'1111'111);
  wrong += FP8_CHECK_CODE(fp8_e4m3(-0.0f).bits(), 0b1'0000'000);
  // Ties go to the even code: 1.0625 lies halfway between 1 and 1.125, 1.1875 between 1.125 and 1.25.
  wrong += FP8_CHECK_CODE(fp8_e4m3(1.0625f).bits(), 0b0'0111'000);
  wrong += FP8_CHECK_CODE(fp8_e4m3(1.1875f).bits(), 0b0'0111'010);
  // Subnormals: 2^-9 is the smallest; 2^-10 is the tie between 0 and 2^-9 and goes to the even 0.
  wrong += FP8_CHECK_CODE(fp8_e4m3(0x1p-9f).bits(), 0b0'0000'001);
  wrong += FP8_CHECK_CODE(fp8_e4m3(0x1p-10f).bits(), 0b0'0000'000);
  // Rounded once from double: 1.0625 + 2^-30 is just above the tie between 1 and 1.125, so 1.125.
  wrong += FP8_CHECK_CODE(fp8_e4m3(1.0625 + 0x1p-30).bits(), 0b0'0111'001);
  // Integers: 300 lies between 288 and 320 (steps of 32 above 256) and rounds to 288.
  wrong += FP8_CHECK_CODE(fp8_e4m3(300).bits(), 0b0'1111'001);
  // Toward zero, and stochastic rounding of 1.0625 (half a step above 1): up iff random >= 2^31.
  wrong += FP8_CHECK_CODE((fp8::convert<fp8_e4m3, rounding::toward_zero>(1.1f).bits()), 0b0'0111'000);
  wrong += FP8_CHECK_CODE((fp8::convert<fp8_e4m3, rounding::stochastic>(1.0625f, 0x7FFFFFFFu).bits()),
                          0b0'0111'000);
  wrong += FP8_CHECK_CODE((fp8::convert<fp8_e4m3, rounding::stochastic>(1.0625f, 0x80000000u).bits()),
                          0b0'0111'001);

  // E5M2: 57344 is the largest finite value; 61440 (halfway to 65536) overflows: saturated by default,
  // Inf 0b0'11111'00 when not saturating.
  wrong += FP8_CHECK_CODE(fp8_e5m2(57344.0f).bits(), 0b0'11110'11);
  wrong += FP8_CHECK_CODE(fp8_e5m2(61440.0f).bits(), 0b0'11110'11);
  wrong +=
      FP8_CHECK_CODE((fp8::convert<fp8_e5m2, nearest_even, nonsaturating>(61440.0f).bits()), 0b0'11111'00);
  wrong += FP8_CHECK_CODE(fp8_e5m2(0x1p-16f).bits(), 0b0'00000'01);
  // Between formats: E5M2's largest value saturates to E4M3's.
  wrong += FP8_CHECK_CODE(fp8::convert<fp8_e4m3>(fp8_e5m2::from_bits(0b0'11110'11)).bits(), 0b0'1111'110);

  // Decoding is exact.
  wrong += FP8_CHECK_VALUE(static_cast<float>(fp8_e4m3::from_bits(0b0'0000'001)), 0x1p-9f);
  wrong += FP8_CHECK_VALUE(static_cast<float>(fp8_e4m3::from_bits(0b1'1111'110)), -448.0f);
  wrong += FP8_CHECK_VALUE(static_cast<float>(fp8_e5m2::from_bits(0b0'11110'11)), 57344.0f);
  wrong += FP8_CHECK_VALUE(static_cast<float>(fp8_e5m2::from_bits(0b1'11111'00)), -HUGE_VALF);
  return wrong;
}
#undef FP8_CHECK_CODE
#undef FP8_CHECK_VALUE

// Conversions are constexpr: from integers always, from float where the compiler has a constexpr bit
// cast (config.hpp says which).
static_assert(fp8::fp8_e4m3(448).bits() == 0b0'1111'110, "constexpr conversion from an integer");
#if FP8_CONSTEXPR_CONVERSIONS
static_assert(fp8::fp8_e4m3(464.0f).bits() == 0b0'1111'110, "constexpr conversion from float");
#endif

}  // namespace consumer
