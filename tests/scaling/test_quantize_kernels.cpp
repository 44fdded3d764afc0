// The quantize kernels of the instruction set this program is built for (scalar, AVX2 or AVX-512)
// against the scalar reference (fp8::convert_bits / fp8::decode): every float bit pattern, every
// bfloat16 and half pattern, every code, special values with many scales, random data, ragged tails.
#include <doctest/doctest.h>

#include <fp8/quantize.hpp>
#include <fp8/scaling.hpp>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using fp8::detail::bit_cast;
using simd = fp8::detail::simd_ops;
using scalar = fp8::detail::scalar_ops;

template <class Format>
std::uint8_t reference_code(float x) {
  return fp8::convert_bits<Format, fp8::rounding::nearest_even, fp8::overflow::saturate>(x);
}

// An exact reference for a sweep over all 2^32 floats that costs O(1) per input: the code of a
// magnitude a is a non-decreasing step function of a's bits, so it is the number of steps at or
// below a. The steps are found with the scalar routine (binary search) and checked on both sides.
template <class Format>
struct step_reference {
  using traits = fp8::format_traits<Format>;
  static constexpr std::uint32_t infinity_bits = 0x7F800000u;
  std::vector<std::uint32_t> first_bits_of_code;  // [k] = smallest magnitude bits with code >= k, k >= 1

  step_reference() {
    first_bits_of_code.assign(traits::max_finite_code + 1, 0);
    for (std::uint32_t k = 1; k <= traits::max_finite_code; ++k) {
      std::uint32_t lo = 0, hi = infinity_bits;  // code(lo) < k <= code(hi)
      while (hi - lo > 1) {
        const std::uint32_t mid = lo + (hi - lo) / 2;
        (reference_code<Format>(bit_cast<float>(mid)) >= k ? hi : lo) = mid;
      }
      first_bits_of_code[k] = hi;
      // Each step raises the code by exactly one.
      REQUIRE(reference_code<Format>(bit_cast<float>(hi)) == k);
      REQUIRE(reference_code<Format>(bit_cast<float>(hi - 1)) == k - 1);
    }
  }
};

// Every float bit pattern through the kernel (scale 1, with amax), in chunks, against the reference.
// The expected codes of a chunk are runs between steps, so they are written with memset and compared
// with memcmp; only a mismatching chunk is inspected element by element.
template <class Format>
void sweep_all_floats() {
  using traits = fp8::format_traits<Format>;
  const step_reference<Format> steps;
  constexpr std::uint32_t infinity_bits = step_reference<Format>::infinity_bits;
  constexpr std::size_t chunk = std::size_t(1) << 16;
  std::vector<float> in(chunk);
  std::vector<std::uint8_t> out(chunk), expected(chunk);
  std::uint64_t mismatches = 0;
  for (int negative = 0; negative < 2; ++negative) {
    const std::uint32_t sign = negative ? 0x80000000u : 0u;
    const std::uint8_t sign_code = negative ? std::uint8_t(traits::sign_mask) : std::uint8_t(0);
    std::uint32_t code = 0;  // code of the current magnitude, advanced as the magnitude grows
    for (std::uint64_t base = 0; base < 0x80000000ull; base += chunk) {
      for (std::size_t i = 0; i < chunk; ++i) in[i] = bit_cast<float>(sign | std::uint32_t(base + i));
      const std::uint32_t amax_bits =
          fp8::detail::cast_span<simd, Format, true>(in.data(), chunk, 1.0f, out.data());
      // The amax of the chunk is its last (largest) magnitude.
      if (amax_bits != std::uint32_t(base + chunk - 1)) ++mismatches;
      for (std::size_t i = 0; i < chunk;) {
        const std::uint64_t magnitude = base + i;
        if (magnitude > infinity_bits) {
          std::memset(expected.data() + i, Format::canonical_nan, chunk - i);  // NaN: no sign
          break;
        }
        while (code < traits::max_finite_code && steps.first_bits_of_code[code + 1] <= magnitude) ++code;
        const std::uint64_t next_change = code < traits::max_finite_code ? steps.first_bits_of_code[code + 1]
                                                                         : std::uint64_t(infinity_bits) + 1;
        const std::size_t run = std::size_t(std::min<std::uint64_t>(chunk - i, next_change - magnitude));
        std::memset(expected.data() + i, int(code | sign_code), run);
        i += run;
      }
      if (std::memcmp(out.data(), expected.data(), chunk) != 0) {
        for (std::size_t i = 0; i < chunk; ++i) {
          if (out[i] != expected[i] && ++mismatches <= 8) {
            const std::uint32_t input_bits = sign | std::uint32_t(base + i);
            CAPTURE(input_bits);
            CHECK(int(out[i]) == int(expected[i]));
          }
        }
      }
    }
  }
  CHECK(mismatches == 0);
}

