// Recipe configurations as small value types: delayed scaling (Transformer Engine's DelayedScaling),
// current scaling at any granularity, and a per-GEMM-operand table saying which one each operand uses.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "../error.hpp"
#include "amax_history.hpp"
#include "fp8_format.hpp"
#include "gemm_operand.hpp"
#include "granularity.hpp"
#include "scale.hpp"

namespace fp8 {

// How one tensor is quantized: its format, how many elements share a scale, and how scales are made
// from amaxes (margin, power-of-two rounding). What quantize() and dequantize() take.
struct quantization {
  fp8_format format = fp8_format::e4m3;
  fp8::granularity granularity = fp8::granularity::per_tensor;
  int margin = 0;                    // scale = fp8_max / amax / 2^margin
  bool power_of_two_scales = false;  // round scales down to powers of two (MX scales always are)

  // Throws fp8::invalid_argument naming the bad field.
  void validate() const {
    if (!is_valid(format)) throw invalid_argument("fp8::quantization: unknown fp8_format value");
    if (!is_valid(granularity)) throw invalid_argument("fp8::quantization: unknown granularity value");
    detail::check_margin(margin);
  }
};

namespace detail {
// q for a call whose scale buffer is E8M0 codes (`mx_scales`, the MX overloads) or floats (the
// others), host and device quantizers alike: throws fp8::invalid_argument prefixed with `function`
// on a bad field, on a granularity that takes the other kind of buffer, or on a margin under MX.
inline void check_quantization(const quantization& q, const char* function, bool mx_scales) {
  try {
    q.validate();
  } catch (const invalid_argument& e) { throw invalid_argument(std::string(function) + ": " + e.what()); }
  const bool is_mx = q.granularity == granularity::mx_1x32;
  if (is_mx && !mx_scales) {
    throw invalid_argument(std::string(function) +
                           ": mx_1x32 scales are E8M0 codes; pass a std::uint8_t* scale "
                           "buffer (the MX overload) instead of float*");
  }
  if (!is_mx && mx_scales) {
    throw invalid_argument(std::string(function) +
                           ": an E8M0 (std::uint8_t*) scale buffer is only for mx_1x32; " +
                           granularity_name(q.granularity) + " takes float* scale_inv");
  }
  if (is_mx && q.margin != 0) {
    throw invalid_argument(std::string(function) +
                           ": mx_1x32 follows the OCP MX rule, which has no margin; "
                           "got margin " +
                           std::to_string(q.margin));
  }
}
}  // namespace detail

// Delayed scaling, Transformer Engine's DelayedScaling with its defaults: each cast uses a scale
// computed from the amax history before the step and records the step's amax; after the step the
// history rolls and scales are recomputed (fp8::delayed_scaling_state does the bookkeeping). Per tensor.
struct delayed_scaling {
  format_mix mix = format_mix::hybrid;
  int margin = 0;
  std::size_t history_length = amax_history::default_length;
  amax_algorithm algorithm = amax_algorithm::max;
  bool power_of_two_scales = false;

  void validate() const {
    if (!is_valid(mix)) throw invalid_argument("fp8::delayed_scaling: unknown format_mix value");
    detail::check_margin(margin);
    if (history_length == 0)
      throw invalid_argument("fp8::delayed_scaling: history_length must be at least 1");
    if (!is_valid(algorithm)) throw invalid_argument("fp8::delayed_scaling: unknown amax_algorithm value");
  }

  quantization for_operand(gemm_operand operand) const noexcept {
    return {operand_format(mix, operand), granularity::per_tensor, margin, power_of_two_scales};
  }

  friend bool operator==(const delayed_scaling& a, const delayed_scaling& b) noexcept {
    return a.mix == b.mix && a.margin == b.margin && a.history_length == b.history_length &&
           a.algorithm == b.algorithm && a.power_of_two_scales == b.power_of_two_scales;
  }
  friend bool operator!=(const delayed_scaling& a, const delayed_scaling& b) noexcept { return !(a == b); }
};

// Current (just-in-time) scaling: the amax of the tensor (or of each row, tile or block) itself, then
// the cast with the scale made from it. Weights may use their own granularity (128x128 blocks in the
// DeepSeek-V3 / Transformer Engine Float8BlockScaling recipe, 1x128 tiles for everything else).
struct current_scaling {
  format_mix mix = format_mix::hybrid;
  fp8::granularity granularity = fp8::granularity::per_tensor;         // inputs and gradients
  fp8::granularity weight_granularity = fp8::granularity::per_tensor;  // weights
  int margin = 0;
  bool power_of_two_scales = false;

