// The host half of the linear layers' shared workspace: which copies it holds and where, the bytes a
// layer needs of it, and the record of which layer used it last. No device needed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <fp8/cuda/linear/workspace_layout.hpp>

#include "linear_config_of.hpp"

using fp8::cuda::gemm_precision;
using fp8::cuda::linear_config;
using fp8::cuda::linear_precision;
using fp8::cuda::linear_tensor;
using fp8::cuda::workspace_layout;
using linear_test::config_of;

namespace {

std::size_t padded(std::size_t bytes) { return fp8::detail::round_up(bytes, fp8::cuda::workspace_alignment); }

constexpr std::size_t x = std::size_t(linear_tensor::x);
constexpr std::size_t w = std::size_t(linear_tensor::w);
constexpr std::size_t dy = std::size_t(linear_tensor::dy);
constexpr std::size_t none = workspace_layout::none;

}  // namespace

TEST_CASE("FP8 delayed scaling: X's row copy and dY's two copies are shared; Xᵀ and W's copies are not") {
  // K 4096, N 28672 (a gate/up projection), 4096 tokens: dY's copies are the largest.
  const linear_config config = config_of(4096, 28672, 4096);
  const fp8::cuda::linear_plan plan = fp8::cuda::make_linear_plan(config, config.max_tokens);
  REQUIRE(plan.cast(linear_tensor::x).fused);  // one kernel makes X and Xᵀ
  const workspace_layout layout = fp8::cuda::make_workspace_layout(plan);
  CHECK(layout.row[x] == 0);
  CHECK(layout.transposed[x] == none);  // read by the backward: the layer's own
  CHECK(layout.scratch[x] == none);     // a fused cast writes no scratch
  CHECK(layout.row[w] == none);         // W's copies are kept across calls
  CHECK(layout.transposed[w] == none);
  const std::size_t dy_copy = std::size_t(4096) * 28672;
  CHECK(layout.row[dy] == 0);  // X's and dY's copies are never live in one call
  CHECK(layout.transposed[dy] == padded(dy_copy));
  CHECK(layout.scratch[dy] == none);
  CHECK(layout.bytes == 2 * padded(dy_copy));
  CHECK(fp8::cuda::linear_workspace_bytes(config) == layout.bytes);
}

TEST_CASE("copies start on 256-byte boundaries and the bytes cover the larger tensor") {
  // An inference layer, 3 tokens x 48 features: X's one 144-byte copy, padded to 256.
  const linear_config config = config_of(48, 16, 3, fp8::gemm_recipe{}, linear_precision::fp8_forward());
  const workspace_layout forward_only = fp8::cuda::make_workspace_layout(
      fp8::cuda::make_linear_plan(config, config.max_tokens, fp8::cuda::linear_pass::forward_only));
  CHECK(forward_only.row[x] == 0);
  CHECK(forward_only.row[dy] == none);  // an inference layer casts no dY
  CHECK(forward_only.bytes == 256);
  CHECK(fp8::cuda::linear_workspace_bytes(config) == 256);  // its training plan casts no dY either

  // Training, 16 tokens, K 48, N 32: X's copy of 768 bytes beside dY's two of 512.
  const linear_config training = config_of(48, 32, 16);
  const workspace_layout layout =
      fp8::cuda::make_workspace_layout(fp8::cuda::make_linear_plan(training, training.max_tokens));
  CHECK(layout.transposed[dy] == padded(16 * 32));
  CHECK(layout.transposed[dy] % fp8::cuda::workspace_alignment == 0);
  CHECK(layout.bytes == std::max(padded(16 * 48), 2 * padded(16 * 32)));
}

TEST_CASE("a BF16 fprop with an FP8 wgrad: X's transposed-only cast writes its unread row copy there") {
  linear_precision precision{};
  precision.fprop = gemm_precision::bf16;
  const linear_config config = config_of(64, 32, 64, fp8::gemm_recipe{}, precision);
  const fp8::cuda::linear_plan plan = fp8::cuda::make_linear_plan(config, config.max_tokens);
  REQUIRE_FALSE(plan.cast(linear_tensor::x).row_major);
  REQUIRE(plan.cast(linear_tensor::x).transposed);
  REQUIRE_FALSE(plan.cast(linear_tensor::x).fused);
  const workspace_layout layout = fp8::cuda::make_workspace_layout(plan);
  CHECK(layout.row[x] == none);
  CHECK(layout.scratch[x] == 0);
  CHECK(layout.transposed[x] == none);
}

TEST_CASE("a BF16 dgrad: dY's transposed-only cast puts copy and scratch one after the other") {
  linear_precision precision{};
  precision.dgrad = gemm_precision::bf16;
  const linear_config config = config_of(64, 32, 64, fp8::gemm_recipe{}, precision);
  const fp8::cuda::linear_plan plan = fp8::cuda::make_linear_plan(config, config.max_tokens);
  REQUIRE_FALSE(plan.cast(linear_tensor::dy).row_major);
  const workspace_layout layout = fp8::cuda::make_workspace_layout(plan);
  CHECK(layout.row[dy] == none);
  CHECK(layout.transposed[dy] == 0);
  CHECK(layout.scratch[dy] == padded(64 * 32));
  CHECK(layout.bytes == std::max(padded(64 * 64), 2 * padded(64 * 32)));
}

TEST_CASE("an all-BF16 layer needs none of the workspace") {
  CHECK(fp8::cuda::linear_workspace_bytes(
            config_of(64, 32, 64, fp8::gemm_recipe{}, linear_precision::bf16())) == 0);
}

TEST_CASE("claims: the last call holds the workspace, for one tensor of one layer") {
  fp8::cuda::workspace_claims claims;
  const std::uint64_t a = claims.enroll(), b = claims.enroll();
  CHECK(a != 0);
  CHECK(b != a);
  CHECK_FALSE(claims.held_by(a, linear_tensor::x));  // nobody has used it yet
  claims.claim(a, linear_tensor::x);                 // a's producer writes X's codes
  CHECK(claims.held_by(a, linear_tensor::x));
  CHECK_FALSE(claims.held_by(a, linear_tensor::dy));
  CHECK_FALSE(claims.held_by(b, linear_tensor::x));
  claims.claim(b, linear_tensor::x);  // b's call in between overwrites them
  CHECK_FALSE(claims.held_by(a, linear_tensor::x));
  claims.claim(a, linear_tensor::dy);  // a's own backward overwrites X's codes too
  CHECK_FALSE(claims.held_by(a, linear_tensor::x));
  CHECK(claims.held_by(a, linear_tensor::dy));
}
