// The host half of fp8::cuda::linear_layer: which casts run (fused with their transpose or not), the
// three products' operands, transposes, leading dimensions, types and scale modes, and the checks
// that refuse shapes and recipes cuBLASLt cannot run. No device needed: every planned product is
// also executed here by a column-major reference that reads it exactly as cuBLASLt would.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fp8/cuda/linear/plan.hpp>

#include "linear_config_of.hpp"

namespace lt = fp8::cublaslt;
using fp8::gemm_kind;
using fp8::gemm_operand;
using fp8::cuda::gemm_precision;
using fp8::cuda::linear_buffer;
using fp8::cuda::linear_config;
using fp8::cuda::linear_plan;
using fp8::cuda::linear_precision;
using fp8::cuda::linear_tensor;
using linear_test::config_of;

namespace {

using linear_test::current_recipe;

// Two casts make the same copies of the same operands (their buffers aside).
void check_same_cast(const fp8::cuda::cast_plan& got, const fp8::cuda::cast_plan& want) {
  CHECK(got.tensor == want.tensor);
  CHECK(got.rows == want.rows);
  CHECK(got.cols == want.cols);
  CHECK(got.row_major == want.row_major);
  CHECK(got.transposed == want.transposed);
  CHECK(got.fused == want.fused);
  CHECK(got.row_operand == want.row_operand);
  CHECK(got.transposed_operand == want.transposed_operand);
}

std::string refusal(const linear_config& config, std::int64_t tokens) {
  try {
    (void)fp8::cuda::make_linear_plan(config, tokens);
  } catch (const fp8::invalid_argument& e) { return e.what(); }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// D = alpha·op(A)·op(B) + beta·C, column-major, as cuBLASLt reads a problem (ld = stored rows).
void run_column_major(const lt::gemm_problem& p, const std::vector<double>& a, const std::vector<double>& b,
                      std::vector<double>& d) {
  for (std::int64_t j = 0; j < p.n; ++j) {
    for (std::int64_t i = 0; i < p.m; ++i) {
      double sum = 0;
      for (std::int64_t l = 0; l < p.k; ++l) {
        const double x = p.op_a == lt::operation::none ? a.at(std::size_t(i + l * p.a.ld))
                                                       : a.at(std::size_t(l + i * p.a.ld));
        const double y = p.op_b == lt::operation::none ? b.at(std::size_t(l + j * p.b.ld))
                                                       : b.at(std::size_t(j + l * p.b.ld));
        sum += x * y;
      }
      double& out = d.at(std::size_t(i + j * p.d.ld));
      out = p.options.alpha * sum + (p.options.beta != 0.0f ? p.options.beta * out : 0.0);
    }
  }
}

std::vector<double> transpose(const std::vector<double>& in, std::int64_t rows, std::int64_t cols) {
  std::vector<double> out(in.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) out[std::size_t(c * rows + r)] = in[std::size_t(r * cols + c)];
  }
  return out;
}

std::vector<double> integers(std::int64_t count, int seed) {
  std::vector<double> v(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) v[std::size_t(i)] = double((i * 7 + seed * 13) % 11) - 5.0;
  return v;
}

// Runs the three planned products on host matrices (the FP8 copies hold the same values as the
// BF16 tensors here: the test is about which element meets which) and checks them against the
// row-major definitions: Y = X·Wᵀ, dX = dY·W, dW = dW0 + dYᵀ·X.
void check_products(const linear_plan& plan) {
  const std::int64_t m = plan.m, n = plan.n, k = plan.k;
  const std::vector<double> x = integers(m * k, 1), w = integers(n * k, 2), dy = integers(m * n, 3),
                            dw0 = integers(n * k, 4);
  std::map<linear_buffer, std::vector<double>> buffers{
      {linear_buffer::x, x},
      {linear_buffer::x_fp8, x},
      {linear_buffer::x_t_fp8, transpose(x, m, k)},
      {linear_buffer::w, w},
      {linear_buffer::w_fp8, w},
      {linear_buffer::w_t_fp8, transpose(w, n, k)},
      {linear_buffer::dy, dy},
      {linear_buffer::dy_fp8, dy},
      {linear_buffer::dy_t_fp8, transpose(dy, m, n)},
      {linear_buffer::x_fake, x},  // the BF16 decodes hold the copies' values too
      {linear_buffer::x_t_fake, transpose(x, m, k)},
      {linear_buffer::w_fake, w},
      {linear_buffer::w_t_fake, transpose(w, n, k)},
      {linear_buffer::dy_fake, dy},
      {linear_buffer::dy_t_fake, transpose(dy, m, n)},
      {linear_buffer::y, std::vector<double>(std::size_t(m * n))},
      {linear_buffer::dx, std::vector<double>(std::size_t(m * k))},
      {linear_buffer::dw, dw0}};
  for (const auto& g : plan.gemms) {
    const lt::gemm_problem p = lt::with_packed_leading_dimensions(g.problem);
    if (g.c != linear_buffer::none) CHECK(g.c == g.d);  // beta = 1 reads the output itself
    run_column_major(p, buffers.at(g.a), buffers.at(g.b), buffers.at(g.d));
  }
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double y = 0;
      for (std::int64_t l = 0; l < k; ++l) y += x[std::size_t(i * k + l)] * w[std::size_t(j * k + l)];
      REQUIRE(buffers[linear_buffer::y][std::size_t(i * n + j)] == y);
    }
  }
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < k; ++j) {
      double dx = 0;
      for (std::int64_t l = 0; l < n; ++l) dx += dy[std::size_t(i * n + l)] * w[std::size_t(l * k + j)];
      REQUIRE(buffers[linear_buffer::dx][std::size_t(i * k + j)] == dx);
    }
  }
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t j = 0; j < k; ++j) {
      double dw = dw0[std::size_t(i * k + j)];
      for (std::int64_t l = 0; l < m; ++l) dw += dy[std::size_t(l * n + i)] * x[std::size_t(l * k + j)];
      REQUIRE(buffers[linear_buffer::dw][std::size_t(i * k + j)] == dw);
    }
  }
}

}  // namespace

TEST_CASE("FP8 plan under delayed HYBRID scaling: TN products, fused cast + transpose, E5M2 gradients") {
  const linear_plan plan = fp8::cuda::make_linear_plan(config_of(48, 32, 64), 16);
  for (const auto& c : plan.casts) {
    CHECK(c.row_major);
    CHECK(c.transposed);
    CHECK(c.fused);
  }
  const auto& fprop = plan.gemm(gemm_kind::fprop).problem;
  CHECK(plan.gemm(gemm_kind::fprop).a == linear_buffer::w_fp8);
  CHECK(plan.gemm(gemm_kind::fprop).b == linear_buffer::x_fp8);
  CHECK(fprop.m == 32);  // cuBLAS m = out features, n = tokens
  CHECK(fprop.n == 16);
  CHECK(fprop.k == 48);
  CHECK(fprop.op_a == lt::operation::transpose);
  CHECK(fprop.op_b == lt::operation::none);
  CHECK(fprop.a.ld == 48);
  CHECK(fprop.b.ld == 48);
  CHECK(fprop.d.ld == 32);
  CHECK(fprop.a.type == lt::data_type::e4m3);
  CHECK(fprop.b.type == lt::data_type::e4m3);
  CHECK(fprop.d.type == lt::data_type::bf16);
  CHECK(fprop.options.fast_accum == lt::fast_accumulation::on);

  const auto& dgrad = plan.gemm(gemm_kind::dgrad).problem;
  CHECK(plan.gemm(gemm_kind::dgrad).a == linear_buffer::w_t_fp8);
  CHECK(plan.gemm(gemm_kind::dgrad).b == linear_buffer::dy_fp8);
  CHECK(dgrad.m == 48);
  CHECK(dgrad.n == 16);
  CHECK(dgrad.k == 32);
  CHECK(dgrad.a.ld == 32);  // Wᵀ [K, N]: rows of N codes
  CHECK(dgrad.b.ld == 32);
  CHECK(dgrad.a.type == lt::data_type::e4m3);
  CHECK(dgrad.b.type == lt::data_type::e5m2);
  CHECK(dgrad.options.fast_accum == lt::fast_accumulation::off);

  const auto& wgrad = plan.gemm(gemm_kind::wgrad).problem;
  CHECK(plan.gemm(gemm_kind::wgrad).a == linear_buffer::x_t_fp8);
  CHECK(plan.gemm(gemm_kind::wgrad).b == linear_buffer::dy_t_fp8);
  CHECK(plan.gemm(gemm_kind::wgrad).c == linear_buffer::dw);
  CHECK(wgrad.m == 48);
  CHECK(wgrad.n == 32);
  CHECK(wgrad.k == 16);
  CHECK(wgrad.a.ld == 16);  // Xᵀ [K, M] and dYᵀ [N, M]: rows of M codes
  CHECK(wgrad.b.ld == 16);
  CHECK(wgrad.d.type == lt::data_type::fp32);
  CHECK(wgrad.d.ld == 48);
  CHECK(wgrad.c.ld == 48);
  CHECK(wgrad.options.beta == 1.0f);
  CHECK(wgrad.b.type == lt::data_type::e5m2);
  CHECK(wgrad.options.fast_accum == lt::fast_accumulation::off);
  check_products(plan);
}