  // Float8BlockScaling: 1x128 tiles for activations and gradients, 128x128 blocks for weights,
  // power-of-two scales.
  static current_scaling blockwise(format_mix mix = format_mix::hybrid) noexcept {
    return {mix, fp8::granularity::tile_1x128, fp8::granularity::block_128x128, 0, true};
  }
  // MXFP8: 1x32 blocks with E8M0 scales everywhere, E4M3 elements.
  static current_scaling mx(format_mix mix = format_mix::e4m3) noexcept {
    return {mix, fp8::granularity::mx_1x32, fp8::granularity::mx_1x32, 0, true};
  }

  void validate() const {
    if (!is_valid(mix)) throw invalid_argument("fp8::current_scaling: unknown format_mix value");
    if (!is_valid(granularity) || !is_valid(weight_granularity)) {
      throw invalid_argument("fp8::current_scaling: unknown granularity value");
    }
    detail::check_margin(margin);
  }

  quantization for_operand(gemm_operand operand) const noexcept {
    return {operand_format(mix, operand), is_weight(operand) ? weight_granularity : granularity, margin,
            power_of_two_scales};
  }
};

enum class scaling_mode : std::uint8_t {
  delayed = 0,  // scale from the amax history (per tensor)
  current = 1,  // scale from the tensor's own amax
};

// What one GEMM operand uses.
struct operand_recipe {
  scaling_mode mode = scaling_mode::delayed;
  quantization quant;
};

// Which format and recipe each of the six operands of a layer's three GEMMs uses, e.g. HYBRID delayed
// scaling everywhere except current scaling for dgrad's gradient:
//   fp8::gemm_recipe recipe{fp8::delayed_scaling{}};
//   recipe.use(fp8::gemm_operand::dgrad_grad_output, fp8::current_scaling{});
// The history length and amax algorithm of the delayed operands come from delayed(): the config the
// recipe was built from, or the last one passed to use(operand, delayed_scaling).
class gemm_recipe {
 public:
  explicit gemm_recipe(const delayed_scaling& config = {}) : delayed_(config) {
    config.validate();
    for (std::size_t i = 0; i < gemm_operand_count; ++i) {
      operands_[i] = {scaling_mode::delayed, config.for_operand(gemm_operand(i))};
    }
  }
  explicit gemm_recipe(const current_scaling& config) {
    config.validate();
    for (std::size_t i = 0; i < gemm_operand_count; ++i) {
      operands_[i] = {scaling_mode::current, config.for_operand(gemm_operand(i))};
    }
  }

  const operand_recipe& operator[](gemm_operand operand) const noexcept {
    return operands_[std::size_t(operand)];
  }

  // Switches one operand to delayed scaling (per tensor; `config` becomes delayed()) or to current scaling.
  gemm_recipe& use(gemm_operand operand, const delayed_scaling& config) {
    config.validate();
    operands_[std::size_t(operand)] = {scaling_mode::delayed, config.for_operand(operand)};
    delayed_ = config;
    return *this;
  }
  gemm_recipe& use(gemm_operand operand, const current_scaling& config) {
    config.validate();
    operands_[std::size_t(operand)] = {scaling_mode::current, config.for_operand(operand)};
    return *this;
  }
  // Any explicit choice; delayed scaling must be per tensor.
  gemm_recipe& use(gemm_operand operand, const operand_recipe& recipe) {
    recipe.quant.validate();
    if (recipe.mode == scaling_mode::delayed && recipe.quant.granularity != granularity::per_tensor) {
      throw invalid_argument(std::string("fp8::gemm_recipe: delayed scaling is per tensor; ") +
                             operand_name(operand) + " asked for " +
                             granularity_name(recipe.quant.granularity));
    }
    operands_[std::size_t(operand)] = recipe;
    return *this;
  }

  const delayed_scaling& delayed() const noexcept { return delayed_; }

 private:
  std::array<operand_recipe, gemm_operand_count> operands_{};
  delayed_scaling delayed_;
};

}  // namespace fp8