std::vector<float> special_floats() {
  std::vector<float> values = {0.0f,
                               FLT_MIN,
                               FLT_MAX,
                               std::numeric_limits<float>::denorm_min(),
                               FLT_EPSILON,
                               std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::signaling_NaN(),
                               bit_cast<float>(0x7F800001u),
                               bit_cast<float>(0x7FFFFFFFu),
                               bit_cast<float>(0x7FC00001u)};
  // Around every FP8 value of both formats: the value and its float neighbours, and the midpoints.
  for (int code = 0; code < 0x7F; ++code) {
    for (const float v : {fp8::decode<float, fp8::e4m3_format>(std::uint8_t(code)),
                          fp8::decode<float, fp8::e5m2_format>(std::uint8_t(code))}) {
      if (!std::isfinite(v)) continue;
      values.push_back(v);
      values.push_back(std::nextafter(v, 0.0f));
      values.push_back(std::nextafter(v, FLT_MAX));
    }
    for (const auto& [lo, hi] : {std::pair{fp8::decode<float, fp8::e4m3_format>(std::uint8_t(code)),
                                           fp8::decode<float, fp8::e4m3_format>(std::uint8_t(code + 1))},
                                 std::pair{fp8::decode<float, fp8::e5m2_format>(std::uint8_t(code)),
                                           fp8::decode<float, fp8::e5m2_format>(std::uint8_t(code + 1))}}) {
      if (!std::isfinite(hi)) continue;
      const float mid = lo + (hi - lo) / 2;  // exact: FP8 neighbours are far apart in float
      values.push_back(mid);
      values.push_back(std::nextafter(mid, 0.0f));
      values.push_back(std::nextafter(mid, FLT_MAX));
    }
  }
  // The overflow thresholds: E4M3 464 (rounds to 448) and E5M2 61440 (overflows), and neighbours.
  for (const float v : {448.0f, 464.0f, 480.0f, 57344.0f, 61440.0f, 65536.0f}) {
    values.push_back(v);
    values.push_back(std::nextafter(v, 0.0f));
    values.push_back(std::nextafter(v, FLT_MAX));
  }
  const std::size_t positive = values.size();
  for (std::size_t i = 0; i < positive; ++i) values.push_back(-values[i]);
  return values;
}

const std::vector<float> scales = {
    1.0f,          0.5f,   2.0f,  3.0f,    0.1f,    1.0f / 3.0f,  128.0f,
    448.0f / 3.0f, 1e-30f, 1e30f, FLT_MIN, FLT_MAX, 5.877472e-39f /* a float denormal */};

template <class Format, class T>
void check_cast_against_scalar(const std::vector<T>& in, float scale) {
  std::vector<std::uint8_t> got(in.size()), want(in.size());
  const std::uint32_t got_amax =
      fp8::detail::cast_span<simd, Format, true>(in.data(), in.size(), scale, got.data());
  const std::uint32_t want_amax =
      fp8::detail::cast_span<scalar, Format, true>(in.data(), in.size(), scale, want.data());
  // Widening keeps NaN payloads on some paths and not on others; the amax of a NaN is any NaN.
  CHECK(bit_cast<std::uint32_t>(fp8::detail::amax_from_bits(got_amax)) ==
        bit_cast<std::uint32_t>(fp8::detail::amax_from_bits(want_amax)));
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (got[i] != want[i]) {
      CAPTURE(i);
      CAPTURE(static_cast<float>(in[i]));
      CAPTURE(scale);
      CHECK(int(got[i]) == int(want[i]));
      return;
    }
  }
}