TEST_CASE("BF16 plan: no casts, no transposed copies, the operands read as stored") {
  const linear_plan plan =
      fp8::cuda::make_linear_plan(config_of(40, 24, 64, fp8::gemm_recipe{}, linear_precision::bf16()), 21);
  for (const auto& c : plan.casts) CHECK_FALSE(c.any());
  for (const auto& g : plan.gemms) {
    CHECK(g.precision == gemm_precision::bf16);
    CHECK(g.problem.a.type == lt::data_type::bf16);
    CHECK(g.problem.b.type == lt::data_type::bf16);
    CHECK(g.problem.options.fast_accum == lt::fast_accumulation::off);
  }
  CHECK(plan.gemm(gemm_kind::dgrad).a == linear_buffer::w);
  CHECK(plan.gemm(gemm_kind::dgrad).problem.op_a == lt::operation::none);
  CHECK(plan.gemm(gemm_kind::wgrad).problem.op_b == lt::operation::transpose);
  CHECK(plan.gemm(gemm_kind::wgrad).problem.d.type == lt::data_type::fp32);
  check_products(plan);  // shapes that FP8 would refuse (K 40, N 24, M 21) are fine in BF16
}

TEST_CASE("per-GEMM precision: each cast makes only the copies the FP8 classes read") {
  linear_precision mixed{};
  mixed.dgrad = gemm_precision::bf16;
  const linear_plan plan = fp8::cuda::make_linear_plan(config_of(64, 32, 64, fp8::gemm_recipe{}, mixed), 32);
  CHECK(plan.cast(linear_tensor::x).fused);             // fprop X and wgrad Xᵀ
  CHECK(plan.cast(linear_tensor::w).row_major);         // fprop W
  CHECK_FALSE(plan.cast(linear_tensor::w).transposed);  // dgrad reads the BF16 W
  CHECK_FALSE(plan.cast(linear_tensor::dy).row_major);  // dgrad reads the BF16 dY
  CHECK(plan.cast(linear_tensor::dy).transposed);       // wgrad's dYᵀ
  CHECK_FALSE(plan.cast(linear_tensor::dy).fused);
  CHECK(plan.gemm(gemm_kind::dgrad).problem.a.type == lt::data_type::bf16);
  check_products(plan);

  linear_precision fprop_only = linear_precision::bf16();
  fprop_only.fprop = gemm_precision::fp8;
  fprop_only.fast_accumulation_fprop = false;
  const linear_plan plan2 =
      fp8::cuda::make_linear_plan(config_of(64, 32, 64, fp8::gemm_recipe{}, fprop_only), 32);
  CHECK(plan2.gemm(gemm_kind::fprop).problem.options.fast_accum == lt::fast_accumulation::off);
  CHECK_FALSE(plan2.cast(linear_tensor::x).transposed);
  CHECK_FALSE(plan2.cast(linear_tensor::dy).any());
  check_products(plan2);
}

TEST_CASE("fp8_forward (inference): one row-major copy of X and of W, nothing transposed, nothing of dY") {
  for (const fp8::gemm_recipe& recipe : {fp8::gemm_recipe{}, fp8::gemm_recipe{fp8::current_scaling{}},
                                         fp8::gemm_recipe{fp8::current_scaling::blockwise()}}) {
    linear_config c = config_of(256, 128, 512, recipe, linear_precision::fp8_forward());
    c.record_bf16_amax = false;
    const linear_plan plan = fp8::cuda::make_linear_plan(c, 256);
    for (const linear_tensor t : {linear_tensor::x, linear_tensor::w}) {
      CAPTURE(int(t));
      CHECK(plan.cast(t).row_major);
      CHECK_FALSE(plan.cast(t).transposed);
      CHECK_FALSE(plan.cast(t).fused);
    }
    CHECK_FALSE(plan.cast(linear_tensor::dy).any());
    CHECK(plan.gemm(gemm_kind::fprop).precision == gemm_precision::fp8);
    const fp8::operand_recipe& x = recipe[gemm_operand::fprop_input];
    const bool blocks =
        x.quant.granularity == fp8::granularity::tile_1x128;  // cuBLASLt: no fast accumulation
    CHECK(plan.gemm(gemm_kind::fprop).problem.options.fast_accum ==
          (blocks ? lt::fast_accumulation::off : lt::fast_accumulation::on));
    CHECK(plan.gemm(gemm_kind::dgrad).precision == gemm_precision::bf16);
    CHECK(plan.gemm(gemm_kind::wgrad).precision == gemm_precision::bf16);
    // X is read once by its cast: a producer's amax saves a read only where the cast needs the amax
    // first (current per tensor); no amax-only pass for the BF16 classes.
    const bool per_tensor_current =
        x.mode == fp8::scaling_mode::current && x.quant.granularity == fp8::granularity::per_tensor;
    CHECK(fp8::cuda::given_amax_saves_read(c, linear_tensor::x) == per_tensor_current);
    CHECK(fp8::cuda::fp8_input_refusal(c, linear_tensor::x) != nullptr);  // no fused cast to write into
    check_products(plan);
  }
}

