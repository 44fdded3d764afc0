// A LLaMA-style decoder-only transformer over bytes: embedding, L blocks of (RMSNorm, causal
// multi-head attention with RoPE, residual, RMSNorm, SwiGLU MLP, residual), final RMSNorm, LM head.
#pragma once

#include <cstdint>
#include <vector>

#include "attention.hpp"
#include "linear.hpp"
#include "model.hpp"
#include "rope.hpp"

namespace trainer {

class transformer final : public model {
 public:
  // Throws std::invalid_argument on shapes that do not fit (e.g. channels not divisible by heads).
  transformer(const model_options& options, int batch_size);

  parameter_set& parameters() override { return params_; }
  const parameter_set& parameters() const override { return params_; }
  const std::vector<linear_layer_info>& linear_layers() const override { return linears_; }
  int unit_count() const override { return layers_ + 1; }  // the blocks, then the head
  std::string unit_name(int unit) const override;
  std::vector<std::pair<std::string, std::string>> shape_description() const override;

  void init_weights(rng& generator) override;
  double forward(const pass_context& pass, const std::int32_t* inputs, const std::int32_t* targets) override;
  void backward(const pass_context& pass) override;

 private:
  // Notation: B batch, T context, C channels, H heads, D = C / H, F SwiGLU width, V vocabulary,
  // N = B * T tokens.
  struct block_activations {
    std::vector<float> ln1;        // [N, C]   RMSNorm before attention
    std::vector<float> ln1_rstd;   // [N]
    std::vector<float> qkv;        // [N, 3C]  QKV projection
    std::vector<float> qkvr;       // [3, B, H, T, D] rotated q, k and v per head
    std::vector<float> att;        // [B, H, T, T] attention probabilities
    std::vector<float> atty;       // [N, C]   attention output, heads merged
    std::vector<float> attproj;    // [N, C]   output projection
    std::vector<float> residual2;  // [N, C]   input + attention
    std::vector<float> ln2;        // [N, C]   RMSNorm before the MLP
    std::vector<float> ln2_rstd;   // [N]
    std::vector<float> gate_up;    // [N, 2F]  gate and up projections
    std::vector<float> swiglu;     // [N, F]
    std::vector<float> mlp_out;    // [N, C]   down projection
    std::vector<float> residual3;  // [N, C]   block output
  };
  // Offsets of one block's parameters in the parameter set.
  struct block_parameters {
    std::size_t attn_norm, wqkv, wo, mlp_norm, w_gate_up, w_down;
  };

  const float* compute(std::size_t tensor) const { return params_.compute.data() + params_.offset(tensor); }
  float* grad(std::size_t tensor) { return params_.grad.data() + params_.offset(tensor); }
  linear_site site(std::size_t linear) const { return {linears_[linear].unit, linear}; }

  int batch_, context_, channels_, layers_, heads_, hidden_, vocab_;
  parameter_set params_;
  std::size_t wte_, final_norm_, lm_head_;
  std::vector<block_parameters> blocks_;
  std::vector<linear_layer_info> linears_;  // per block: qkv, wo, gate_up, down; then the head
  rope_table rope_;

  std::vector<std::int32_t> inputs_, targets_;  // [N] of the last forward pass
  std::vector<float> encoded_;                  // [N, C] embeddings (input of block 0)
  std::vector<block_activations> acts_;
  std::vector<float> lnf_, lnf_rstd_;           // [N, C], [N]
  std::vector<float> logits_, probs_, losses_;  // [N, V], [N, V], [N]
  // Backward scratch.
  std::vector<float> dresidual_;  // [N, C]  gradient of the residual stream
  std::vector<float> dbuffer_c_, dbuffer_3c_, dbuffer_f_, dbuffer_2f_, dlogits_;
};

}  // namespace trainer