template <class T>
std::vector<T> all_16_bit_patterns() {
  std::vector<T> values(1u << 16);
  for (std::uint32_t bits = 0; bits < (1u << 16); ++bits) values[bits] = T::from_bits(std::uint16_t(bits));
  return values;
}

template <class Format, class T>
void check_decode_against_scalar(float scale_inv) {
  std::vector<std::uint8_t> codes(256);
  for (int c = 0; c < 256; ++c) codes[std::size_t(c)] = std::uint8_t(c);
  std::vector<T> got(256), want(256);
  fp8::detail::decode_span<simd, Format>(codes.data(), codes.size(), scale_inv, got.data());
  fp8::detail::decode_span<scalar, Format>(codes.data(), codes.size(), scale_inv, want.data());
  CHECK(std::memcmp(got.data(), want.data(), 256 * sizeof(T)) == 0);
  if constexpr (std::is_same_v<T, float>) {
    // The reference itself: exact decoding times scale_inv.
    for (int c = 0; c < 256; ++c) {
      const float expected = fp8::decode<float, Format>(std::uint8_t(c)) * scale_inv;
      CAPTURE(c);
      CHECK(bit_cast<std::uint32_t>(want[std::size_t(c)]) == bit_cast<std::uint32_t>(expected));
    }
  }
}

}  // namespace

TEST_CASE("the program runs the kernels it was built for") {
  CHECK(std::string(fp8::quantize_isa) == FP8_TEST_EXPECTED_ISA);
  CHECK(simd::width >= 1);
}

TEST_CASE("every float bit pattern: E4M3 kernel = convert_bits (nearest even, saturating)") {
  sweep_all_floats<fp8::e4m3_format>();
}

TEST_CASE("every float bit pattern: E5M2 kernel = convert_bits (nearest even, saturating)") {
  sweep_all_floats<fp8::e5m2_format>();
}

TEST_CASE_TEMPLATE("special values times many scales: kernel = scalar", Format, fp8::e4m3_format,
                   fp8::e5m2_format) {
  const std::vector<float> values = special_floats();
  for (const float scale : scales) check_cast_against_scalar<Format>(values, scale);
}

TEST_CASE_TEMPLATE("every bfloat16 and half input: kernel = scalar", Format, fp8::e4m3_format,
                   fp8::e5m2_format) {
  const auto bf16 = all_16_bit_patterns<fp8::bfloat16>();
  const auto half = all_16_bit_patterns<fp8::float16>();
  for (const float scale : scales) {
    check_cast_against_scalar<Format>(bf16, scale);
    check_cast_against_scalar<Format>(half, scale);
  }
}

TEST_CASE_TEMPLATE("random data, random scales: kernel = scalar", Format, fp8::e4m3_format,
                   fp8::e5m2_format) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-20.0f, 20.0f);
  std::vector<float> by_bits(4099), by_value(4099);
  for (int round = 0; round < 64; ++round) {
    for (auto& x : by_bits) x = bit_cast<float>(any_bits(rng));
    for (auto& x : by_value) x = normal(rng) * std::exp2(log_scale(rng) / 2);
    const float scale = std::exp2(log_scale(rng));
    check_cast_against_scalar<Format>(by_bits, scale);
    check_cast_against_scalar<Format>(by_value, scale);
  }
}