TEST_CASE(
    "a forward that no backward follows: X's copy as stored only, W's copies kept, fprop's shapes only") {
  using fp8::cuda::linear_pass;
  const auto forward_refusal = [](const linear_config& config, std::int64_t tokens) -> std::string {
    try {
      (void)fp8::cuda::make_linear_plan(config, tokens, linear_pass::forward_only);
    } catch (const fp8::invalid_argument& e) { return e.what(); }
    return "";
  };
  for (const fp8::gemm_recipe& recipe : {fp8::gemm_recipe{}, fp8::gemm_recipe{fp8::current_scaling{}},
                                         fp8::gemm_recipe{fp8::current_scaling::blockwise()}}) {
    for (const linear_precision& precision : {linear_precision::fp8(), linear_precision::fake_fp8()}) {
      const linear_config c = config_of(256, 128, 512, recipe, precision);
      const linear_plan full = fp8::cuda::make_linear_plan(c, 256);
      const linear_plan forward = fp8::cuda::make_linear_plan(c, 256, linear_pass::forward_only);
      CHECK(full.pass == linear_pass::training);
      CHECK(forward.pass == linear_pass::forward_only);
      const fp8::cuda::cast_plan& x = forward.cast(linear_tensor::x);
      CHECK(x.row_major);
      CHECK_FALSE(x.transposed);
      CHECK_FALSE(x.fused);
      CHECK_FALSE(x.dequantize_transposed);
      CHECK(x.dequantize_row == (precision.fprop == gemm_precision::fake_fp8));
      CHECK(x.row_buffer == full.cast(linear_tensor::x).row_buffer);
      CHECK_FALSE(forward.bf16_cast(linear_tensor::x).any());  // wgrad's operand of X: no product reads it
      // W's copies serve later training calls too: the whole pass's casts.
      check_same_cast(forward.cast(linear_tensor::w), full.cast(linear_tensor::w));
      CHECK(forward.cast(linear_tensor::w).transposed);
      // fprop as the whole pass plans it; neither backward product planned.
      const fp8::cuda::gemm_plan& f = forward.gemm(gemm_kind::fprop);
      const fp8::cuda::gemm_plan& g = full.gemm(gemm_kind::fprop);
      CHECK(f.a == g.a);
      CHECK(f.b == g.b);
      CHECK(f.d == linear_buffer::y);
      CHECK(f.problem.a.type == g.problem.a.type);
      CHECK(f.problem.a.scaling == g.problem.a.scaling);
      CHECK(f.problem.options.fast_accum == g.problem.options.fast_accum);
      for (const gemm_kind kind : {gemm_kind::dgrad, gemm_kind::wgrad}) {
        const fp8::cuda::gemm_plan& b = forward.gemm(kind);
        CHECK(b.kind == kind);
        CHECK(b.precision == full.gemm(kind).precision);
        CHECK(b.a == linear_buffer::none);
        CHECK(b.b == linear_buffer::none);
        CHECK(b.d == linear_buffer::none);
        CHECK(b.c == linear_buffer::none);
      }
      CHECK(forward.bias_gradient == fp8::cuda::bias_gradient_method::none);
    }
  }
  // Token counts: a decode step of a few tokens needs only fprop's rules. The whole pass refuses 3
  // tokens (an FP8 wgrad reduces over them, in multiples of 16), the forward takes it; block scales
  // keep fprop's multiple of 4.
  const linear_config per_tensor = config_of(64, 32, 64);
  CHECK(contains(refusal(per_tensor, 3), "tokens (M) = 3 is not a multiple of 16"));
  CHECK(contains(refusal(per_tensor, 3), "backward_follows = false"));
  CHECK(forward_refusal(per_tensor, 3).empty());
  CHECK(forward_refusal(per_tensor, 1).empty());
  const linear_plan one = fp8::cuda::make_linear_plan(per_tensor, 1, linear_pass::forward_only);
  CHECK(one.gemm(gemm_kind::fprop).problem.n == 1);
  const linear_config blocks = config_of(256, 128, 256, fp8::gemm_recipe{fp8::current_scaling::blockwise()});
  CHECK(contains(forward_refusal(blocks, 18), "FP8 fprop product has block scales"));
  CHECK(forward_refusal(blocks, 20).empty());
  // The rules that do not depend on the tokens hold in a forward too, and so does max_tokens.
  CHECK(
      contains(forward_refusal(config_of(64, 24, 64), 16), "out_features (N) = 24 is not a multiple of 16"));
  CHECK(contains(forward_refusal(per_tensor, 65), "outside 1..64"));
}

TEST_CASE("every device recipe plans products the wrapper accepts, with its scale modes") {
  struct row {
    const char* name;
    fp8::gemm_recipe recipe;
    lt::scale_mode activations, weights;
  };
  const row rows[] = {
      {"delayed", fp8::gemm_recipe{fp8::delayed_scaling{}}, lt::scale_mode::tensorwise,
       lt::scale_mode::tensorwise},
      {"current per tensor", current_recipe(fp8::granularity::per_tensor), lt::scale_mode::tensorwise,
       lt::scale_mode::tensorwise},
      {"current per row", current_recipe(fp8::granularity::per_row), lt::scale_mode::row_wise,
       lt::scale_mode::row_wise},
      {"current 1x128", current_recipe(fp8::granularity::tile_1x128), lt::scale_mode::block_1x128,
       lt::scale_mode::block_1x128},
      {"blockwise", fp8::gemm_recipe{fp8::current_scaling::blockwise()}, lt::scale_mode::block_1x128,
       lt::scale_mode::block_128x128},
  };
  for (const row& r : rows) {
    CAPTURE(r.name);
    const linear_plan plan = fp8::cuda::make_linear_plan(config_of(256, 128, 512, r.recipe), 256);
    const auto& fprop = plan.gemm(gemm_kind::fprop).problem;
    CHECK(fprop.a.scaling == r.weights);      // A = W
    CHECK(fprop.b.scaling == r.activations);  // B = X
    CHECK(plan.gemm(gemm_kind::dgrad).problem.a.scaling == r.weights);
    CHECK(plan.gemm(gemm_kind::wgrad).problem.a.scaling == r.activations);  // Xᵀ
    const bool block = r.activations == lt::scale_mode::block_1x128;
    CHECK(fprop.options.fast_accum == (block ? lt::fast_accumulation::off : lt::fast_accumulation::on));
    for (const auto& c : plan.casts) CHECK(c.fused);
    check_products(plan);
  }
}

TEST_CASE("casts are fused only when both operands of a tensor share a recipe") {
  fp8::gemm_recipe recipe{fp8::delayed_scaling{}};
  recipe.use(gemm_operand::wgrad_input, fp8::current_scaling{});
  const linear_plan plan = fp8::cuda::make_linear_plan(config_of(64, 32, 64, recipe), 32);
  CHECK_FALSE(plan.cast(linear_tensor::x).fused);
  CHECK(plan.cast(linear_tensor::x).row_major);
  CHECK(plan.cast(linear_tensor::x).transposed);
  CHECK(plan.cast(linear_tensor::w).fused);
  CHECK(fp8::cuda::scale_floats(recipe[gemm_operand::fprop_input], 32, 64) == 1);
  CHECK(fp8::cuda::scale_floats(
            fp8::gemm_recipe{fp8::current_scaling::blockwise()}[gemm_operand::fprop_input], 32, 300) ==
        3 * 32);
}

TEST_CASE("bias: the fprop epilogue, and BGRADB where cuBLASLt has it (BF16 wgrad), else a column sum") {
  linear_config c = config_of(64, 32, 64);
  c.bias = true;
  linear_plan plan = fp8::cuda::make_linear_plan(c, 32);
  CHECK(plan.gemm(gemm_kind::fprop).problem.options.epilogue_kind == lt::epilogue::bias);
  CHECK(plan.gemm(gemm_kind::fprop).bias == linear_buffer::bias);
  // An FP8 wgrad with tensorwise scales: cuBLASLt refuses BGRADB for FP8 products on sm_90.
  CHECK(plan.bias_gradient == fp8::cuda::bias_gradient_method::column_sum);
  CHECK(plan.gemm(gemm_kind::wgrad).problem.options.epilogue_kind == lt::epilogue::none);

  c.precision = linear_precision::bf16();
  plan = fp8::cuda::make_linear_plan(c, 32);
  CHECK(plan.bias_gradient == fp8::cuda::bias_gradient_method::epilogue);
  CHECK(plan.gemm(gemm_kind::wgrad).problem.options.epilogue_kind == lt::epilogue::bias_gradient_b);
  CHECK(plan.bias_gradient_type == lt::data_type::fp32);  // C's type: FP32 beside an FP32 D

  c.precision = {};
  c.recipe = fp8::gemm_recipe{fp8::current_scaling::blockwise()};
  CHECK(fp8::cuda::make_linear_plan(c, 32).bias_gradient == fp8::cuda::bias_gradient_method::column_sum);
  c.recipe = fp8::gemm_recipe{};
  c.fuse_bias_gradient = false;
  plan = fp8::cuda::make_linear_plan(c, 32);
  CHECK(plan.bias_gradient == fp8::cuda::bias_gradient_method::column_sum);
  CHECK(plan.gemm(gemm_kind::wgrad).problem.options.epilogue_kind == lt::epilogue::none);
  // A fake_fp8 wgrad is a BF16 product on the decoded dYᵀ in TN form, which BGRADB does not take
  // (B not transposed): dbias is the column sum of dY in every recipe, as for an FP8 wgrad.
  c.fuse_bias_gradient = true;
  c.precision = linear_precision::fake_fp8();
  for (const auto& recipe : {fp8::gemm_recipe{}, fp8::gemm_recipe{fp8::current_scaling::blockwise()}}) {
    c.recipe = recipe;
    plan = fp8::cuda::make_linear_plan(c, 32);
    CHECK(plan.bias_gradient == fp8::cuda::bias_gradient_method::column_sum);
    CHECK(plan.gemm(gemm_kind::wgrad).bias == linear_buffer::none);
    CHECK(plan.gemm(gemm_kind::wgrad).b == linear_buffer::dy_t_fake);
    CHECK(plan.gemm(gemm_kind::wgrad).problem.options.epilogue_kind == lt::epilogue::none);
    CHECK(plan.gemm(gemm_kind::fprop).problem.options.epilogue_kind == lt::epilogue::bias);
  }
}

