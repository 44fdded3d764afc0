// Names and checks of the quantization switches.
#include "quant_config.hpp"

#include <stdexcept>

namespace generate {

const char* to_string(weight_mode mode) {
  switch (mode) {
    case weight_mode::bf16: return "bf16";
    case weight_mode::fp8_tensor: return "fp8-tensor";
    case weight_mode::fp8_channel: return "fp8-channel";
  }
  return "?";
}

const char* to_string(activation_mode mode) {
  switch (mode) {
    case activation_mode::bf16: return "bf16";
    case activation_mode::static_scale: return "static";
    case activation_mode::dynamic: return "dynamic";
  }
  return "?";
}

const char* to_string(kv_mode mode) { return mode == kv_mode::bf16 ? "bf16" : "fp8"; }

void quant_config::validate() const {
  if (activations != activation_mode::bf16 && weights == weight_mode::bf16) {
    throw std::invalid_argument(
        std::string("--activations ") + to_string(activations) +
        " quantizes the GEMM inputs to FP8, which needs FP8 weights: pass --weights fp8-tensor "
        "or fp8-channel");
  }
  if (!(percentile > 0.0 && percentile <= 1.0)) throw std::invalid_argument("--percentile must be in (0, 1]");
}

std::string quant_config::describe() const {
  std::string text =
      std::string("W ") + to_string(weights) + " / A " + to_string(activations) + " / KV " + to_string(kv);
  if (kv == kv_mode::fp8) text += std::string(" (") + fp8::inference::to_string(kv_scales) + ")";
  if (activations == activation_mode::static_scale) {
    text += std::string(", static scales by ") + fp8::inference::to_string(method);
  }
  return text;
}

}  // namespace generate
