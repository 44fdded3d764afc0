// Finite-difference gradient checking for the trainer's tests: central differences of a scalar
// function of a float buffer, compared with an analytic gradient under a stated tolerance.
#pragma once

#include <cmath>
#include <cstddef>
#include <functional>
#include <vector>

#include <doctest/doctest.h>

#include "rng.hpp"

namespace trainer::testing {

// Float arithmetic makes a central difference with step h accurate to about
// (rounding error of f) / h + h^2 * f''' / 6. With h = 1e-2 on O(1) inputs both terms are near 1e-5
// for the small functions checked here, so 1e-3 absolute plus 1% relative has a wide margin while a
// wrong formula (a missing term, a transposed index) is off by O(|g|).
struct tolerance {
  double absolute = 1e-3;
  double relative = 1e-2;
};
inline constexpr float difference_step = 1e-2f;

inline std::vector<float> random_vector(std::size_t n, rng& generator, float scale = 1.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = float(generator.normal()) * scale;
  return v;
}

// Compares analytic[i] with (f(x + h e_i) - f(x - h e_i)) / 2h for the listed indices (all when
// `indices` is empty). f reads `x` (which it may not keep pointers into beyond the call).
inline void check_gradient(std::vector<float>& x, const std::vector<float>& analytic,
                           const std::function<double()>& f, const char* what, tolerance tol = {},
                           std::vector<std::size_t> indices = {}) {
  if (indices.empty()) {
    for (std::size_t i = 0; i < x.size(); ++i) indices.push_back(i);
  }
  for (std::size_t i : indices) {
    const float saved = x[i];
    x[i] = saved + difference_step;
    const double up = f();
    x[i] = saved - difference_step;
    const double down = f();
    x[i] = saved;
    const double numeric = (up - down) / (2.0 * double(difference_step));
    CAPTURE(what);
    CAPTURE(i);
    CAPTURE(numeric);
    CAPTURE(analytic[i]);
    CHECK(std::abs(double(analytic[i]) - numeric) <= tol.absolute + tol.relative * std::abs(numeric));
  }
}

// A fixed random projection of an output, sum_i out[i] * weight[i] in double: a scalar whose gradient
// with respect to the output is `weight`, to check backward passes of vector-valued functions.
inline double project(const std::vector<float>& out, const std::vector<float>& weight) {
  double sum = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) sum += double(out[i]) * double(weight[i]);
  return sum;
}

}  // namespace trainer::testing
