// A linear layer's configuration for the tests of the layer, its plan and its workspace layout: K
// inputs, N outputs, up to max_tokens tokens, with a recipe and per-class precision (no bias); and
// the current-scaling recipes they run.
#pragma once

#include <cstdint>

#include <fp8/cuda/linear/config.hpp>

namespace linear_test {

inline fp8::cuda::linear_config config_of(
    std::int64_t k, std::int64_t n, std::int64_t max_tokens, fp8::gemm_recipe recipe = fp8::gemm_recipe{},
    fp8::cuda::linear_precision precision = fp8::cuda::linear_precision{}) {
  fp8::cuda::linear_config c{};
  c.in_features = k;
  c.out_features = n;
  c.max_tokens = max_tokens;
  c.recipe = recipe;
  c.precision = precision;
  return c;
}

// Current scaling with `activations` granularity for X and dY and `weights` for W.
inline fp8::gemm_recipe current_recipe(fp8::granularity activations, fp8::granularity weights) {
  fp8::current_scaling c{};
  c.granularity = activations;
  c.weight_granularity = weights;
  return fp8::gemm_recipe{c};
}
inline fp8::gemm_recipe current_recipe(fp8::granularity g) { return current_recipe(g, g); }

}  // namespace linear_test
