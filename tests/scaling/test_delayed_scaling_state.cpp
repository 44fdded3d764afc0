// Delayed scaling over many steps against a plain re-implementation of Transformer Engine's update:
// this step's casts record this step's amax, the scales of step N come from amaxes up to N - 1,
// amax 0 / Inf / NaN keep the previous scale; plus the amax reduction hook.
#include <doctest/doctest.h>

#include <fp8/quantize.hpp>
#include <fp8/scaling.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <deque>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

namespace {
const float inf = std::numeric_limits<float>::infinity();
const float qnan = std::numeric_limits<float>::quiet_NaN();

// One tensor, written out: a list of per-step amaxes and the scale formula in double-checked float.
struct plain_tensor {
  float fp8_max;
  std::deque<float> amaxes{0.0f};
  float scale = 1.0f;
  void record(float a) {
    float& c = amaxes.back();
    c = (std::isnan(a) || std::isnan(c)) ? qnan : std::max(c, a);
  }
  void end_step(const fp8::delayed_scaling& config) {
    float amax = amaxes.back();
    if (config.algorithm == fp8::amax_algorithm::max) {
      const std::size_t first =
          amaxes.size() > config.history_length ? amaxes.size() - config.history_length : 0;
      amax = 0.0f;
      for (std::size_t i = first; i < amaxes.size(); ++i) {
        amax = (std::isnan(amax) || std::isnan(amaxes[i])) ? qnan : std::max(amax, amaxes[i]);
      }
    }
    if (amax > 0.0f && std::isfinite(amax)) {
      float s = (fp8_max / amax) / std::ldexp(1.0f, config.margin);
      if (std::isinf(s)) s = FLT_MAX;
      if (s < FLT_MIN) s = FLT_MIN;
      if (config.power_of_two_scales) s = std::ldexp(1.0f, std::ilogb(s));
      scale = s;
    }
    amaxes.push_back(0.0f);
  }
};

// A second "rank" whose amaxes are folded in: what an all-reduce with max does.
struct two_rank_reducer final : fp8::amax_reducer {
  std::vector<float> other_rank;
  int calls = 0;
  void reduce_max(float* amaxes, std::size_t count) override {
    ++calls;
    REQUIRE(count == other_rank.size());
    for (std::size_t i = 0; i < count; ++i) amaxes[i] = fp8::detail::amax_max(amaxes[i], other_rank[i]);
  }
};

struct failing_reducer final : fp8::amax_reducer {
  void reduce_max(float*, std::size_t) override { throw std::runtime_error("network down"); }
};
}  // namespace

TEST_CASE("a new state: scales 1, histories of the configured length, formats from the mix") {
  fp8::delayed_scaling_state state{fp8::delayed_scaling{}};
  const std::size_t x = state.add_tensor(fp8::gemm_operand::fprop_input);
  const std::size_t dy = state.add_tensor(fp8::gemm_operand::dgrad_grad_output);
  CHECK(state.size() == 2);
  CHECK(state.format(x) == fp8::fp8_format::e4m3);
  CHECK(state.format(dy) == fp8::fp8_format::e5m2);
  CHECK(state.scale(x) == 1.0f);
  CHECK(state.scale_inv(dy) == 1.0f);
  CHECK(state.history(x).length() == 1024);
  CHECK_THROWS_WITH_AS(state.scale(2), doctest::Contains("out of range"), fp8::invalid_argument);
  CHECK_THROWS_AS(state.record(5, 1.0f), fp8::invalid_argument);
}

TEST_CASE("the worked example of docs/scaling.md") {
  fp8::delayed_scaling config;
  config.history_length = 4;
  fp8::delayed_scaling_state state{config};
  const std::size_t x = state.add_tensor(fp8::fp8_format::e4m3);
  // Step 1 casts with scale 1 and records amax 3.5; the update gives 448 / 3.5 = 128.
  state.record(x, 3.5f);
  state.update();
  CHECK(state.scale(x) == 128.0f);
  CHECK(state.scale_inv(x) == 1.0f / 128.0f);
  // Step 2 records 7: the window max is 7 -> 64.
  state.record(x, 7.0f);
  state.update();
  CHECK(state.scale(x) == 64.0f);
  // Step 3 records 1: the window still holds 7 -> 64.
  state.record(x, 1.0f);
  state.update();
  CHECK(state.scale(x) == 64.0f);
  // Steps 4 and 5 record 1: the window (steps 2..5) still holds the 7 of step 2 -> 64.
  for (int step = 4; step <= 5; ++step) {
    state.record(x, 1.0f);
    state.update();
    CHECK(state.scale(x) == 64.0f);
  }
  // Step 6 records 1: the 7 has left the 4-step window (steps 3..6) -> 448.
  state.record(x, 1.0f);
  state.update();
  CHECK(state.scale(x) == 448.0f);
}

