// Walks every one of the 2^32 float inputs through fp8's conversion in four policies and compares each
// with the independent reference and, for round-to-nearest-even, with CUDA's own host conversion.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include <cuda_fp8.h>
#include <doctest/doctest.h>

#include <fp8/fp8.hpp>

#include "reference.hpp"

namespace exhaustive {

struct mismatch {
  std::uint32_t input_bits = 0;
  const char* policy = "";
  int got = 0;
  int expected = 0;
};

struct sweep_result {
  std::uint64_t mismatches = 0;
  std::uint64_t checked = 0;
  mismatch first;
};

inline float float_from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Checks the float inputs whose magnitude bits lie in [begin, end), both signs.
template <class Format>
sweep_result sweep_range(const reference::fp8_spec& spec, __nv_fp8_interpretation_t cuda_kind,
                         std::uint32_t begin, std::uint32_t end) {
  using fp8::overflow;
  using fp8::rounding;
  const auto values = reference::positive_values(spec);
  sweep_result result;
  auto record = [&](std::uint32_t bits, const char* policy, int got, int expected) {
    ++result.checked;
    if (got == expected) return;
    if (result.mismatches++ == 0) result.first = {bits, policy, got, expected};
  };

  std::size_t index = reference::find_index(values, double(float_from_bits(begin)));
  for (std::uint64_t magnitude_bits = begin; magnitude_bits < end; ++magnitude_bits) {
    const double magnitude = double(float_from_bits(std::uint32_t(magnitude_bits)));
    const bool is_nan = magnitude_bits > 0x7F800000u;
    const bool is_inf = magnitude_bits == 0x7F800000u;
    if (!is_nan && !is_inf) {
      while (index + 1 < values.size() && values[index + 1] <= magnitude) ++index;  // values are sorted
    }
    const int nearest = reference::round_index(values, magnitude, index, reference::mode::nearest_even);
    const int truncated = reference::round_index(values, magnitude, index, reference::mode::toward_zero);

    for (const std::uint32_t sign : {0u, 0x80000000u}) {
      const std::uint32_t bits = std::uint32_t(magnitude_bits) | sign;
      const float x = float_from_bits(bits);
      auto expect = [&](int index_rounded, bool saturate) -> int {
        if (is_nan) return spec.nan_code;
        return reference::finish(spec, sign != 0, is_inf ? spec.max_code + 1 : index_rounded, saturate);
      };
      const int rn_sat = fp8::convert_bits<Format, rounding::nearest_even, overflow::saturate>(x);
      const int rn_nosat = fp8::convert_bits<Format, rounding::nearest_even, overflow::nonsaturating>(x);
      const int rz_sat = fp8::convert_bits<Format, rounding::toward_zero, overflow::saturate>(x);
      const int rz_nosat = fp8::convert_bits<Format, rounding::toward_zero, overflow::nonsaturating>(x);
      record(bits, "nearest_even/saturate vs reference", rn_sat, expect(nearest, true));
      record(bits, "nearest_even/nonsaturating vs reference", rn_nosat, expect(nearest, false));
      record(bits, "toward_zero/saturate vs reference", rz_sat, expect(truncated, true));
      record(bits, "toward_zero/nonsaturating vs reference", rz_nosat, expect(truncated, false));
      record(bits, "nearest_even/saturate vs CUDA __NV_SATFINITE", rn_sat,
             __nv_cvt_float_to_fp8(x, __NV_SATFINITE, cuda_kind));
      record(bits, "nearest_even/nonsaturating vs CUDA __NV_NOSAT", rn_nosat,
             __nv_cvt_float_to_fp8(x, __NV_NOSAT, cuda_kind));
    }
  }
  return result;
}

// Splits the 2^31 magnitudes over the available cores and merges the results.
template <class Format>
sweep_result sweep_all_floats(const reference::fp8_spec& spec, __nv_fp8_interpretation_t cuda_kind) {
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const std::uint64_t total = std::uint64_t(1) << 31;
  std::vector<sweep_result> results(threads);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    const auto begin = std::uint32_t(total * t / threads);
    const auto end = std::uint32_t(total * (t + 1) / threads);
    workers.emplace_back(
        [&, t, begin, end] { results[t] = sweep_range<Format>(spec, cuda_kind, begin, end); });
  }
  for (auto& worker : workers) worker.join();
  sweep_result merged;
  for (const auto& r : results) {
    if (merged.mismatches == 0 && r.mismatches != 0) merged.first = r.first;
    merged.mismatches += r.mismatches;
    merged.checked += r.checked;
  }
  return merged;
}

template <class Format>
void check_all_floats(const reference::fp8_spec& spec, __nv_fp8_interpretation_t cuda_kind) {
  const sweep_result result = sweep_all_floats<Format>(spec, cuda_kind);
  CAPTURE(spec.name);
  CAPTURE(result.first.input_bits);
  CAPTURE(result.first.policy);
  CAPTURE(result.first.got);
  CAPTURE(result.first.expected);
  CHECK(result.checked == (std::uint64_t(1) << 32) * 6);
  CHECK(result.mismatches == 0);
}

}  // namespace exhaustive
