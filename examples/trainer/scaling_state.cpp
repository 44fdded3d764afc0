// Making the library's recipe types from the trainer's recipe switches.
#include "scaling_state.hpp"

#include <sstream>
#include <stdexcept>
#include <utility>

namespace trainer {

namespace {

// Current scaling at the chosen granularity: per tensor, per row, DeepSeek-V3 blocks (the library's
// Float8BlockScaling preset, which uses power-of-two scales) or MX.
fp8::current_scaling current_config(const recipe_switches& s) {
  const fp8::format_mix mix = s.recipe.formats;
  const fp8::granularity grain = s.recipe.scale_granularity;
  fp8::current_scaling config{mix, grain, grain, 0, s.power_of_two_scales};  // per_tensor, per_row
  if (grain == fp8::granularity::tile_1x128) config = fp8::current_scaling::blockwise(mix);
  if (grain == fp8::granularity::mx_1x32) config = fp8::current_scaling::mx(mix);
  config.margin = s.recipe.margin;
  return config;
}

// The two operands of a GEMM class.
std::pair<fp8::gemm_operand, fp8::gemm_operand> operands_of(fp8::gemm_kind which) {
  switch (which) {
    case fp8::gemm_kind::fprop: return {fp8::gemm_operand::fprop_input, fp8::gemm_operand::fprop_weight};
    case fp8::gemm_kind::dgrad:
      return {fp8::gemm_operand::dgrad_grad_output, fp8::gemm_operand::dgrad_weight};
    case fp8::gemm_kind::wgrad: break;
  }
  return {fp8::gemm_operand::wgrad_grad_output, fp8::gemm_operand::wgrad_input};
}

fp8::gemm_recipe make_recipe(const recipe_switches& s) {
  try {
    if (s.recipe.recipe == fp8::scaling_mode::current) return fp8::gemm_recipe(current_config(s));
    fp8::gemm_recipe recipe(delayed_config(s));
    for (fp8::gemm_kind which : s.current_scaling_for) {
      const auto [a, b] = operands_of(which);
      recipe.use(a, current_config(s));
      recipe.use(b, current_config(s));
    }
    return recipe;
  } catch (const fp8::invalid_argument& e) {
    throw std::invalid_argument(std::string("the FP8 recipe switches are not valid: ") + e.what() +
                                " (see --help)");
  }
}

}  // namespace

fp8::delayed_scaling delayed_config(const recipe_switches& s) {
  fp8::delayed_scaling config;
  config.mix = s.recipe.formats;
  config.margin = s.recipe.margin;
  config.history_length = std::size_t(s.recipe.amax_history_length);
  config.algorithm = s.recipe.algorithm;
  config.power_of_two_scales = s.power_of_two_scales;
  return config;
}

scaling_state::scaling_state(const recipe_switches& switches, std::vector<std::string> layer_names)
    : layer_names_(std::move(layer_names)),
      recipe_(make_recipe(switches)),
      delayed_(delayed_config(switches)) {
  for (std::size_t layer = 0; layer < layer_names_.size(); ++layer) {
    for (std::size_t operand = 0; operand < fp8::gemm_operand_count; ++operand) {
      delayed_.add_tensor(fp8::gemm_operand(operand));
    }
  }
}

std::vector<std::uint8_t> scaling_state::serialize() const {
  std::ostringstream out(std::ios::binary);
  fp8::save_scaling_state(out, delayed_);
  const std::string bytes = out.str();
  return std::vector<std::uint8_t>(bytes.begin(), bytes.end());
}

void scaling_state::deserialize(const std::vector<std::uint8_t>& bytes) {
  std::istringstream in(std::string(bytes.begin(), bytes.end()), std::ios::binary);
  fp8::load_scaling_state(in, delayed_);  // leaves delayed_ unchanged when it throws
}

}  // namespace trainer
