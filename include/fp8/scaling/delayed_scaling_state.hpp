// The running state of delayed scaling for a set of tensors: one amax history, scale and scale_inv
// per tensor, updated once per step (amax reduction, window, roll, new scales) as Transformer Engine does.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "amax_history.hpp"
#include "amax_reducer.hpp"
#include "fp8_format.hpp"
#include "gemm_operand.hpp"
#include "recipe.hpp"
#include "scale.hpp"

namespace fp8 {

// Usage, per step:
//   fp8::delayed_scaling_state state{fp8::delayed_scaling{}};
//   const std::size_t x = state.add_tensor(fp8::gemm_operand::fprop_input);     // E4M3 under HYBRID
//   const std::size_t dy = state.add_tensor(fp8::gemm_operand::dgrad_grad_output);  // E5M2
//   ... each step:
//   float amax = fp8::quantize(x_data, n, state.format(x), state.scale(x), x_fp8);  // cast + amax
//   state.record(x, amax);               // this step's amax
//   ... GEMM with state.scale_inv(x) ...
//   state.update(reducer);               // after the step: the next step's scales
// Scales start at 1. A NaN or Inf amax in the window keeps the tensor's previous scale (see
// docs/scaling.md for what that means over a long window).
class delayed_scaling_state {
 public:
  struct tensor {
    fp8_format format;
    amax_history history;
    scale_pair scales;
  };

  explicit delayed_scaling_state(const delayed_scaling& config = {}) : config_(config) { config.validate(); }

  const delayed_scaling& config() const noexcept { return config_; }
  std::size_t size() const noexcept { return tensors_.size(); }

  // Adds a tensor and returns its index; its scale starts at 1 and its history at zeros.
  std::size_t add_tensor(fp8_format format) {
    if (!is_valid(format))
      throw invalid_argument("fp8::delayed_scaling_state::add_tensor: unknown fp8_format value");
    tensors_.push_back({format, amax_history(config_.history_length), scale_pair{}});
    return tensors_.size() - 1;
  }
  // The format follows the recipe's format mix (E5M2 gradients under HYBRID).
  std::size_t add_tensor(gemm_operand operand) { return add_tensor(operand_format(config_.mix, operand)); }

  fp8_format format(std::size_t i) const { return at(i).format; }
  float scale(std::size_t i) const { return at(i).scales.scale; }
  float scale_inv(std::size_t i) const { return at(i).scales.scale_inv; }
  const amax_history& history(std::size_t i) const { return at(i).history; }
  const tensor& operator[](std::size_t i) const { return at(i); }

  // Records an amax of tensor i for the current step (several casts in one step keep the largest).
  void record(std::size_t i, float amax) { at_mutable(i).history.record(amax); }

  // Ends the step: (1) the current amaxes of all tensors go through reducer.reduce_max in one call;
  // (2) each tensor's amax is taken from its window (config().algorithm); (3) the history rolls;
  // (4) scale = scale_from_amax(amax, format, margin, power_of_two, previous scale).
  // If the reducer throws, nothing has changed.
  void update(amax_reducer& reducer) {
    std::vector<float> current(tensors_.size());
    for (std::size_t i = 0; i < tensors_.size(); ++i) current[i] = tensors_[i].history.current();
    reducer.reduce_max(current.data(), current.size());
    // Validate everything the reducer returned before changing anything.
    for (std::size_t i = 0; i < current.size(); ++i) {
      if (current[i] < 0.0f) {
        throw invalid_argument(
            "fp8::delayed_scaling_state::update: the amax reducer returned a negative amax (" +
            std::to_string(current[i]) + ") for tensor " + std::to_string(i));
      }
    }
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      tensor& t = tensors_[i];
      t.history.set_current(current[i]);
      const float amax = t.history.window_amax(config_.algorithm);
      t.history.roll();
      const float scale = detail::scale_from_amax_unchecked(amax, max_finite(t.format), config_.margin,
                                                            config_.power_of_two_scales, t.scales.scale);
      t.scales = {scale, 1.0f / scale};
    }
  }
  void update() {
    identity_amax_reducer identity;
    update(identity);
  }

  // All tensors, in index order (what checkpoints store).
  const std::vector<tensor>& tensors() const noexcept { return tensors_; }

  // Builds a state from stored parts; throws fp8::invalid_argument naming the first inconsistency.
  static delayed_scaling_state from_parts(const delayed_scaling& config, std::vector<tensor> tensors) {
    delayed_scaling_state state(config);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const tensor& t = tensors[i];
      const std::string where = "fp8::delayed_scaling_state: tensor " + std::to_string(i) + ": ";
      if (!is_valid(t.format)) throw invalid_argument(where + "unknown fp8_format value");
      if (t.history.length() != config.history_length) {
        throw invalid_argument(where + "history length " + std::to_string(t.history.length()) +
                               " differs from the configured " + std::to_string(config.history_length));
      }
      detail::check_scale(t.scales.scale, (where + "scale").c_str());
      detail::check_scale(t.scales.scale_inv, (where + "scale_inv").c_str());
    }
    state.tensors_ = std::move(tensors);
    return state;
  }

 private:
  const tensor& at(std::size_t i) const {
    if (i >= tensors_.size()) throw_out_of_range(i);
    return tensors_[i];
  }
  tensor& at_mutable(std::size_t i) {
    if (i >= tensors_.size()) throw_out_of_range(i);
    return tensors_[i];
  }
  [[noreturn]] void throw_out_of_range(std::size_t i) const {
    throw invalid_argument("fp8::delayed_scaling_state: tensor index " + std::to_string(i) +
                           " out of range (" + std::to_string(tensors_.size()) + " tensors)");
  }

  delayed_scaling config_;
  std::vector<tensor> tensors_;
};

}  // namespace fp8