TEST_CASE("shapes cuBLASLt refuses are refused in the layer's terms, per FP8 class") {
  CHECK(contains(refusal(config_of(100, 32, 64), 32), "in_features (K) = 100 is not a multiple of 16"));
  CHECK(contains(refusal(config_of(64, 24, 64), 32), "out_features (N) = 24 is not a multiple of 16"));
  CHECK(contains(refusal(config_of(64, 32, 64), 24), "tokens (M) = 24 is not a multiple of 16"));
  CHECK(contains(refusal(config_of(64, 32, 64), 65), "outside 1..64"));
  CHECK(contains(refusal(config_of(0, 32, 64), 16), "must be positive"));
  linear_precision no_wgrad{};
  no_wgrad.wgrad = gemm_precision::bf16;
  CHECK(refusal(config_of(64, 32, 64, fp8::gemm_recipe{}, no_wgrad), 24)
            .empty());  // only wgrad reduces over tokens
  linear_precision fprop_only = linear_precision::bf16();
  fprop_only.fprop = gemm_precision::fp8;
  CHECK(refusal(config_of(64, 24, 64, fp8::gemm_recipe{}, fprop_only), 24)
            .empty());  // N 24: Y's rows are 48 bytes
  CHECK(contains(refusal(config_of(64, 20, 64, fp8::gemm_recipe{}, fprop_only), 16),
                 "out_features (N) = 20 is not a multiple of 8"));
}

TEST_CASE(
    "block-scaled FP8 products need token counts (and wgrad's N) multiples of 4, said in the layer's terms") {
  const fp8::gemm_recipe blockwise{fp8::current_scaling::blockwise()};
  linear_precision no_wgrad{};
  no_wgrad.wgrad = gemm_precision::bf16;  // wgrad's tokens % 16 would refuse 18 first
  const std::string fprop = refusal(config_of(256, 128, 256, blockwise, no_wgrad), 18);
  CHECK(contains(fprop, "tokens (M) = 18 is not a multiple of 4"));
  CHECK(contains(fprop, "FP8 fprop product has block scales"));
  linear_precision dgrad_only = linear_precision::bf16();
  dgrad_only.dgrad = gemm_precision::fp8;
  CHECK(contains(refusal(config_of(256, 128, 256, blockwise, dgrad_only), 18),
                 "FP8 dgrad product has block scales"));
  linear_precision wgrad_only = linear_precision::bf16();
  wgrad_only.wgrad = gemm_precision::fp8;
  const std::string wgrad = refusal(config_of(256, 18, 256, blockwise, wgrad_only), 32);
  CHECK(contains(wgrad, "out_features (N) = 18 is not a multiple of 4"));
  CHECK(contains(wgrad, "FP8 wgrad product has block scales"));
  // Multiples of 4 plan, and so does any count with per-row scales or a fake_fp8 class.
  CHECK(refusal(config_of(256, 128, 256, blockwise, no_wgrad), 20).empty());
  CHECK(refusal(config_of(256, 20, 256, blockwise, wgrad_only), 32).empty());
  CHECK(refusal(config_of(256, 128, 256, current_recipe(fp8::granularity::per_row), no_wgrad), 18).empty());
  CHECK(refusal(config_of(256, 128, 256, blockwise, linear_precision::fake_fp8()), 18).empty());
}

TEST_CASE("mx_1x32 operands: refused for fake_fp8 classes as for fp8 ones, planned for BF16 classes") {
  const fp8::gemm_recipe mx{fp8::current_scaling::mx()};
  // The device casts have no mx_1x32, and a fake class casts: refused by the plan, naming the operand.
  const std::string fake = refusal(config_of(64, 32, 64, mx, linear_precision::fake_fp8()), 32);
  CHECK(contains(fake, "mx_1x32"));
  CHECK(contains(fake, "fprop_input"));
  linear_precision dgrad_fake = linear_precision::bf16();
  dgrad_fake.dgrad = gemm_precision::fake_fp8;
  CHECK(contains(refusal(config_of(64, 32, 64, mx, dgrad_fake), 32), "mx_1x32"));
  // A BF16 class casts nothing for its product: it plans (its amax is recorded, its statistics refused).
  const linear_plan bf16 =
      fp8::cuda::make_linear_plan(config_of(64, 32, 64, mx, linear_precision::bf16()), 32);
  for (const auto& c : bf16.casts) CHECK_FALSE(c.any());
}

TEST_CASE("recipes cuBLASLt cannot run are refused with the product and the reason") {
  const std::string both_2d =
      refusal(config_of(256, 128, 256, current_recipe(fp8::granularity::block_128x128)), 128);
  CHECK(contains(both_2d, "fprop product in fp8 cannot run"));
  CHECK(contains(both_2d, "2D x 2D"));
  const std::string mixed = refusal(
      config_of(256, 128, 256, current_recipe(fp8::granularity::per_row, fp8::granularity::per_tensor)), 128);
  CHECK(contains(mixed, "unsupported scale-mode pair"));
  CHECK(
      contains(refusal(config_of(64, 32, 64, fp8::gemm_recipe{fp8::current_scaling::mx()}), 32), "mx_1x32"));
  fp8::gemm_recipe e5m2{fp8::delayed_scaling{}};
  e5m2.use(gemm_operand::dgrad_weight,
           fp8::operand_recipe{fp8::scaling_mode::delayed, {fp8::fp8_format::e5m2}});
  const std::string both_e5m2 = refusal(config_of(64, 32, 64, e5m2), 32);
  CHECK(contains(both_e5m2, "dgrad product"));
  CHECK(contains(both_e5m2, "E5M2xE5M2"));
}

TEST_CASE("caller pointers that an FP8 product or an epilogue reads are checked for 16-byte alignment") {
  linear_config c = config_of(64, 32, 64);
  c.bias = true;
  const linear_plan fp8_plan = fp8::cuda::make_linear_plan(c, 32);
  alignas(16) static unsigned char memory[64];
  const void* aligned = memory;
  const void* off_by_8 = memory + 8;
  CHECK_NOTHROW(fp8::cuda::check_caller_pointer(fp8_plan, linear_buffer::y, aligned));
  CHECK_NOTHROW(
      fp8::cuda::check_caller_pointer(fp8_plan, linear_buffer::x, off_by_8));  // only the cast reads X
  std::string message;
  try {
    fp8::cuda::check_caller_pointer(fp8_plan, linear_buffer::dw, off_by_8);
  } catch (const fp8::invalid_argument& e) { message = e.what(); }
  CHECK(contains(message, "dw is at 0x"));
  CHECK(contains(message, "wgrad product (fp8) needs it 16-byte aligned"));
  CHECK_THROWS_AS(fp8::cuda::check_caller_pointer(fp8_plan, linear_buffer::bias, off_by_8),
                  fp8::invalid_argument);

  c.precision = linear_precision::bf16();
  const linear_plan bf16_plan = fp8::cuda::make_linear_plan(c, 32);
  CHECK_NOTHROW(fp8::cuda::check_caller_pointer(bf16_plan, linear_buffer::dw, off_by_8));
  CHECK_NOTHROW(fp8::cuda::check_caller_pointer(bf16_plan, linear_buffer::x, off_by_8));
  CHECK_THROWS_AS(fp8::cuda::check_caller_pointer(bf16_plan, linear_buffer::bias, off_by_8),
                  fp8::invalid_argument);
}