TEST_CASE("many steps, several tensors and configs: equal to the plain reference") {
  for (const auto algorithm : {fp8::amax_algorithm::max, fp8::amax_algorithm::most_recent}) {
    for (const bool power_of_two : {false, true}) {
      fp8::delayed_scaling config;
      config.history_length = 16;
      config.margin = power_of_two ? 1 : 0;
      config.algorithm = algorithm;
      config.power_of_two_scales = power_of_two;
      fp8::delayed_scaling_state state{config};
      std::vector<plain_tensor> reference;
      for (const auto op : {fp8::gemm_operand::fprop_input, fp8::gemm_operand::fprop_weight,
                            fp8::gemm_operand::dgrad_grad_output}) {
        const std::size_t i = state.add_tensor(op);
        reference.push_back(plain_tensor{fp8::max_finite(state.format(i))});
      }
      std::mt19937 rng(11);
      std::uniform_real_distribution<float> exponent(-30.0f, 30.0f);
      for (int step = 0; step < 200; ++step) {
        for (std::size_t i = 0; i < state.size(); ++i) {
          // The cast of step N uses the scale computed after step N - 1.
          REQUIRE(state.scale(i) == reference[i].scale);
          float amax = std::exp2(exponent(rng));
          const unsigned roll = unsigned(rng() % 50);
          if (roll == 0) amax = 0.0f;
          if (roll == 1) amax = inf;
          if (roll == 2) amax = qnan;
          if (roll == 3) amax = std::numeric_limits<float>::denorm_min();
          if (roll == 4) amax = FLT_MAX;
          state.record(i, amax);
          reference[i].record(amax);
        }
        state.update();
        for (std::size_t i = 0; i < state.size(); ++i) {
          reference[i].end_step(config);
          CAPTURE(step);
          CAPTURE(i);
          REQUIRE(state.scale(i) == reference[i].scale);
          REQUIRE(state.scale_inv(i) == 1.0f / reference[i].scale);
          REQUIRE(std::isfinite(state.scale(i)));
          REQUIRE(std::isfinite(state.scale_inv(i)));
          REQUIRE(state.scale(i) > 0.0f);
        }
      }
    }
  }
}

TEST_CASE("a NaN in a tensor: the previous scale is kept while it is in the window, then scales recover") {
  fp8::delayed_scaling config;
  config.history_length = 3;
  fp8::delayed_scaling_state state{config};
  const std::size_t x = state.add_tensor(fp8::fp8_format::e4m3);
  std::vector<float> data(100, 2.0f);
  std::vector<std::uint8_t> codes(100);
  state.record(x, fp8::quantize(data.data(), data.size(), state.format(x), state.scale(x), codes.data()));
  state.update();
  CHECK(state.scale(x) == 224.0f);
  data[17] = qnan;
  state.record(x, fp8::quantize(data.data(), data.size(), state.format(x), state.scale(x), codes.data()));
  CHECK(int(codes[17]) == 0x7F);
  CHECK(fp8::decode<float, fp8::e4m3_format>(codes[0]) == 448.0f);
  data[17] = 2.0f;
  for (int step = 0; step < 3; ++step) {
    state.update();
    CHECK(state.scale(x) == 224.0f);  // NaN in the window: previous scale kept
    state.record(x, fp8::quantize(data.data(), data.size(), state.format(x), state.scale(x), codes.data()));
  }
  state.update();  // the NaN step left the 3-step window
  CHECK(state.scale(x) == 224.0f);
  data[0] = 4.0f;
  state.record(x, fp8::quantize(data.data(), data.size(), state.format(x), state.scale(x), codes.data()));
  state.update();
  CHECK(state.scale(x) == 112.0f);
}

TEST_CASE("the amax reducer sees the current amaxes of all tensors in one call, before scales are computed") {
  fp8::delayed_scaling config;
  config.history_length = 8;
  fp8::delayed_scaling_state state{config};
  state.add_tensor(fp8::fp8_format::e4m3);
  state.add_tensor(fp8::fp8_format::e5m2);
  state.record(0, 1.0f);
  state.record(1, 2.0f);
  two_rank_reducer reducer;
  reducer.other_rank = {4.0f, 1.0f};
  state.update(reducer);
  CHECK(reducer.calls == 1);
  CHECK(state.scale(0) == 448.0f / 4.0f);  // the other rank's larger amax wins
  CHECK(state.scale(1) == 57344.0f / 2.0f);
  CHECK(state.history(0).at(1) == 4.0f);  // the reduced amax is what the history keeps
}

TEST_CASE("a failing reducer leaves the state exactly as it was") {
  fp8::delayed_scaling_state state{fp8::delayed_scaling{}};
  state.add_tensor(fp8::fp8_format::e4m3);
  state.record(0, 3.0f);
  state.update();
  state.record(0, 5.0f);
  const fp8::delayed_scaling_state before = state;
  failing_reducer reducer;
  CHECK_THROWS_AS(state.update(reducer), std::runtime_error);
  CHECK(state.scale(0) == before.scale(0));
  CHECK(state.history(0) == before.history(0));
}
