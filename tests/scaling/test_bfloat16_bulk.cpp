// The bulk BF16 conversion against the scalar one it must equal bit for bit: fp8::bfloat16(float).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <fp8/float8.hpp>
#include <fp8/quantize/bfloat16_bulk.hpp>

namespace {

float from_bits(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

std::uint32_t bits_of(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

// Every sign, exponent and kept mantissa (all 65536 upper halves, NaN and Inf included) with the
// lower halves that decide rounding: exact, just above zero, just below half, a tie, just above
// half, the largest, and two arbitrary ones.
std::vector<float> rounding_cases() {
  const std::uint32_t lows[] = {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu, 0x1234u, 0xC0DEu};
  std::vector<float> values;
  for (std::uint32_t high = 0; high <= 0xFFFFu; ++high) {
    for (std::uint32_t low : lows) values.push_back(from_bits((high << 16) | low));
  }
  return values;
}

// Compares the bulk results with fp8::bfloat16 element by element; reports the first mismatch only.
void check_against_scalar(const std::vector<float>& input) {
  std::vector<fp8::bfloat16> converted(input.size());
  fp8::to_bfloat16(input.data(), converted.data(), input.size());
  std::vector<float> rounded = input;
  fp8::round_to_bfloat16(rounded.data(), rounded.size());
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < input.size(); ++i) {
    const fp8::bfloat16 expected(input[i]);
    const std::uint32_t expected_float_bits = bits_of(static_cast<float>(expected));
    if (converted[i].bits() != expected.bits() || bits_of(rounded[i]) != expected_float_bits) {
      if (mismatches++ == 0) {
        CAPTURE(bits_of(input[i]));
        CHECK(converted[i].bits() == expected.bits());
        CHECK(bits_of(rounded[i]) == expected_float_bits);
      }
    }
  }
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("bulk BF16 conversion equals fp8::bfloat16 on every exponent and rounding case") {
  check_against_scalar(rounding_cases());
}

TEST_CASE("bulk BF16 conversion equals fp8::bfloat16 on random bit patterns") {
  std::mt19937 generator(20240611u);
  std::vector<float> values(1u << 20);
  for (float& v : values) v = from_bits(std::uint32_t(generator()));
  check_against_scalar(values);
}

TEST_CASE("bulk BF16 conversion handles every length, the vector loop's tail included") {
  const std::vector<float> all = rounding_cases();
  for (std::size_t length = 0; length <= 67; ++length) {
    CAPTURE(length);
    // An unaligned start as well: the conversion must not assume alignment.
    check_against_scalar(
        std::vector<float>(all.begin() + 12345, all.begin() + 12345 + std::ptrdiff_t(length)));
  }
}

TEST_CASE("the documented examples and special values") {
  static_assert(fp8::detail::bfloat16_bits_rne(0x3F808000u) == 0x3F80u, "a tie with an even kept part stays");
  static_assert(fp8::detail::bfloat16_bits_rne(0x3F818000u) == 0x3F82u,
                "a tie with an odd kept part rounds up");
  static_assert(fp8::detail::bfloat16_bits_rne(0x7F7FFFFFu) == 0x7F80u, "FLT_MAX rounds to Inf");
  static_assert(fp8::detail::bfloat16_bits_rne(0xFFC00001u) == 0x7FC0u, "NaN becomes the canonical NaN");
  static_assert(fp8::detail::bfloat16_bits_rne(0x80000000u) == 0x8000u, "-0 keeps its sign");
  float data[] = {1.0f, -2.5f, 3.14159265f};
  fp8::round_to_bfloat16(data, 3);
  CHECK(data[0] == 1.0f);
  CHECK(data[1] == -2.5f);
  CHECK(data[2] == 3.140625f);
}
