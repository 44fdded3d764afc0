// The FP8 scaling state of a model: the library's per-operand recipe table (fp8::gemm_recipe) and
// delayed-scaling state (fp8::delayed_scaling_state, one amax history per operand of every linear
// layer), built from the command-line recipe switches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <fp8/scaling.hpp>

#include "precision.hpp"

namespace trainer {

class scaling_state;
class tensor_stats_log;

// Which operand of which linear layer a GEMM input is, and what the pass does with its amax.
struct operand_scaling {
  scaling_state* state = nullptr;
  std::size_t layer = 0;  // index into the scaling state's layers
  fp8::gemm_operand operand = fp8::gemm_operand::fprop_input;
  bool record_amax = false;
  tensor_stats_log* stats = nullptr;
  gemm_mode mode = gemm_mode::fp8;  // how the GEMM runs (for the statistics log)
};

struct recipe_switches {
  fp8_recipe recipe;
  bool power_of_two_scales = false;
  std::vector<fp8::gemm_kind> current_scaling_for;  // classes whose two operands use current scaling
};

class scaling_state {
 public:
  // One entry per linear layer, named for logs and checkpoints. Throws std::invalid_argument on a
  // recipe the library refuses (the message names the switch).
  scaling_state(const recipe_switches& switches, std::vector<std::string> layer_names);

  const fp8::gemm_recipe& recipe() const { return recipe_; }
  const fp8::operand_recipe& operand_recipe(fp8::gemm_operand operand) const { return recipe_[operand]; }
  std::size_t layer_count() const { return layer_names_.size(); }
  const std::string& layer_name(std::size_t layer) const { return layer_names_[layer]; }

  // The delayed-scaling entry of (layer, operand): six per layer, in fp8::gemm_operand order.
  std::size_t tensor_index(std::size_t layer, fp8::gemm_operand operand) const {
    return layer * fp8::gemm_operand_count + std::size_t(operand);
  }
  fp8::delayed_scaling_state& delayed() { return delayed_; }
  const fp8::delayed_scaling_state& delayed() const { return delayed_; }

  // After each training step: roll the histories and compute the next step's scales.
  void end_step() { delayed_.update(); }
  // The same after the reducer has made the step's amaxes agree over the ranks (data parallelism).
  void end_step(fp8::amax_reducer& reducer) { delayed_.update(reducer); }

  // The delayed state in the library's versioned, checksummed format (stored in checkpoints).
  std::vector<std::uint8_t> serialize() const;
  // Restores a state saved by serialize(); throws fp8::checkpoint_error saying what differs (recipe
  // settings, layer count) or what is corrupted, leaving this state unchanged.
  void deserialize(const std::vector<std::uint8_t>& bytes);

 private:
  std::vector<std::string> layer_names_;
  fp8::gemm_recipe recipe_;
  fp8::delayed_scaling_state delayed_;
};

// The library's delayed-scaling settings for these switches.
fp8::delayed_scaling delayed_config(const recipe_switches& switches);

}  // namespace trainer
