// The amax history against a plain reference that keeps every step's amax in a list: the window,
// both algorithms and the roll over many steps (several times the length), plus recording rules.
#include <doctest/doctest.h>

#include <fp8/scaling.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <random>
#include <vector>

namespace {
const float inf = std::numeric_limits<float>::infinity();
const float qnan = std::numeric_limits<float>::quiet_NaN();

// Transformer Engine's semantics written plainly: a list of per-step amaxes; the window is the last
// `length` entries, the current step included.
struct plain_history {
  std::size_t length;
  std::deque<float> steps{0.0f};  // steps.back() is the current step
  void record(float amax) {
    float& current = steps.back();
    if (std::isnan(amax) || std::isnan(current))
      current = qnan;
    else
      current = std::max(current, amax);
  }
  float window(fp8::amax_algorithm algorithm) const {
    if (algorithm == fp8::amax_algorithm::most_recent) return steps.back();
    float amax = 0.0f;
    bool any_nan = false;
    const std::size_t first = steps.size() > length ? steps.size() - length : 0;
    for (std::size_t i = first; i < steps.size(); ++i) {
      if (std::isnan(steps[i]))
        any_nan = true;
      else
        amax = std::max(amax, steps[i]);
    }
    return any_nan ? qnan : amax;
  }
  void roll() { steps.push_back(0.0f); }
};

bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }
}  // namespace

TEST_CASE("default length is Transformer Engine's 1024; length 0 is refused") {
  CHECK(fp8::amax_history{}.length() == 1024);
  CHECK_THROWS_WITH_AS(fp8::amax_history(0), doctest::Contains("at least 1"), fp8::invalid_argument);
}

TEST_CASE("rolling over many steps matches the plain reference, both algorithms") {
  for (const std::size_t length :
       {std::size_t(1), std::size_t(2), std::size_t(7), std::size_t(16), std::size_t(1024)}) {
    fp8::amax_history history(length);
    plain_history reference{length};
    std::mt19937 rng{static_cast<unsigned>(length)};
    std::uniform_real_distribution<float> exponent(-10.0f, 10.0f);
    const std::size_t steps = 3 * length + 50;
    for (std::size_t step = 0; step < steps; ++step) {
      const int casts = int(rng() % 3);  // 0, 1 or 2 casts in this step
      for (int c = 0; c < casts; ++c) {
        float amax = std::exp2(exponent(rng));
        if (rng() % 97 == 0) amax = inf;
        if (rng() % 101 == 0) amax = qnan;
        if (rng() % 13 == 0) amax = 0.0f;
        history.record(amax);
        reference.record(amax);
      }
      CAPTURE(length);
      CAPTURE(step);
      REQUIRE(
          same(history.window_amax(fp8::amax_algorithm::max), reference.window(fp8::amax_algorithm::max)));
      REQUIRE(same(history.window_amax(fp8::amax_algorithm::most_recent),
                   reference.window(fp8::amax_algorithm::most_recent)));
      // Every slot, newest first.
      for (std::size_t k = 0; k < length; ++k) {
        const float expected =
            k < reference.steps.size() ? reference.steps[reference.steps.size() - 1 - k] : 0.0f;
        REQUIRE(same(history.at(k), expected));
      }
      history.roll();
      reference.roll();
    }
  }
}

TEST_CASE("the window forgets an amax exactly `length` steps later") {
  fp8::amax_history history(4);
  history.record(100.0f);
  for (int step = 1; step <= 3; ++step) {
    history.roll();
    history.record(1.0f);
    CHECK(history.window_amax(fp8::amax_algorithm::max) == 100.0f);
  }
  history.roll();
  history.record(1.0f);
  CHECK(history.window_amax(fp8::amax_algorithm::max) == 1.0f);
}

TEST_CASE("record keeps the largest amax of the step; a negative amax is refused and changes nothing") {
  fp8::amax_history history(3);
  history.record(2.0f);
  history.record(5.0f);
  history.record(1.0f);
  CHECK(history.current() == 5.0f);
  CHECK_THROWS_WITH_AS(history.record(-1.0f), doctest::Contains("cannot be negative"), fp8::invalid_argument);
  CHECK(history.current() == 5.0f);
  history.record(-0.0f);
  CHECK(history.current() == 5.0f);
  history.set_current(0.5f);
  CHECK(history.current() == 0.5f);
}

TEST_CASE("an amax is stored without a sign: -0 as +0, every NaN as the canonical quiet NaN") {
  const auto bits = [](float x) { return fp8::detail::bit_cast<std::uint32_t>(x); };
  const std::uint32_t canonical_nan = bits(qnan);
  const float negative_nan = fp8::detail::bit_cast<float>(std::uint32_t(0xFFC00001u));
  const float payload_nan = fp8::detail::bit_cast<float>(std::uint32_t(0x7F800123u));
  const fp8::amax_history loaded = fp8::amax_history::from_values({-0.0f, negative_nan, payload_nan, 2.0f});
  CHECK(bits(loaded.at(0)) == 0u);
  CHECK(bits(loaded.at(1)) == canonical_nan);
  CHECK(bits(loaded.at(2)) == canonical_nan);
  CHECK(bits(loaded.at(3)) == bits(2.0f));
  fp8::amax_history history(2);
  history.set_current(-0.0f);
  CHECK(bits(history.current()) == 0u);
  history.set_current(negative_nan);
  CHECK(bits(history.current()) == canonical_nan);
  fp8::amax_history recorded(2);
  recorded.record(-0.0f);
  CHECK(bits(recorded.current()) == 0u);
  recorded.record(payload_nan);
  CHECK(bits(recorded.current()) == canonical_nan);
}

TEST_CASE("from_values / newest_first round-trip and equality") {
  const std::vector<float> values = {3.0f, 0.0f, 7.0f, qnan, 1.0f};
  const fp8::amax_history history = fp8::amax_history::from_values(values);
  const std::vector<float> back = history.newest_first();
  REQUIRE(back.size() == values.size());
  for (std::size_t k = 0; k < values.size(); ++k) CHECK(same(back[k], values[k]));
  CHECK(history == fp8::amax_history::from_values(values));
  CHECK(history != fp8::amax_history::from_values({3.0f, 0.0f, 7.0f, qnan, 2.0f}));
  CHECK_THROWS_AS(fp8::amax_history::from_values({}), fp8::invalid_argument);
  CHECK_THROWS_AS(fp8::amax_history::from_values({1.0f, -2.0f}), fp8::invalid_argument);
  fp8::amax_history rolled = history;
  rolled.roll();
  CHECK(rolled.at(0) == 0.0f);
  CHECK(rolled.at(1) == 3.0f);
  CHECK(same(rolled.at(4), qnan));  // the oldest, 1.0, left; NaN is now the oldest
}