TEST_CASE_TEMPLATE("ragged lengths 0..100: kernel = scalar, nothing written past the end", Format,
                   fp8::e4m3_format, fp8::e5m2_format) {
  std::mt19937 rng(99);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  constexpr std::uint8_t canary = 0xA5;
  for (std::size_t n = 0; n <= 100; ++n) {
    std::vector<float> in(n);
    for (auto& x : in) x = normal(rng);
    if (n > 3) in[n - 1] = std::numeric_limits<float>::quiet_NaN();  // specials in the tail too
    if (n > 5) in[n - 2] = -std::numeric_limits<float>::infinity();
    std::vector<std::uint8_t> got(n + 64, canary), want(n + 64, canary);
    const auto got_amax = fp8::detail::cast_span<simd, Format, true>(in.data(), n, 0.75f, got.data());
    const auto want_amax = fp8::detail::cast_span<scalar, Format, true>(in.data(), n, 0.75f, want.data());
    CAPTURE(n);
    CHECK(got == want);
    CHECK(got_amax == want_amax);
    CHECK(fp8::detail::amax_span<simd>(in.data(), n) == fp8::detail::amax_span<scalar>(in.data(), n));

    std::vector<std::uint8_t> codes(n);
    for (auto& c : codes) c = std::uint8_t(rng());
    std::vector<float> decoded(n + 16, 1234.0f), reference(n + 16, 1234.0f);
    fp8::detail::decode_span<simd, Format>(codes.data(), n, 0.25f, decoded.data());
    fp8::detail::decode_span<scalar, Format>(codes.data(), n, 0.25f, reference.data());
    CHECK(std::memcmp(decoded.data(), reference.data(), decoded.size() * sizeof(float)) == 0);

    std::vector<std::uint32_t> columns(n + 16, 7u), columns_reference(n + 16, 7u);
    fp8::detail::column_amax_span<simd>(in.data(), n, columns.data());
    fp8::detail::column_amax_span<scalar>(in.data(), n, columns_reference.data());
    CHECK(columns == columns_reference);

    std::vector<float> column_scales(n);
    for (auto& s : column_scales) s = std::exp2(float(int(rng() % 20) - 10));
    std::vector<std::uint8_t> by_column(n + 16, canary), by_column_reference(n + 16, canary);
    fp8::detail::cast_span_scales<simd, Format>(in.data(), n, column_scales.data(), by_column.data());
    fp8::detail::cast_span_scales<scalar, Format>(in.data(), n, column_scales.data(),
                                                  by_column_reference.data());
    CHECK(by_column == by_column_reference);
  }
}

TEST_CASE_TEMPLATE("every code decodes like fp8::decode, into float, bfloat16 and half", Format,
                   fp8::e4m3_format, fp8::e5m2_format) {
  for (const float scale_inv : {1.0f, 0.5f, 3.0f, 1.0f / 3.0f, 1e-3f, 1e10f, 1.0f / 448.0f, FLT_MAX, FLT_MIN,
                                5.877472e-39f, 1e-45f}) {
    CAPTURE(scale_inv);
    check_decode_against_scalar<Format, float>(scale_inv);
    check_decode_against_scalar<Format, fp8::bfloat16>(scale_inv);
    check_decode_against_scalar<Format, fp8::float16>(scale_inv);
  }
}

TEST_CASE("the bfloat16 and half stores round like the scalar conversion for every float class") {
  // Decoding then storing narrows a float; feed the store float patterns directly through decode_span
  // with scale_inv chosen to land products on bf16 / half ties, overflow and subnormals.
  const std::vector<float> values = special_floats();
  std::vector<std::uint8_t> one_code(1, 0x38);  // E4M3 1.0
  for (const float v : values) {
    if (!(v > 0.0f) || !std::isfinite(v)) continue;
    fp8::bfloat16 got_bf16[1], want_bf16[1];
    fp8::float16 got_half[1], want_half[1];
    fp8::detail::decode_span<simd, fp8::e4m3_format>(one_code.data(), 1, v, got_bf16);
    fp8::detail::decode_span<scalar, fp8::e4m3_format>(one_code.data(), 1, v, want_bf16);
    fp8::detail::decode_span<simd, fp8::e4m3_format>(one_code.data(), 1, v, got_half);
    fp8::detail::decode_span<scalar, fp8::e4m3_format>(one_code.data(), 1, v, want_half);
    CAPTURE(v);
    CHECK(got_bf16[0].bits() == want_bf16[0].bits());
    CHECK(got_half[0].bits() == want_half[0].bits());
  }
}