TEST_CASE("fake_fp8 names, and which classes read FP8 copies") {
  CHECK(std::string(fp8::cuda::precision_name(gemm_precision::fp8)) == "fp8");
  CHECK(std::string(fp8::cuda::precision_name(gemm_precision::bf16)) == "bf16");
  CHECK(std::string(fp8::cuda::precision_name(gemm_precision::fake_fp8)) == "fake_fp8");
  CHECK(fp8::cuda::casts_to_fp8(gemm_precision::fp8));
  CHECK(fp8::cuda::casts_to_fp8(gemm_precision::fake_fp8));
  CHECK_FALSE(fp8::cuda::casts_to_fp8(gemm_precision::bf16));
  constexpr linear_precision fake = linear_precision::fake_fp8();
  for (gemm_kind kind : {gemm_kind::fprop, gemm_kind::dgrad, gemm_kind::wgrad}) {
    CHECK(fake.of(kind) == gemm_precision::fake_fp8);
    CHECK(fake.fast_accumulation(kind) == linear_precision{}.fast_accumulation(kind));
  }
  CHECK(std::string(fp8::cuda::buffer_name(linear_buffer::w_t_fake)) == "w_t_fake");
  CHECK(std::string(fp8::cuda::buffer_name(linear_buffer::dy_t_fake)) == "dy_t_fake");
  CHECK(fp8::cuda::linear_buffer_count == std::size_t(linear_buffer::dy_t_fake) + 1);
}

TEST_CASE("fake_fp8 plan: the FP8 plan's casts, each copy decoded to BF16, the same TN products in BF16") {
  for (const auto& recipe : {fp8::gemm_recipe{}, current_recipe(fp8::granularity::per_row),
                             fp8::gemm_recipe{fp8::current_scaling::blockwise()}}) {
    const linear_plan real =
        fp8::cuda::make_linear_plan(config_of(256, 128, 256, recipe, linear_precision::fp8()), 256);
    const linear_plan fake =
        fp8::cuda::make_linear_plan(config_of(256, 128, 256, recipe, linear_precision::fake_fp8()), 256);
    for (linear_tensor t : {linear_tensor::x, linear_tensor::w, linear_tensor::dy}) {
      CAPTURE(int(t));
      const fp8::cuda::cast_plan& r = real.cast(t);
      const fp8::cuda::cast_plan& f = fake.cast(t);
      // The same casts: copies, fusion, operands and recipes (so the same values and amaxes).
      check_same_cast(f, r);
      CHECK(f.row_buffer == r.row_buffer);
      CHECK(f.transposed_buffer == r.transposed_buffer);
      // Every copy is decoded in the fake plan, none in the real one.
      CHECK(f.dequantize_row);
      CHECK(f.dequantize_transposed);
      CHECK_FALSE(r.dequantize_row);
      CHECK_FALSE(r.dequantize_transposed);
    }
    CHECK(fake.cast(linear_tensor::x).row_fake_buffer == linear_buffer::x_fake);
    CHECK(fake.cast(linear_tensor::x).transposed_fake_buffer == linear_buffer::x_t_fake);
    CHECK(fake.cast(linear_tensor::w).transposed_fake_buffer == linear_buffer::w_t_fake);
    CHECK(fake.cast(linear_tensor::dy).row_fake_buffer == linear_buffer::dy_fake);
    for (gemm_kind kind : {gemm_kind::fprop, gemm_kind::dgrad, gemm_kind::wgrad}) {
      CAPTURE(int(kind));
      const fp8::cuda::gemm_plan& r = real.gemm(kind);
      const fp8::cuda::gemm_plan& f = fake.gemm(kind);
      CHECK(f.precision == gemm_precision::fake_fp8);
      // The FP8 product's shape and transposes, on BF16 operands without scales or fast accumulation.
      CHECK(f.problem.m == r.problem.m);
      CHECK(f.problem.n == r.problem.n);
      CHECK(f.problem.k == r.problem.k);
      CHECK(f.problem.op_a == r.problem.op_a);
      CHECK(f.problem.op_b == r.problem.op_b);
      CHECK(f.problem.a.type == lt::data_type::bf16);
      CHECK(f.problem.b.type == lt::data_type::bf16);
      CHECK(f.problem.d.type == r.problem.d.type);
      CHECK(f.problem.options.fast_accum == lt::fast_accumulation::off);
      CHECK(f.d == r.d);
      CHECK(f.c == r.c);
    }
    CHECK(fake.gemm(gemm_kind::fprop).a == linear_buffer::w_fake);
    CHECK(fake.gemm(gemm_kind::fprop).b == linear_buffer::x_fake);
    CHECK(fake.gemm(gemm_kind::dgrad).a == linear_buffer::w_t_fake);
    CHECK(fake.gemm(gemm_kind::dgrad).b == linear_buffer::dy_fake);
    CHECK(fake.gemm(gemm_kind::wgrad).a == linear_buffer::x_t_fake);
    CHECK(fake.gemm(gemm_kind::wgrad).b == linear_buffer::dy_t_fake);
    CHECK(fake.gemm(gemm_kind::wgrad).problem.options.beta == 1.0f);
    check_products(fake);
  }
}

TEST_CASE("fake_fp8 per class: only the copies a fake class reads are decoded") {
  linear_precision mixed{};
  mixed.fprop = gemm_precision::fp8;
  mixed.dgrad = gemm_precision::fake_fp8;
  mixed.wgrad = gemm_precision::bf16;
  const linear_plan plan = fp8::cuda::make_linear_plan(config_of(64, 32, 64, fp8::gemm_recipe{}, mixed), 32);
  // X: fprop's FP8 copy only (wgrad reads the BF16 X), not decoded.
  CHECK(plan.cast(linear_tensor::x).row_major);
  CHECK_FALSE(plan.cast(linear_tensor::x).transposed);
  CHECK_FALSE(plan.cast(linear_tensor::x).dequantize_row);
  // W: fprop's copy as it is, dgrad's transpose decoded; one fused cast.
  CHECK(plan.cast(linear_tensor::w).fused);
  CHECK_FALSE(plan.cast(linear_tensor::w).dequantize_row);
  CHECK(plan.cast(linear_tensor::w).dequantize_transposed);
  // dY: dgrad's copy, decoded; no transpose (wgrad in BF16).
  CHECK(plan.cast(linear_tensor::dy).row_major);
  CHECK_FALSE(plan.cast(linear_tensor::dy).transposed);
  CHECK(plan.cast(linear_tensor::dy).dequantize_row);
  CHECK_FALSE(plan.cast(linear_tensor::dy).dequantize_transposed);
  CHECK(plan.gemm(gemm_kind::fprop).a == linear_buffer::w_fp8);
  CHECK(plan.gemm(gemm_kind::fprop).problem.options.fast_accum == lt::fast_accumulation::on);
  CHECK(plan.gemm(gemm_kind::dgrad).a == linear_buffer::w_t_fake);
  CHECK(plan.gemm(gemm_kind::wgrad).a == linear_buffer::x);
  check_products(plan);
}

