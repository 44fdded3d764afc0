// What is quantized and how: the three switches of fp8_generate and the calibration rule.
#pragma once

#include <string>

#include <fp8/inference.hpp>

namespace generate {

enum class weight_mode { bf16, fp8_tensor, fp8_channel };
enum class activation_mode { bf16, static_scale, dynamic };
enum class kv_mode { bf16, fp8 };

struct quant_config {
  weight_mode weights = weight_mode::bf16;
  activation_mode activations = activation_mode::bf16;
  kv_mode kv = kv_mode::bf16;
  fp8::inference::kv_scale_granularity kv_scales = fp8::inference::kv_scale_granularity::per_head;
  fp8::inference::calibration_method method = fp8::inference::calibration_method::max;
  double percentile = 0.9999;  // read by the percentile method

  bool needs_calibration() const {
    return activations == activation_mode::static_scale || kv == kv_mode::fp8;
  }
  // Throws std::invalid_argument on combinations that make no sense (FP8 activations need FP8 weights).
  void validate() const;
  // e.g. "W fp8-channel / A dynamic / KV fp8".
  std::string describe() const;
};

const char* to_string(weight_mode mode);      // "bf16", "fp8-tensor", "fp8-channel"
const char* to_string(activation_mode mode);  // "bf16", "static", "dynamic"
const char* to_string(kv_mode mode);          // "bf16", "fp8"

}  // namespace generate
