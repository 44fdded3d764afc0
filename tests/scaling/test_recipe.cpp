// Recipes as values: formats per GEMM operand under HYBRID and E4M3, Transformer Engine's defaults,
// the blockwise and MX presets, per-operand overrides, and validation messages.
#include <doctest/doctest.h>

#include <fp8/scaling.hpp>

namespace {
using fp8::fp8_format;
using fp8::gemm_operand;
using fp8::granularity;
constexpr gemm_operand all_operands[] = {gemm_operand::fprop_input,       gemm_operand::fprop_weight,
                                         gemm_operand::dgrad_grad_output, gemm_operand::dgrad_weight,
                                         gemm_operand::wgrad_input,       gemm_operand::wgrad_grad_output};
}  // namespace

TEST_CASE("HYBRID gives E5M2 to the gradients and E4M3 to everything else; E4M3 mix gives E4M3 everywhere") {
  for (const gemm_operand op : all_operands) {
    CAPTURE(fp8::operand_name(op));
    CHECK(fp8::operand_format(fp8::format_mix::hybrid, op) ==
          (fp8::is_gradient(op) ? fp8_format::e5m2 : fp8_format::e4m3));
    CHECK(fp8::operand_format(fp8::format_mix::e4m3, op) == fp8_format::e4m3);
  }
  CHECK(fp8::is_gradient(gemm_operand::dgrad_grad_output));
  CHECK(fp8::is_gradient(gemm_operand::wgrad_grad_output));
  CHECK_FALSE(fp8::is_gradient(gemm_operand::wgrad_input));
  CHECK(fp8::is_weight(gemm_operand::dgrad_weight));
  CHECK(fp8::gemm_of(gemm_operand::dgrad_weight) == fp8::gemm_kind::dgrad);
  CHECK(fp8::gemm_of(gemm_operand::wgrad_input) == fp8::gemm_kind::wgrad);
  CHECK(fp8::gemm_of(gemm_operand::fprop_weight) == fp8::gemm_kind::fprop);
}

TEST_CASE("delayed_scaling defaults are Transformer Engine's DelayedScaling defaults") {
  const fp8::delayed_scaling config;
  CHECK(config.mix == fp8::format_mix::hybrid);
  CHECK(config.margin == 0);
  CHECK(config.history_length == 1024);
  CHECK(config.algorithm == fp8::amax_algorithm::max);
  CHECK_FALSE(config.power_of_two_scales);
  CHECK_NOTHROW(config.validate());
}

TEST_CASE("invalid configs are refused, naming the field") {
  fp8::delayed_scaling delayed;
  delayed.margin = -2;
  CHECK_THROWS_WITH_AS(delayed.validate(), doctest::Contains("margin"), fp8::invalid_argument);
  delayed = {};
  delayed.history_length = 0;
  CHECK_THROWS_WITH_AS(delayed.validate(), doctest::Contains("history_length"), fp8::invalid_argument);
  delayed = {};
  delayed.algorithm = fp8::amax_algorithm(7);
  CHECK_THROWS_WITH_AS(delayed.validate(), doctest::Contains("amax_algorithm"), fp8::invalid_argument);
  delayed = {};
  delayed.mix = fp8::format_mix(9);
  CHECK_THROWS_WITH_AS(delayed.validate(), doctest::Contains("format_mix"), fp8::invalid_argument);
  fp8::current_scaling current;
  current.weight_granularity = granularity(11);
  CHECK_THROWS_WITH_AS(current.validate(), doctest::Contains("granularity"), fp8::invalid_argument);
  CHECK_THROWS_AS(fp8::gemm_recipe{delayed}, fp8::invalid_argument);
}

TEST_CASE("blockwise and MX presets") {
  const fp8::current_scaling blockwise = fp8::current_scaling::blockwise();
  CHECK(blockwise.for_operand(gemm_operand::fprop_input).granularity == granularity::tile_1x128);
  CHECK(blockwise.for_operand(gemm_operand::fprop_weight).granularity == granularity::block_128x128);
  CHECK(blockwise.for_operand(gemm_operand::dgrad_weight).granularity == granularity::block_128x128);
  CHECK(blockwise.for_operand(gemm_operand::wgrad_grad_output).granularity == granularity::tile_1x128);
  CHECK(blockwise.for_operand(gemm_operand::wgrad_grad_output).format == fp8_format::e5m2);
  CHECK(blockwise.power_of_two_scales);
  const fp8::current_scaling mx = fp8::current_scaling::mx();
  for (const gemm_operand op : all_operands) {
    CHECK(mx.for_operand(op).granularity == granularity::mx_1x32);
    CHECK(mx.for_operand(op).format == fp8_format::e4m3);
  }
}

TEST_CASE("gemm_recipe: delayed everywhere, then current scaling for dgrad's gradient only") {
  fp8::gemm_recipe recipe{fp8::delayed_scaling{}};
  for (const gemm_operand op : all_operands) {
    CHECK(recipe[op].mode == fp8::scaling_mode::delayed);
    CHECK(recipe[op].quant.granularity == granularity::per_tensor);
  }
  recipe.use(gemm_operand::dgrad_grad_output, fp8::current_scaling{});
  CHECK(recipe[gemm_operand::dgrad_grad_output].mode == fp8::scaling_mode::current);
  CHECK(recipe[gemm_operand::dgrad_grad_output].quant.format == fp8_format::e5m2);
  CHECK(recipe[gemm_operand::wgrad_grad_output].mode == fp8::scaling_mode::delayed);
  CHECK(recipe.delayed().history_length == 1024);

  fp8::gemm_recipe blockwise{fp8::current_scaling::blockwise()};
  CHECK(blockwise[gemm_operand::fprop_weight].quant.granularity == granularity::block_128x128);
  CHECK_THROWS_WITH_AS(
      blockwise.use(gemm_operand::fprop_input,
                    fp8::operand_recipe{fp8::scaling_mode::delayed,
                                        fp8::quantization{fp8_format::e4m3, granularity::tile_1x128}}),
      doctest::Contains("delayed scaling is per tensor"), fp8::invalid_argument);
  CHECK(blockwise[gemm_operand::fprop_input].quant.granularity == granularity::tile_1x128);  // unchanged
}