TEST_CASE("fake_fp8 classes take shapes an FP8 product refuses, and need no aligned caller pointers") {
  // K 40, N 24, M 21: FP8 refuses each class (K % 16, N % 16, M % 16); the BF16 products take them.
  CHECK(contains(refusal(config_of(40, 24, 64), 21), "in_features (K)"));
  for (const auto& recipe : {fp8::gemm_recipe{}, fp8::gemm_recipe{fp8::current_scaling::blockwise()}}) {
    const linear_plan plan =
        fp8::cuda::make_linear_plan(config_of(40, 24, 64, recipe, linear_precision::fake_fp8()), 21);
    check_products(plan);
    const void* odd = reinterpret_cast<const void*>(std::uintptr_t(0x1002));
    CHECK_NOTHROW(fp8::cuda::check_caller_pointer(plan, linear_buffer::y, odd));
    CHECK_NOTHROW(fp8::cuda::check_caller_pointer(plan, linear_buffer::dw, odd));
  }
  // One class fake, the others FP8: the FP8 classes keep their rules, named with the way out.
  linear_precision fake_wgrad{};
  fake_wgrad.wgrad = gemm_precision::fake_fp8;
  CHECK(refusal(config_of(64, 32, 64, fp8::gemm_recipe{}, fake_wgrad), 21) == "");
  CHECK(contains(refusal(config_of(40, 32, 64, fp8::gemm_recipe{}, fake_wgrad), 32), "BF16 or fake_fp8"));
}

namespace {

// Every operand is either cast for its FP8 (or fake) class or listed among the BF16 operands, never both.
void check_partition(const linear_plan& plan, const linear_precision& precision) {
  for (std::size_t t = 0; t < 3; ++t) {
    const fp8::cuda::cast_plan& c = plan.casts[t];
    const fp8::cuda::cast_plan& b = plan.bf16_casts[t];
    CAPTURE(t);
    CHECK(c.row_operand == b.row_operand);
    CHECK(c.transposed_operand == b.transposed_operand);
    CHECK(b.row_major == (precision.of(fp8::gemm_of(b.row_operand)) == gemm_precision::bf16));
    CHECK(b.transposed == (precision.of(fp8::gemm_of(b.transposed_operand)) == gemm_precision::bf16));
    CHECK(c.row_major != b.row_major);
    CHECK(c.transposed != b.transposed);
    // No product reads a BF16 operand's cast: it goes into scratch copies, and is never decoded.
    CHECK(b.row_buffer == linear_buffer::none);
    CHECK(b.transposed_buffer == linear_buffer::none);
    CHECK_FALSE(b.dequantize_row);
    CHECK_FALSE(b.dequantize_transposed);
  }
}

}  // namespace

TEST_CASE("BF16 classes: their operands are planned as the casts an FP8 class would make") {
  // Recording the amaxes of BF16 classes is the default, as the CPU trainer records every operand.
  CHECK(linear_config{}.record_bf16_amax);

  // All BF16: the six operands, cast exactly as the all-FP8 plan casts them (fused per tensor).
  const linear_plan fp8_plan = fp8::cuda::make_linear_plan(config_of(64, 32, 64), 32);
  const linear_plan bf16_plan =
      fp8::cuda::make_linear_plan(config_of(64, 32, 64, fp8::gemm_recipe{}, linear_precision::bf16()), 32);
  for (std::size_t t = 0; t < 3; ++t) {
    CAPTURE(t);
    check_same_cast(bf16_plan.bf16_casts[t], fp8_plan.casts[t]);
    CHECK(bf16_plan.bf16_casts[t].fused);
    CHECK_FALSE(fp8_plan.bf16_casts[t].any());  // all FP8: no BF16 operand
  }
  check_partition(fp8_plan, linear_precision::fp8());
  check_partition(bf16_plan, linear_precision::bf16());

  // One class in BF16: its two operands, each the half of its tensor's cast that the class reads.
  linear_precision mixed{};
  mixed.dgrad = gemm_precision::bf16;
  const linear_plan plan = fp8::cuda::make_linear_plan(config_of(64, 32, 64, fp8::gemm_recipe{}, mixed), 32);
  check_partition(plan, mixed);
  CHECK_FALSE(plan.bf16_cast(linear_tensor::x).any());
  CHECK(plan.bf16_cast(linear_tensor::w).transposed);  // dgrad's Wᵀ [K, N]
  CHECK(plan.bf16_cast(linear_tensor::w).transposed_operand == gemm_operand::dgrad_weight);
  CHECK(plan.bf16_cast(linear_tensor::dy).row_major);  // dgrad's dY [M, N]
  CHECK(plan.bf16_cast(linear_tensor::dy).row_operand == gemm_operand::dgrad_grad_output);
  CHECK_FALSE(plan.bf16_cast(linear_tensor::dy).fused);
  CHECK(plan.bf16_cast(linear_tensor::dy).rows == 32);
  CHECK(plan.bf16_cast(linear_tensor::dy).cols == 32);

  // fake_fp8 classes cast for their products: no BF16 operand. With fprop in BF16 beside them, X and
  // W are listed for fprop only.
  linear_precision fake = linear_precision::fake_fp8();
  CHECK_FALSE(fp8::cuda::make_linear_plan(config_of(64, 32, 64, fp8::gemm_recipe{}, fake), 32)
                  .bf16_cast(linear_tensor::dy)
                  .any());
  fake.fprop = gemm_precision::bf16;
  check_partition(fp8::cuda::make_linear_plan(config_of(64, 32, 64, fp8::gemm_recipe{}, fake), 32), fake);

  // Two recipes for X: the BF16 operands' casts are unfused, as FP8's would be.
  fp8::gemm_recipe recipe{fp8::delayed_scaling{}};
  recipe.use(gemm_operand::wgrad_input, fp8::current_scaling{});
  const linear_plan unfused =
      fp8::cuda::make_linear_plan(config_of(64, 32, 64, recipe, linear_precision::bf16()), 32);
  CHECK_FALSE(unfused.bf16_cast(linear_tensor::x).fused);
  CHECK(unfused.bf16_cast(linear_tensor::w).fused);
  check_same_cast(unfused.bf16_cast(linear_tensor::x),
                  fp8::cuda::make_linear_plan(config_of(64, 32, 64, recipe), 32).cast(linear_tensor::x));

  // BF16 shapes that FP8 products refuse still plan the casts (the device casts take any shape).
  const linear_plan odd =
      fp8::cuda::make_linear_plan(config_of(40, 24, 64, fp8::gemm_recipe{}, linear_precision::bf16()), 21);
  CHECK(odd.bf16_cast(linear_tensor::dy).rows == 21);
  CHECK(odd.bf16_cast(linear_tensor::dy).cols == 24);
  check_partition(odd, linear_precision::bf16());
}

