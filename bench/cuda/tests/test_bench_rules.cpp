// The GPU benchmarks' sizing and judging arithmetic (bench_rules.hpp), on the CPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "../bench_rules.hpp"

namespace {

using fp8_bench::gemm_error_bound;
using fp8_bench::max_rotation_sets;
using fp8_bench::rotation_sets;
using fp8_bench::zero_output_error;

// cudaDevAttrL2CacheSize of an H100 and of an H200.
constexpr std::size_t l2_bytes = std::size_t(50) << 20;

// The FP8 bytes of X and W of a side^3 product.
constexpr std::size_t cube_fp8_bytes(std::size_t side) { return 2 * side * side; }

}  // namespace

TEST_CASE("rotation_sets: between two uses of a copy, the other copies span twice the L2 in FP8 bytes") {
  for (const std::size_t side : {1024, 2048, 4096, 5120}) {
    CAPTURE(side);
    const std::size_t bytes = cube_fp8_bytes(side);
    const std::size_t sets = rotation_sets(bytes, l2_bytes);
    REQUIRE(sets >= 2);
    CHECK((sets - 1) * bytes >= 2 * l2_bytes);
    CHECK((sets - 2) * bytes < 2 * l2_bytes);  // no copy more than that needs
  }
  // The documented example: 2 MiB of FP8 inputs, 50 copies beside the one in use. (Counted in BF16
  // bytes with at most 32 copies, 1024^3 rotated 25 copies: 48 MiB of FP8 inputs, inside the L2.)
  CHECK(rotation_sets(cube_fp8_bytes(1024), l2_bytes) == 51);
}

TEST_CASE("rotation_sets: one copy where it alone spans twice the L2; bounded for tiny products") {
  CHECK(rotation_sets(cube_fp8_bytes(8192), l2_bytes) == 1);  // 128 MiB
  CHECK(rotation_sets(2 * l2_bytes, l2_bytes) == 1);
  CHECK(rotation_sets(2 * l2_bytes - 1, l2_bytes) == 3);
  CHECK(rotation_sets(cube_fp8_bytes(64), l2_bytes) == max_rotation_sets);
  CHECK(rotation_sets(0, l2_bytes) == 1);
}

TEST_CASE("gemm_error_bound: BF16 below split below fast accumulation") {
  CHECK(gemm_error_bound(false, false) < gemm_error_bound(true, false));
  CHECK(gemm_error_bound(true, false) < gemm_error_bound(true, true));
  CHECK(gemm_error_bound(false, true) == gemm_error_bound(false, false));  // BF16 has no fast mode
}

TEST_CASE("gemm_error_bound: room above fast accumulation's error, and a zero output still fails") {
  // Fast accumulation's expected error at the largest K the benchmark runs, 2^-14 sqrt(K) / 32 of S,
  // times three for the largest of 256 samples: the bound keeps a factor of 4 above it.
  const double k = 16384.0;
  const double largest_fast_error = 3.0 * std::ldexp(1.0, -14) * std::sqrt(k) / 32.0;
  CHECK(gemm_error_bound(true, true) >= 4.0 * largest_fast_error);
  // A zero output at the median sample, for every K up to 16384 (and the layer's wgrad, 15,872
  // tokens): at least twice every bound, so 256 samples cannot all pass.
  for (const double reduced : {64.0, 1024.0, 4096.0, 15872.0, 16384.0}) {
    CAPTURE(reduced);
    CHECK(zero_output_error(std::sqrt(reduced)) >= 2.0 * gemm_error_bound(true, true));
  }
}

TEST_CASE("zero_output_error: the median |sum x w| / sum |x w| of random normal data") {
  // 401 sampled outputs of a K = 4096 product of N(0, 1) data: the median of |ref| / S within 20%
  // of the formula (the median of 401 samples has a relative standard error of about 6%).
  constexpr int k = 4096, samples = 401;
  std::mt19937 generator(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> ratios;
  for (int s = 0; s < samples; ++s) {
    double sum = 0.0, magnitude = 0.0;
    for (int t = 0; t < k; ++t) {
      const double product = normal(generator) * normal(generator);
      sum += product;
      magnitude += std::fabs(product);
    }
    ratios.push_back(std::fabs(sum) / magnitude);
  }
  std::nth_element(ratios.begin(), ratios.begin() + samples / 2, ratios.end());
  const double median = ratios[samples / 2];
  CHECK(median == doctest::Approx(zero_output_error(std::sqrt(double(k)))).epsilon(0.2));
}

TEST_CASE("quantize_matrix_side: the smallest traffic measured is several times the L2") {
  const std::size_t elements = fp8_bench::quantize_matrix_side * fp8_bench::quantize_matrix_side;
  // A BF16 input read (2 bytes) and its E4M3 codes written (1 byte): the least any kernel moves.
  CHECK(3 * elements >= 3 * l2_bytes);
}
