// Gradient checks of every layer's backward pass against central finite differences (FP32).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "attention.hpp"
#include "cross_entropy.hpp"
#include "gelu.hpp"
#include "gradient_check.hpp"
#include "linear.hpp"
#include "parallel.hpp"
#include "rmsnorm.hpp"
#include "rope.hpp"
#include "swiglu.hpp"

using namespace trainer;
using namespace trainer::testing;

namespace {
const precision_policy fp32_policy{};
pass_context fp32_pass() {
  pass_context pass;
  pass.policy = &fp32_policy;
  return pass;
}
}  // namespace

TEST_CASE("rmsnorm backward matches finite differences") {
  set_thread_count(1);  // tiny tensors: thread start-up would dominate on a busy machine
  const int n = 3, c = 8;
  rng generator(11);
  std::vector<float> inp = random_vector(std::size_t(n * c), generator);
  std::vector<float> weight = random_vector(std::size_t(c), generator);
  const std::vector<float> projection = random_vector(std::size_t(n * c), generator);
  std::vector<float> out(inp.size()), rstd(static_cast<std::size_t>(n));
  const auto loss = [&] {
    rmsnorm_forward(out.data(), rstd.data(), inp.data(), weight.data(), n, c, storage::fp32);
    return project(out, projection);
  };
  loss();
  std::vector<float> dinp(inp.size(), 0.0f), dweight(weight.size(), 0.0f);
  rmsnorm_backward(dinp.data(), dweight.data(), projection.data(), inp.data(), weight.data(), rstd.data(), n,
                   c, storage::fp32);
  check_gradient(inp, dinp, loss, "rmsnorm dinp");
  check_gradient(weight, dweight, loss, "rmsnorm dweight");

  // The input gradient accumulates (the residual stream's gradient arrives first).
  std::vector<float> accumulated(inp.size(), 1.0f), unused(weight.size(), 0.0f);
  rmsnorm_backward(accumulated.data(), unused.data(), projection.data(), inp.data(), weight.data(),
                   rstd.data(), n, c, storage::fp32);
  for (std::size_t i = 0; i < inp.size(); ++i)
    CHECK(accumulated[i] == doctest::Approx(dinp[i] + 1.0f).epsilon(1e-6));
}

TEST_CASE("rope backward is the transposed rotation") {
  set_thread_count(1);  // tiny tensors: thread start-up would dominate on a busy machine
  const int context = 6, head_dim = 8;
  const rope_table table = make_rope_table(context, head_dim);
  rng generator(12);
  for (int position = 0; position < context; ++position) {
    // <R x, y> == <x, R^T y> for random x, y: the defining property of the backward of a linear map.
    std::vector<float> x = random_vector(head_dim, generator), y = random_vector(head_dim, generator);
    std::vector<float> rx = x, rty = y;
    rope_forward(rx.data(), table, position);
    rope_backward(rty.data(), table, position);
    CHECK(project(rx, y) == doctest::Approx(project(x, rty)).epsilon(1e-6));
    // A rotation keeps the norm.
    CHECK(project(rx, rx) == doctest::Approx(project(x, x)).epsilon(1e-6));
  }
  // Position 0 is the identity; position 1 turns pair 0 by exactly 1 radian.
  std::vector<float> v{1, 0, 0, 0, 0, 0, 0, 0};
  rope_forward(v.data(), table, 1);
  CHECK(v[0] == doctest::Approx(std::cos(1.0)));
  CHECK(v[4] == doctest::Approx(std::sin(1.0)));
}

TEST_CASE("attention backward matches finite differences") {
  set_thread_count(1);                      // tiny tensors: thread start-up would dominate on a busy machine
  const attention_shape shape{2, 5, 8, 2};  // B, T, C, H
  const std::size_t n = std::size_t(shape.batch * shape.context);
  const rope_table table = make_rope_table(shape.context, shape.head_dim());
  rng generator(13);
  std::vector<float> inp = random_vector(n * 3 * std::size_t(shape.channels), generator);
  const std::vector<float> projection = random_vector(n * std::size_t(shape.channels), generator);
  std::vector<float> out(n * std::size_t(shape.channels)), qkvr(inp.size());
  std::vector<float> att(std::size_t(shape.batch * shape.heads * shape.context * shape.context));
  const auto loss = [&] {
    attention_forward(out.data(), qkvr.data(), att.data(), inp.data(), table, shape, gemm_mode::fp32,
                      storage::fp32);
    return project(out, projection);
  };
  loss();
  // Causality: row t of the probabilities is zero beyond t and sums to one.
  for (int t = 0; t < shape.context; ++t) {
    double sum = 0.0;
    for (int j = 0; j < shape.context; ++j) {
      const float p = att[std::size_t(t * shape.context + j)];
      if (j > t) CHECK(p == 0.0f);
      sum += p;
    }
    CHECK(sum == doctest::Approx(1.0));
  }
  std::vector<float> dinp(inp.size());
  attention_backward(dinp.data(), projection.data(), qkvr.data(), att.data(), table, shape, gemm_mode::fp32,
                     storage::fp32);
  check_gradient(inp, dinp, loss, "attention dinp");
}

