// Calibration observers against hand-computed statistics and known distributions.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <fp8/inference.hpp>

using fp8::inference::histogram_observer;
using fp8::inference::max_observer;

TEST_CASE("max_observer keeps the running max |x| and turns it into 448 / amax") {
  max_observer observer;
  CHECK(observer.scale() == 1.0f);  // nothing seen: the neutral scale
  const std::vector<float> first{1.0f, -3.5f, 2.0f}, second{0.5f};
  observer.observe(first.data(), first.size());
  observer.observe(second.data(), second.size());
  CHECK(observer.amax() == 3.5f);
  CHECK(observer.count() == 4);
  CHECK(observer.scale() == 128.0f);                         // 448 / 3.5
  CHECK(observer.scale(fp8::fp8_format::e4m3, 1) == 64.0f);  // margin 1 halves it
  const std::vector<float> bad{1.0f, std::numeric_limits<float>::quiet_NaN()};
  CHECK_THROWS_AS(observer.observe(bad.data(), bad.size()), fp8::invalid_argument);
  CHECK(observer.amax() == 3.5f);  // a refused batch changes nothing
}

TEST_CASE("histogram_observer: bins, percentiles and range growth by hand") {
  histogram_observer h(8);
  const std::vector<float> values{0.1f, -0.2f, 0.3f, 0.9f};
  h.observe(values.data(), values.size());
  // amax 0.9 -> range 1 (the next power of two above), bins of 0.125: 0.1 | 0.2 | 0.3 | ... | 0.9
  CHECK(h.range() == 1.0f);
  CHECK(h.counts() == std::vector<std::uint64_t>{1, 1, 1, 0, 0, 0, 0, 1});
  CHECK(h.percentile(0.5) == 0.25f);  // 2 of 4 values at or below the upper edge of bin 1
  CHECK(h.percentile(0.75) == 0.375f);
  CHECK(h.percentile(0.99) == 0.9f);  // bin 7's edge (1.0) is capped at the amax
  CHECK(h.percentile(1.0) == 0.9f);
  const std::vector<float> large{3.0f};
  h.observe(large.data(), large.size());
  // Two doublings (range 4, bins of 0.5): 0.1, 0.2, 0.3 -> bin 0; 0.9 -> bin 1; 3.0 -> bin 6.
  CHECK(h.range() == 4.0f);
  CHECK(h.counts() == std::vector<std::uint64_t>{3, 1, 0, 0, 0, 0, 1, 0});
  CHECK(h.total() == 5);
  CHECK(h.percentile(0.6) == 0.5f);
  CHECK(h.percentile(0.8) == 1.0f);
  CHECK(h.amax() == 3.0f);
  CHECK_THROWS_AS(h.percentile(0.0), fp8::invalid_argument);
  CHECK_THROWS_AS(h.percentile(1.5), fp8::invalid_argument);
  CHECK_THROWS_AS(histogram_observer(7), fp8::invalid_argument);
}

TEST_CASE("percentiles of known distributions") {
  std::mt19937_64 generator(7);
  const std::size_t n = 1'000'000;
  SUBCASE("uniform on [0, 1): the p-th percentile is p") {
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    std::vector<float> x(n);
    for (float& v : x) v = uniform(generator);
    histogram_observer h;
    h.observe(x.data(), x.size());
    // Sampling error of a quantile of 10^6 draws is ~ sqrt(p (1 - p) / n) < 0.0005; bins are 1/2048.
    for (double p : {0.5, 0.9, 0.99, 0.999}) CHECK(std::fabs(h.percentile(p) - p) < 0.002);
  }
  SUBCASE("|N(0, 1)|: the 99th percentile is 2.5758, the 99.9th 3.2905") {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(n);
    for (float& v : x) v = normal(generator);
    histogram_observer h;
    h.observe(x.data(), x.size() / 2);  // in two batches: the second may grow the range
    h.observe(x.data() + n / 2, n - n / 2);
    // Standard error of the 99th percentile: sqrt(0.99 * 0.01 / n) / (2 phi(2.5758)) = 0.0034; bins
    // are 8 / 2048 = 0.004 wide. 0.015 covers both with room.
    CHECK(std::fabs(h.percentile(0.99) - 2.5758) < 0.015);
    CHECK(std::fabs(h.percentile(0.999) - 3.2905) < 0.03);
    CHECK(h.percentile(0.999) < h.amax());
  }
}

TEST_CASE("the MSE-optimal clip is the candidate with the least estimated error") {
  std::mt19937_64 generator(3);
  std::student_t_distribution<float> heavy(2.0f);  // heavy tails: outliers far from the bulk
  std::vector<float> x(200'000);
  for (float& v : x) v = heavy(generator);
  histogram_observer h;
  h.observe(x.data(), x.size());
  const int candidates = 64;
  const float clip = h.mse_optimal_clip(fp8::fp8_format::e4m3, candidates);
  CHECK(clip > 0.0f);
  CHECK(clip <= h.amax());
  // Recompute the search: no candidate has a smaller error than the chosen clip.
  const double chosen = h.clipping_error(clip);
  CHECK(chosen <= h.clipping_error(h.amax()));
  for (int k = 1; k <= candidates; ++k)
    CHECK(chosen <= h.clipping_error(h.amax() * float(k) / float(candidates)));
  // The estimate itself, by hand: one value 0.75 in a 2-bin histogram (range 1, bins of 0.5) sits in
  // bin 1, centre 0.75. With clip 1 (scale 448) it becomes 336, a tie between the E4M3 values 320
  // and 352 that rounds to even (320): error (0.75 - 320 / 448)^2. With clip 0.75 it maps to 448.
  histogram_observer tiny(2);
  const std::vector<float> one{0.75f};
  tiny.observe(one.data(), one.size());
  CHECK(tiny.clipping_error(1.0f) ==
        doctest::Approx((0.75 - 320.0 / 448.0) * (0.75 - 320.0 / 448.0)).epsilon(1e-5));
  CHECK(tiny.clipping_error(0.75f) < 1e-12);
  CHECK(tiny.mse_optimal_clip(fp8::fp8_format::e4m3, 4) == 0.75f);
  CHECK(fp8::inference::calibrated_clip(tiny, fp8::inference::calibration_method::max) == 0.75f);
}

TEST_CASE("static scales from clips") {
  CHECK(fp8::inference::static_scale(3.5f) == 128.0f);
  CHECK(fp8::inference::static_scale(0.0f) == 1.0f);  // nothing observed: scale 1
}