// A grid of configurations (each class's precision, recipes of every scale mode, bias, fast
// accumulation, shapes only BF16 takes), checked for what every plan must hold; `text_of`
// writes a plan out whole (every field of every cast and product), to compare two plans.
namespace {

template <class E>
int as_int(E e) {
  return int(e);
}

std::string text_of(const lt::input_matrix& m) {
  return "{type " + std::to_string(as_int(m.type)) + " ld " + std::to_string(m.ld) + " scaling " +
         std::to_string(as_int(m.scaling)) + (m.data || m.scale_inv ? " pointers" : "") + "}";
}

template <class T>
std::string optional_text(const std::optional<T>& value) {
  return value ? std::to_string(as_int(*value)) : std::string("-");
}

std::string hex_float(float value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%a", double(value));
  return text;
}

std::string text_of(const lt::gemm_problem& p) {
  const lt::gemm_options& o = p.options;
  std::string out = "m " + std::to_string(p.m) + " n " + std::to_string(p.n) + " k " + std::to_string(p.k) +
                    " op_a " + std::to_string(as_int(p.op_a)) + " op_b " + std::to_string(as_int(p.op_b)) +
                    " a " + text_of(p.a) + " b " + text_of(p.b);
  out += " d {type " + std::to_string(as_int(p.d.type)) + " ld " + std::to_string(p.d.ld) +
         (p.d.data || p.d.scale || p.d.amax ? " pointers" : "") + "}";
  out += " options {epilogue " + std::to_string(as_int(o.epilogue_kind)) + " bias_type " +
         optional_text(o.bias_type) + " aux_ld " + std::to_string(o.aux_ld) + " aux_type " +
         optional_text(o.aux_type) + " alpha " + hex_float(o.alpha) + " beta " + hex_float(o.beta) +
         " purpose " + std::to_string(as_int(o.purpose)) + " fast_accum " +
         std::to_string(as_int(o.fast_accum)) + (o.bias || o.aux ? " pointers" : "") + "}";
  out += " c {type " + optional_text(p.c.type) + " ld " + std::to_string(p.c.ld) +
         (p.c.data ? " pointer" : "") + "}";
  out += " batch {" + std::to_string(p.batch.count) + " " + std::to_string(p.batch.stride_a) + " " +
         std::to_string(p.batch.stride_b) + " " + std::to_string(p.batch.stride_c) + " " +
         std::to_string(p.batch.stride_d) + "}";
  return out;
}

std::string text_of(const fp8::cuda::cast_plan& c) {
  return "tensor " + std::to_string(as_int(c.tensor)) + " " + std::to_string(c.rows) + "x" +
         std::to_string(c.cols) + " row_major " + std::to_string(c.row_major) + " transposed " +
         std::to_string(c.transposed) + " fused " + std::to_string(c.fused) + " operands " +
         fp8::operand_name(c.row_operand) + "/" + fp8::operand_name(c.transposed_operand) + " buffers " +
         fp8::cuda::buffer_name(c.row_buffer) + "/" + fp8::cuda::buffer_name(c.transposed_buffer) +
         " dequantize " + std::to_string(c.dequantize_row) + "/" + std::to_string(c.dequantize_transposed) +
         " fake buffers " + fp8::cuda::buffer_name(c.row_fake_buffer) + "/" +
         fp8::cuda::buffer_name(c.transposed_fake_buffer);
}

std::string text_of(const fp8::cuda::gemm_plan& g) {
  return "kind " + std::to_string(as_int(g.kind)) + " precision " + fp8::cuda::precision_name(g.precision) +
         " a " + fp8::cuda::buffer_name(g.a) + " b " + fp8::cuda::buffer_name(g.b) + " d " +
         fp8::cuda::buffer_name(g.d) + " c " + fp8::cuda::buffer_name(g.c) + " bias " +
         fp8::cuda::buffer_name(g.bias) + " problem " + text_of(g.problem);
}

std::string text_of(const linear_config& config, std::int64_t tokens) {
  linear_plan plan;
  try {
    plan = fp8::cuda::make_linear_plan(config, tokens);
  } catch (const fp8::invalid_argument& e) { return std::string("refused: ") + e.what() + "\n"; }
  std::string out = "m " + std::to_string(plan.m) + " n " + std::to_string(plan.n) + " k " +
                    std::to_string(plan.k) + " bias_gradient " + std::to_string(as_int(plan.bias_gradient)) +
                    " type " + std::to_string(as_int(plan.bias_gradient_type)) + "\n";
  for (const auto& c : plan.casts) out += "cast " + text_of(c) + "\n";
  for (const auto& c : plan.bf16_casts) out += "bf16 " + text_of(c) + "\n";
  for (const auto& g : plan.gemms) out += "gemm " + text_of(g) + "\n";
  return out;
}

struct grid_config {
  std::string name;
  linear_config config;
  std::int64_t tokens;
};

// Every precision of each class (fp8, bf16, fake_fp8) under recipes that give tensorwise, row-wise
// and block scale modes and an unfused cast, without and with a bias (its gradient by the epilogue or
// by a column sum), the fast accumulation flags flipped, and shapes that only BF16 products take.
std::vector<grid_config> plan_grid() {
  struct named_recipe {
    const char* name;
    fp8::gemm_recipe recipe;
  };
  fp8::gemm_recipe split_x{fp8::delayed_scaling{}};
  split_x.use(gemm_operand::wgrad_input, fp8::current_scaling{});
  const named_recipe recipes[] = {
      {"delayed", fp8::gemm_recipe{fp8::delayed_scaling{}}},
      {"current_tensor", current_recipe(fp8::granularity::per_tensor)},
      {"current_row", current_recipe(fp8::granularity::per_row)},
      {"blockwise", fp8::gemm_recipe{fp8::current_scaling::blockwise()}},
      {"delayed_split_x", split_x},
  };
  const gemm_precision precisions[] = {gemm_precision::fp8, gemm_precision::bf16, gemm_precision::fake_fp8};
  std::vector<grid_config> grid;
  for (gemm_precision fprop : precisions) {
    for (gemm_precision dgrad : precisions) {
      for (gemm_precision wgrad : precisions) {
        linear_precision p{};
        p.fprop = fprop;
        p.dgrad = dgrad;
        p.wgrad = wgrad;
        const std::string classes = std::string(fp8::cuda::precision_name(fprop)) + "/" +
                                    fp8::cuda::precision_name(dgrad) + "/" + fp8::cuda::precision_name(wgrad);
        const bool any_fp8 =
            fprop == gemm_precision::fp8 || dgrad == gemm_precision::fp8 || wgrad == gemm_precision::fp8;
        for (const named_recipe& r : recipes) {
          for (int bias = 0; bias < 3; ++bias) {
            linear_config c = config_of(256, 128, 256, r.recipe, p);
            c.bias = bias != 0;
            c.fuse_bias_gradient = bias != 2;
            const std::string suffix = bias == 0 ? "" : bias == 1 ? " bias" : " bias unfused";
            grid.push_back({std::string(r.name) + " " + classes + suffix, c, 128});
            if (!any_fp8) {  // K 40, N 24, M 21: FP8 products refuse each
              c.in_features = 40;
              c.out_features = 24;
              grid.push_back({std::string(r.name) + " " + classes + suffix + " odd", c, 21});
            }
          }
        }
        linear_precision flipped = p;
        flipped.fast_accumulation_fprop = false;
        flipped.fast_accumulation_dgrad = true;
        flipped.fast_accumulation_wgrad = true;
        grid.push_back({"delayed " + classes + " fast flipped",
                        config_of(256, 128, 256, fp8::gemm_recipe{fp8::delayed_scaling{}}, flipped), 128});
      }
    }
  }
  return grid;
}

}  // namespace

TEST_CASE("a grid of configurations: every operand planned once, record_bf16_amax leaves the plan alone") {
  const std::vector<grid_config> grid = plan_grid();
  std::size_t refused = 0;
  for (const grid_config& g : grid) {
    CAPTURE(g.name);
    linear_plan plan;
    try {
      plan = fp8::cuda::make_linear_plan(g.config, g.tokens);
    } catch (const fp8::invalid_argument&) {
      ++refused;
      continue;
    }
    check_partition(plan, g.config.precision);
    // The flag only says whether the layer records the BF16 operands' amaxes: the plan is the same.
    linear_config quiet = g.config;
    quiet.record_bf16_amax = !g.config.record_bf16_amax;
    CHECK(text_of(quiet, g.tokens) == text_of(g.config, g.tokens));
  }
  // The grid is mostly plans: only recipes cuBLASLt cannot run with some class are refused.
  CHECK(refused < grid.size() / 4);
}

