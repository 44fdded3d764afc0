// A linear layer's configuration for the host tests of its plan and workspace layout: K inputs, N
// outputs, up to max_tokens tokens, with a recipe and per-class precision (no bias).
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

}  // namespace linear_test
