// float32 inputs of every format beyond OCP FP8, in all eight policies (nearest-even, toward-zero,
// upward, stochastic x saturate, non-saturating), against the independent reference.
//
// Coverage by default (a few seconds): per format, every float whose magnitude bits are a multiple of
// 1021 (2.1 million magnitudes, both signs: about 1 in 1000 of all floats, evenly spread over every
// binade, subnormals, Inf and NaN payloads) plus every float within 512 ulps of each representable
// value and of each midpoint between neighbours (where rounding decisions flip), both signs.
// The full sweep of all 2^32 floats is one command away (FP8_SWEEP_STRIDE=n picks a denser sample):
//   FP8_FULL_SWEEP=1 ./build/tests/core/test_formats_float_sweep [-tc="*e2m1*"]
// (about 5 minutes per format on two cores, all eight in about 40 minutes; measured at stride 127).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include <fp8/types.hpp>

#include "format_specs.hpp"

using fp8::overflow;
using fp8::rounding;

namespace {

float float_from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

struct sweep_result {
  std::uint64_t checked = 0;
  std::uint64_t mismatches = 0;
  std::uint32_t first_bits = 0;
  int first_policy = -1;
  int first_got = 0;
  int first_expected = 0;
  void merge(const sweep_result& other) {
    if (mismatches == 0 && other.mismatches != 0) {
      first_bits = other.first_bits;
      first_policy = other.first_policy;
      first_got = other.first_got;
      first_expected = other.first_expected;
    }
    checked += other.checked;
    mismatches += other.mismatches;
  }
};

// Checks one float input (given by its bits) in all eight policies.
template <class Format>
void check_input(const reference::format_spec& spec, const std::vector<double>& values, std::uint32_t bits,
                 sweep_result& result) {
  using reference::round_mode;
  const float x = float_from_bits(bits);
  const std::uint32_t random_bits = bits * 2654435761u + 0x7F4A7C15u;
  int got[8];
  got[0] = fp8::convert_bits<Format, rounding::nearest_even, overflow::saturate>(x);
  got[1] = fp8::convert_bits<Format, rounding::nearest_even, overflow::nonsaturating>(x);
  got[2] = fp8::convert_bits<Format, rounding::toward_zero, overflow::saturate>(x);
  got[3] = fp8::convert_bits<Format, rounding::toward_zero, overflow::nonsaturating>(x);
  got[4] = fp8::convert_bits<Format, rounding::upward, overflow::saturate>(x);
  got[5] = fp8::convert_bits<Format, rounding::upward, overflow::nonsaturating>(x);
  got[6] = fp8::convert_bits<Format, rounding::stochastic, overflow::saturate>(x, random_bits);
  got[7] = fp8::convert_bits<Format, rounding::stochastic, overflow::nonsaturating>(x, random_bits);
  const round_mode modes[4] = {round_mode::nearest_even, round_mode::toward_zero, round_mode::upward,
                               round_mode::stochastic};
  for (int p = 0; p < 8; ++p) {
    const int expected = reference::convert(spec, values, double(x), modes[p / 2], p % 2 == 0, random_bits);
    ++result.checked;
    if (got[p] != expected && result.mismatches++ == 0) {
      result.first_bits = bits;
      result.first_policy = p;
      result.first_got = got[p];
      result.first_expected = expected;
    }
  }
}

// Magnitudes [begin, end) with a stride, both signs, split over the cores.
template <class Format>
sweep_result sweep(const reference::format_spec& spec, std::uint64_t begin, std::uint64_t end,
                   std::uint64_t stride) {
  const auto values = reference::positive_values(spec);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<sweep_result> results(threads);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (std::uint64_t m = begin + t * stride; m < end; m += threads * stride) {
        check_input<Format>(spec, values, std::uint32_t(m), results[t]);
        check_input<Format>(spec, values, std::uint32_t(m) | 0x80000000u, results[t]);
      }
    });
  }
  for (auto& w : workers) w.join();
  sweep_result merged;
  for (const auto& r : results) merged.merge(r);
  return merged;
}

// Every float within `radius` ulps of each representable value and each midpoint.
template <class Format>
sweep_result sweep_near_decisions(const reference::format_spec& spec, int radius) {
  const auto values = reference::positive_values(spec);
  std::vector<double> anchors(values.begin(), values.end());
  for (std::size_t i = 0; i + 1 < values.size(); ++i) anchors.push_back((values[i] + values[i + 1]) / 2);
  sweep_result result;
  for (const double anchor : anchors) {
    std::uint32_t center;
    const float f = float(anchor);  // exact: every anchor has at most mantissa_bits + 2 significant bits
    std::memcpy(&center, &f, sizeof center);
    for (int d = -radius; d <= radius; ++d) {
      const std::int64_t m = std::int64_t(center) + d;
      if (m < 0 || m >= 0x7F800000) continue;
      check_input<Format>(spec, values, std::uint32_t(m), result);
      check_input<Format>(spec, values, std::uint32_t(m) | 0x80000000u, result);
    }
  }
  return result;
}

void report(const reference::format_spec& spec, const sweep_result& result, std::uint64_t expected_checks) {
  CAPTURE(spec.name);
  CAPTURE(result.first_bits);
  CAPTURE(result.first_policy);  // 0..7: (nearest, toward zero, upward, stochastic) x (saturate, not)
  CAPTURE(result.first_got);
  CAPTURE(result.first_expected);
  if (expected_checks != 0) CHECK(result.checked == expected_checks);
  CHECK(result.checked > 0);
  CHECK(result.mismatches == 0);
}

// The stride of the sampled sweep: FP8_SWEEP_STRIDE if set to a positive number, else 1021.
std::uint64_t sample_stride() {
  const char* value = std::getenv("FP8_SWEEP_STRIDE");
  const long long stride = value != nullptr ? std::atoll(value) : 0;
  return stride > 0 ? std::uint64_t(stride) : 1021;
}

bool full_sweep_requested() {
  const char* value = std::getenv("FP8_FULL_SWEEP");
  return value != nullptr && value[0] != '\0' && value[0] != '0';
}

}  // namespace

TEST_CASE_TEMPLATE("float32 inputs convert as the independent reference says, every policy", T,
                   FP8_NEW_FORMAT_TYPES) {
  using format = typename T::format;
  const auto& spec = reference::spec_of<T>();
  const std::uint64_t magnitudes = std::uint64_t(1) << 31;
  if (full_sweep_requested()) {
    MESSAGE("full sweep: all 2^32 floats of ", spec.name);
    report(spec, sweep<format>(spec, 0, magnitudes, 1), (std::uint64_t(1) << 32) * 8);
    return;
  }
  const std::uint64_t stride = sample_stride();
  MESSAGE(spec.name, ": every ", stride,
          "th float magnitude, both signs, plus the floats near decision points");
  const std::uint64_t sampled = (magnitudes + stride - 1) / stride;
  report(spec, sweep<format>(spec, 0, magnitudes, stride), sampled * 2 * 8);
  report(spec, sweep_near_decisions<format>(spec, 512), 0);
  // The specials explicitly, whatever the stride hits: +-Inf, quiet and signalling NaNs, +-0.
  const auto values = reference::positive_values(spec);
  sweep_result specials;
  for (const std::uint32_t bits :
       {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00001u, 0x7F800001u, 0x00000000u, 0x80000000u,
        0x00000001u, 0x80000001u, 0x7F7FFFFFu, 0xFF7FFFFFu}) {
    check_input<format>(spec, values, bits, specials);
  }
  report(spec, specials, 11 * 8);
}