TEST_CASE("a backward without dX leaves dgrad's operand out in every precision, wgrad's as planned") {
  fp8::gemm_recipe split_dy{fp8::delayed_scaling{}};
  split_dy.use(gemm_operand::dgrad_grad_output, fp8::current_scaling{});
  const gemm_precision precisions[] = {gemm_precision::fp8, gemm_precision::bf16, gemm_precision::fake_fp8};
  for (const auto& recipe :
       {fp8::gemm_recipe{}, split_dy, fp8::gemm_recipe{fp8::current_scaling::blockwise()}}) {
    for (gemm_precision dgrad : precisions) {
      for (gemm_precision wgrad : precisions) {
        linear_precision p{};
        p.dgrad = dgrad;
        p.wgrad = wgrad;
        CAPTURE(fp8::cuda::precision_name(dgrad));
        CAPTURE(fp8::cuda::precision_name(wgrad));
        const linear_plan plan = fp8::cuda::make_linear_plan(config_of(256, 128, 256, recipe, p), 128);
        const fp8::cuda::cast_plan& planned = plan.cast(linear_tensor::dy);
        const fp8::cuda::cast_plan& planned_bf16 = plan.bf16_cast(linear_tensor::dy);
        // With dX: the plan's casts as they are.
        const fp8::cuda::dy_casts with = fp8::cuda::backward_dy_casts(plan, true);
        CHECK(text_of(with.cast) == text_of(planned));
        CHECK(text_of(with.bf16) == text_of(planned_bf16));
        // Without: nothing of dgrad_grad_output (no copy, so no amax or statistics of it either, nor
        // a decode), in whichever precision dgrad would run; wgrad's dYᵀ by a cast of its own.
        const fp8::cuda::dy_casts without = fp8::cuda::backward_dy_casts(plan, false);
        for (const fp8::cuda::cast_plan* c : {&without.cast, &without.bf16}) {
          CHECK_FALSE(c->row_major);
          CHECK_FALSE(c->fused);
          CHECK_FALSE(c->dequantize_row);
        }
        CHECK(without.cast.transposed == fp8::cuda::casts_to_fp8(wgrad));
        CHECK(without.bf16.transposed == !fp8::cuda::casts_to_fp8(wgrad));
        CHECK(without.cast.dequantize_transposed == (wgrad == gemm_precision::fake_fp8));
        // The rest (shape, operands, buffers) is the plan's: only which halves are made changes.
        fp8::cuda::cast_plan expected = planned;
        expected.row_major = expected.fused = expected.dequantize_row = false;
        CHECK(text_of(without.cast) == text_of(expected));
        expected = planned_bf16;
        expected.row_major = expected.fused = false;
        CHECK(text_of(without.bf16) == text_of(expected));
      }
    }
  }
  // The case that matters most: both dY operands in FP8 with one recipe, cast fused with dX; without
  // it the cast is wgrad's alone, so neither dgrad_grad_output's slot nor its scale is touched.
  const linear_plan plan = fp8::cuda::make_linear_plan(config_of(64, 32, 64), 32);
  CHECK(plan.cast(linear_tensor::dy).fused);
  const fp8::cuda::cast_plan first_layer = fp8::cuda::backward_dy_casts(plan, false).cast;
  CHECK(first_layer.transposed);
  CHECK(first_layer.transposed_operand == gemm_operand::wgrad_grad_output);
  CHECK(first_layer.transposed_buffer == linear_buffer::dy_t_fp8);
  CHECK_FALSE(first_layer.row_major);
  CHECK_FALSE(first_layer.fused);
}

TEST_CASE("a producer's amax saves a read where a current per-tensor cast or an amax-only pass takes it") {
  using fp8::cuda::given_amax_saves_read;
  const fp8::gemm_recipe delayed{fp8::delayed_scaling{}};
  const fp8::gemm_recipe per_tensor = current_recipe(fp8::granularity::per_tensor);
  for (const linear_tensor t : {linear_tensor::x, linear_tensor::dy}) {
    CAPTURE(int(t));
    // Delayed and block-scaled casts find the amax in their one read.
    CHECK_FALSE(given_amax_saves_read(config_of(256, 128, 256, delayed), t));
    CHECK_FALSE(
        given_amax_saves_read(config_of(256, 128, 256, current_recipe(fp8::granularity::tile_1x128)), t));
    CHECK_FALSE(given_amax_saves_read(
        config_of(256, 128, 256, fp8::gemm_recipe{fp8::current_scaling::blockwise()}), t));
    CHECK_FALSE(
        given_amax_saves_read(config_of(256, 128, 256, current_recipe(fp8::granularity::per_row)), t));
    // Current per tensor: the amax pass goes.
    CHECK(given_amax_saves_read(config_of(256, 128, 256, per_tensor), t));
    // All BF16: the amax-only pass goes, unless BF16 classes record nothing.
    linear_config bf16 = config_of(256, 128, 256, delayed, linear_precision::bf16());
    CHECK(given_amax_saves_read(bf16, t));
    bf16.record_bf16_amax = false;
    CHECK_FALSE(given_amax_saves_read(bf16, t));
    // One class of the tensor in BF16 beside a delayed FP8 one: the cast's amax serves both slots.
    linear_precision wgrad_bf16{};
    wgrad_bf16.wgrad = gemm_precision::bf16;
    CHECK_FALSE(given_amax_saves_read(config_of(256, 128, 256, delayed, wgrad_bf16), t));
    // ... and beside a current per-tensor one: that cast takes it.
    CHECK(given_amax_saves_read(config_of(256, 128, 256, per_tensor, wgrad_bf16), t));
  }
  // Unfused X: only wgrad's copy is current per tensor, and it takes the amax.
  fp8::gemm_recipe mixed = delayed;
  mixed.use(gemm_operand::wgrad_input, fp8::current_scaling{});
  CHECK(given_amax_saves_read(config_of(256, 128, 256, mixed), linear_tensor::x));
  CHECK_FALSE(given_amax_saves_read(config_of(256, 128, 256, mixed), linear_tensor::dy));
  // W is never given one.
  CHECK_FALSE(given_amax_saves_read(config_of(256, 128, 256, per_tensor), linear_tensor::w));
}

TEST_CASE("a producer may write X's or dY's FP8 codes itself where the layer makes one delayed fused cast") {
  using fp8::cuda::fp8_input_refusal;
  const fp8::gemm_recipe delayed{fp8::delayed_scaling{}};
  const auto refused = [](const linear_config& config, linear_tensor t, const std::string& because) {
    const char* why = fp8_input_refusal(config, t);
    REQUIRE(why != nullptr);
    CHECK_MESSAGE(contains(why, because), why);
  };
  // The default: HYBRID delayed, every class FP8: X and dY, never W.
  for (const linear_tensor t : {linear_tensor::x, linear_tensor::dy}) {
    CAPTURE(int(t));
    CHECK(fp8_input_refusal(config_of(256, 128, 256, delayed), t) == nullptr);
    // One of the tensor's classes in BF16 reads the BF16 tensor: no fused cast.
    linear_precision wgrad_bf16{};
    wgrad_bf16.wgrad = gemm_precision::bf16;
    refused(config_of(256, 128, 256, delayed, wgrad_bf16), t, "no fused cast");
    refused(config_of(256, 128, 256, delayed, linear_precision::bf16()), t, "no fused cast");
    // fake_fp8 reads a decode of the copy.
    linear_precision fake{};
    fake.fprop = fake.dgrad = fake.wgrad = gemm_precision::fake_fp8;
    refused(config_of(256, 128, 256, delayed, fake), t, "fake_fp8");
    // Current scaling: the scale comes from the tensor itself.
    refused(config_of(256, 128, 256, fp8::gemm_recipe{fp8::current_scaling{}}), t, "not delayed");
  }
  refused(config_of(256, 128, 256, delayed), linear_tensor::w, "weights_changed");
  // A bias: its gradient sums the BF16 dY (FP8 wgrad); X is still taken.
  linear_config with_bias = config_of(256, 128, 256, delayed);
  with_bias.bias = true;
  CHECK(fp8_input_refusal(with_bias, linear_tensor::x) == nullptr);
  refused(with_bias, linear_tensor::dy, "column sum");
  CHECK(std::string(fp8::cuda::tensor_name(linear_tensor::dy)) == "dY");
}
