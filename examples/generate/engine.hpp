// The inference forward pass of the trainer's transformer, one sequence at a time, with a KV cache:
// forward() runs n new tokens at positions length() .. length() + n - 1 (a prompt, or one decoded
// token) and appends their keys and values. In BF16 mode it repeats transformer.cpp's forward
// operation for operation (BF16 weights and stored activations, FP32 accumulation, the same
// RMSNorm, RoPE, softmax and SwiGLU functions), so its logits are the trainer's up to the order of
// float additions inside the GEMMs.
//
// Quantized modes (the embedding, the norms and the LM head stay BF16, as in the trainer's FP8 runs):
//  - weights fp8-tensor / fp8-channel: E4M3 codes with one scale per tensor / per output channel;
//  - activations static / dynamic: the input of every linear layer cast to E4M3 with its calibrated
//    scale / with one scale per token; the GEMM multiplies the FP8 values exactly, accumulates in
//    FP32 and applies both scales in the epilogue (what an FP8 tensor core with row-wise scales does);
//  - KV cache fp8: keys (after RoPE) and values stored in E4M3 with calibrated scales.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fp8/inference.hpp>

#include "checkpoint_model.hpp"
#include "quant_config.hpp"
#include "rope.hpp"

namespace generate {

// Where the statistics of a calibration run go: one histogram per linear layer input (4 per block:
// qkv, wo, gate_up, down) and the amax of keys and values per (layer, head).
struct calibration_observers {
  std::vector<fp8::inference::histogram_observer> linear_inputs;
  std::vector<fp8::inference::max_observer> keys, values;
};

// Static scales from calibration: per linear input, and per (layer, head) for keys and values.
struct calibration_scales {
  std::vector<float> linear_input;  // [4 * layers]
  std::vector<float> keys, values;  // [layers * heads]
};

calibration_scales scales_from(const calibration_observers& observed, const quant_config& config);

// One linear layer as the engine runs it.
struct prepared_linear {
  std::string name;
  int rows = 0, cols = 0;                                     // W: [rows (out), cols (in)]
  std::vector<float> weight;                                  // BF16 values, or the unscaled FP8 values
  std::optional<fp8::inference::quantized_weight> quantized;  // FP8 weight modes
  float input_scale = 1.0f;                                   // static activation scale
};

class engine {
 public:
  // `scales` is required when config.needs_calibration().
  engine(const checkpoint_model& model, const quant_config& config,
         const calibration_scales* scales = nullptr);

  const model_shape& shape() const { return shape_; }
  const quant_config& config() const { return config_; }
  int length() const { return length_; }
  void reset();

  // tokens [n] -> logits [n, V]. Throws std::invalid_argument if length() + n exceeds the context or
  // a token is outside [0, V).
  void forward(const std::int32_t* tokens, int n, float* logits);

  // While set, forward() feeds the observers (use with a BF16 engine).
  void observe(calibration_observers* observers);

  const std::vector<prepared_linear>& linears() const { return linears_; }  // 4 per block
  const prepared_linear& head() const { return head_; }
  const std::vector<float>& embedding() const { return wte_; }  // BF16 values [V, C]
  const std::vector<float>& norm(int layer, bool mlp) const;    // FP32 gains [C]
  const std::vector<float>& final_norm() const { return final_norm_; }
  const std::vector<float>& kv_scales(bool values) const;  // [layers * heads]; empty in bf16 mode

  // Memory a server holds: the linear weights (with scales) of blocks and head, everything else
  // (embedding, norms), and the KV cache for one full context.
  std::size_t linear_weight_bytes() const;
  std::size_t other_weight_bytes() const;
  std::size_t kv_cache_bytes() const;
  std::uint64_t kv_saturated_appends() const { return fp8_cache_ ? fp8_cache_->saturated_appends() : 0; }

 private:
  void linear(const prepared_linear& layer, int linear_index, const float* x, int n, float* y);
  void attention(int layer, const float* qkv, int n, float* out);

  model_shape shape_;
  quant_config config_;
  trainer::rope_table rope_;
  std::vector<float> wte_;
  std::vector<std::vector<float>> attn_norms_, mlp_norms_;
  std::vector<float> final_norm_;
  std::vector<prepared_linear> linears_;
  prepared_linear head_;
  std::vector<float> k_scales_, v_scales_;

  // KV cache: BF16 values in floats [layers, heads, context, D], or FP8.
  std::vector<float> bf16_keys_, bf16_values_;
  std::unique_ptr<fp8::inference::fp8_kv_cache> fp8_cache_;
  int length_ = 0;
  calibration_observers* observers_ = nullptr;

  // Scratch.
  std::vector<float> residual_, ln_, rstd_, qkv_, atty_, proj_, gate_up_, swiglu_, xq_;
  std::vector<std::uint8_t> codes_;
  std::vector<float> row_scales_, lnf_;
};

}  // namespace generate
