// Helpers of the CUDA layer tests: seeded random inputs and the comparison of a
// device result with the CPU layer's, element by element, with a stated tolerance.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "precision.hpp"

namespace trainer::cuda_testing {

// count values of N(0, sigma), rounded to BF16 when `where` is storage::bf16 (the bf16 products
// require BF16 operands, and stored tensors hold BF16 values).
inline std::vector<float> random_values(std::size_t count, std::uint32_t seed, float sigma = 1.0f,
                                        storage where = storage::fp32) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> values(count);
  for (float& x : values) x = normal(generator);
  store(where, values.data(), values.size());
  return values;
}

inline std::vector<std::int32_t> random_tokens(std::size_t count, int vocabulary, std::uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_int_distribution<std::int32_t> pick(0, vocabulary - 1);
  std::vector<std::int32_t> tokens(count);
  for (std::int32_t& t : tokens) t = pick(generator);
  return tokens;
}

inline std::uint32_t bits_of(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

// Every element bit-identical.
inline void expect_same_bits(const char* what, const std::vector<float>& got,
                             const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  std::size_t differing = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (bits_of(got[i]) != bits_of(want[i])) {
      if (differing++ == 0) first = i;
    }
  }
  INFO(what << ": " << differing << " of " << got.size() << " elements differ"
            << (differing ? ", first at " + std::to_string(first) + ": " + std::to_string(got[first]) +
                                " vs " + std::to_string(want[first])
                          : std::string()));
  CHECK(differing == 0);
}

// How close a device result must be to the CPU layer's, and why.
struct tolerance {
  double relative;       // times |want| per element
  double absolute;       // times max |want| over the tensor (for elements near zero after cancellation)
  double max_differing;  // largest fraction of elements whose bits may differ at all (1 = any)
};

// |got - want| <= relative |want| + absolute max|want| for every element (NaN only where the CPU has
// NaN), and at most max_differing of the elements not bit-identical.
inline void expect_close(const char* what, const std::vector<float>& got, const std::vector<float>& want,
                         const tolerance& allowed) {
  REQUIRE(got.size() == want.size());
  double scale = 0.0;
  for (float w : want) {
    if (std::isfinite(w)) scale = std::fmax(scale, std::fabs(double(w)));
  }
  std::size_t bad = 0, differing = 0, worst = 0;
  double worst_excess = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (bits_of(got[i]) != bits_of(want[i])) ++differing;
    if (std::isnan(want[i]) || std::isnan(got[i])) {
      if (std::isnan(want[i]) != std::isnan(got[i])) ++bad;
      continue;
    }
    const double error = std::fabs(double(got[i]) - double(want[i]));
    const double bound = allowed.relative * std::fabs(double(want[i])) + allowed.absolute * scale;
    if (!(error <= bound)) {
      ++bad;
      if (error - bound > worst_excess || bad == 1) {
        worst_excess = error - bound;
        worst = i;
      }
    }
  }
  const double differing_fraction = got.empty() ? 0.0 : double(differing) / double(got.size());
  INFO(what << ": " << bad << " of " << got.size() << " elements outside the tolerance"
            << (bad ? " (worst at " + std::to_string(worst) + ": " + std::to_string(got[worst]) + " vs " +
                          std::to_string(want[worst]) + ")"
                    : std::string())
            << "; " << differing << " not bit-identical");
  CHECK(bad == 0);
  CHECK(differing_fraction <= allowed.max_differing);
}

}  // namespace trainer::cuda_testing