TEST_CASE("swiglu, gelu and linear backward match finite differences") {
  set_thread_count(1);  // tiny tensors: thread start-up would dominate on a busy machine
  rng generator(14);
  SUBCASE("swiglu") {
    const int n = 3, f = 5;
    std::vector<float> inp = random_vector(std::size_t(n * 2 * f), generator);
    const std::vector<float> projection = random_vector(std::size_t(n * f), generator);
    std::vector<float> out(projection.size());
    const auto loss = [&] {
      swiglu_forward(out.data(), inp.data(), n, f, storage::fp32);
      return project(out, projection);
    };
    std::vector<float> dinp(inp.size());
    swiglu_backward(dinp.data(), projection.data(), inp.data(), n, f, storage::fp32);
    check_gradient(inp, dinp, loss, "swiglu dinp");
  }
  SUBCASE("gelu") {
    std::vector<float> inp = random_vector(20, generator, 2.0f);
    const std::vector<float> projection = random_vector(20, generator);
    std::vector<float> out(inp.size());
    const auto loss = [&] {
      gelu_forward(out.data(), inp.data(), inp.size(), storage::fp32);
      return project(out, projection);
    };
    std::vector<float> dinp(inp.size());
    gelu_backward(dinp.data(), projection.data(), inp.data(), inp.size(), storage::fp32);
    check_gradient(inp, dinp, loss, "gelu dinp");
  }
  SUBCASE("linear") {
    const int m = 4, k = 6, n = 5;
    std::vector<float> x = random_vector(std::size_t(m * k), generator);
    std::vector<float> w = random_vector(std::size_t(n * k), generator);
    const std::vector<float> projection = random_vector(std::size_t(m * n), generator);
    std::vector<float> y(projection.size());
    const pass_context pass = fp32_pass();
    const auto loss = [&] {
      linear_forward(pass, {}, y.data(), x.data(), w.data(), m, k, n);
      return project(y, projection);
    };
    std::vector<float> dx(x.size()), dw(w.size(), 0.0f);
    linear_backward(pass, {}, dx.data(), dw.data(), projection.data(), x.data(), w.data(), m, k, n);
    check_gradient(x, dx, loss, "linear dx");
    check_gradient(w, dw, loss, "linear dw");
  }
}

TEST_CASE("cross-entropy backward matches finite differences") {
  set_thread_count(1);  // tiny tensors: thread start-up would dominate on a busy machine
  const int n = 4, v = 7;
  rng generator(15);
  std::vector<float> logits = random_vector(std::size_t(n * v), generator, 2.0f);
  const std::vector<std::int32_t> targets{0, 3, 6, 3};
  std::vector<float> probs(logits.size()), losses(static_cast<std::size_t>(n));
  const auto loss = [&] {
    return cross_entropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), n, v);
  };
  const double mean = loss();
  // The loss is the mean of -log softmax at the targets, checked in double.
  double expected = 0.0;
  for (int r = 0; r < n; ++r) {
    double sum = 0.0;
    for (int j = 0; j < v; ++j) sum += std::exp(double(logits[std::size_t(r * v + j)]));
    expected += std::log(sum) - double(logits[std::size_t(r * v + targets[std::size_t(r)])]);
  }
  CHECK(mean == doctest::Approx(expected / n).epsilon(1e-6));
  std::vector<float> dlogits(logits.size());
  cross_entropy_backward(dlogits.data(), probs.data(), targets.data(), n, v, storage::fp32);
  check_gradient(logits, dlogits, loss, "cross-entropy dlogits");
}
