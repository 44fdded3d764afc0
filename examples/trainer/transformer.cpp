// The transformer's parameters, forward pass and backward pass, layer by layer.
#include "transformer.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "cross_entropy.hpp"
#include "embedding.hpp"
#include "linear.hpp"
#include "rmsnorm.hpp"
#include "swiglu.hpp"

namespace trainer {

namespace {

constexpr float init_std = 0.02f;  // GPT-2's initialisation

// out[i] = a[i] + b[i]: a residual connection, stored in the activation precision.
void residual_forward(float* out, const float* a, const float* b, std::size_t count, storage stored) {
  for (std::size_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
  store(stored, out, count);
}

void check_positive(int value, const char* name) {
  if (value <= 0)
    throw std::invalid_argument(std::string(name) + " must be positive; got " + std::to_string(value));
}

// The parameter table, after checking that the shape options make sense.
std::vector<tensor_spec> transformer_specs(const model_options& options, int batch_size) {
  check_positive(batch_size, "--batch");
  check_positive(options.context, "--context");
  check_positive(options.channels, "--d-model");
  check_positive(options.layers, "--layers");
  check_positive(options.heads, "--heads");
  check_positive(options.hidden, "--hidden");
  const int vocab = options.vocab, channels = options.channels, hidden = options.hidden;
  std::vector<tensor_spec> specs;
  specs.push_back({"wte", {vocab, channels}, true});
  for (int l = 0; l < options.layers; ++l) {
    const std::string prefix = "blocks." + std::to_string(l) + ".";
    specs.push_back({prefix + "attn_norm", {channels}, false});
    specs.push_back({prefix + "wqkv", {3 * channels, channels}, true});
    specs.push_back({prefix + "wo", {channels, channels}, true});
    specs.push_back({prefix + "mlp_norm", {channels}, false});
    specs.push_back({prefix + "w_gate_up", {2 * hidden, channels}, true});
    specs.push_back({prefix + "w_down", {channels, hidden}, true});
  }
  specs.push_back({"final_norm", {channels}, false});
  specs.push_back({"lm_head", {vocab, channels}, true});
  return specs;
}

}  // namespace

transformer::transformer(const model_options& options, int batch_size)
    : batch_(batch_size),
      context_(options.context),
      channels_(options.channels),
      layers_(options.layers),
      heads_(options.heads),
      hidden_(options.hidden),
      vocab_(options.vocab),
      params_(transformer_specs(options, batch_size)) {
  if (channels_ % heads_ != 0 || (channels_ / heads_) % 2 != 0) {
    throw std::invalid_argument("--d-model " + std::to_string(channels_) + " must be a multiple of --heads " +
                                std::to_string(heads_) + " with an even head dimension (RoPE rotates pairs)");
  }
  wte_ = params_.index_of("wte");
  final_norm_ = params_.index_of("final_norm");
  lm_head_ = params_.index_of("lm_head");
  for (int l = 0; l < layers_; ++l) {
    const std::string prefix = "blocks." + std::to_string(l) + ".";
    blocks_.push_back({params_.index_of(prefix + "attn_norm"), params_.index_of(prefix + "wqkv"),
                       params_.index_of(prefix + "wo"), params_.index_of(prefix + "mlp_norm"),
                       params_.index_of(prefix + "w_gate_up"), params_.index_of(prefix + "w_down")});
    for (const char* name : {"wqkv", "wo", "w_gate_up", "w_down"}) linears_.push_back({prefix + name, l});
  }
  linears_.push_back({"lm_head", layers_});
  rope_ = make_rope_table(context_, channels_ / heads_);

  const std::size_t N = std::size_t(batch_) * std::size_t(context_);
  const std::size_t C = std::size_t(channels_), F = std::size_t(hidden_), V = std::size_t(vocab_);
  const std::size_t T = std::size_t(context_), BH = std::size_t(batch_) * std::size_t(heads_);
  inputs_.resize(N);
  targets_.resize(N);
  encoded_.resize(N * C);
  acts_.resize(std::size_t(layers_));
  for (block_activations& a : acts_) {
    a.ln1.resize(N * C);
    a.ln1_rstd.resize(N);
    a.qkv.resize(N * 3 * C);
    a.qkvr.resize(N * 3 * C);
    a.att.resize(BH * T * T);
    a.atty.resize(N * C);
    a.attproj.resize(N * C);
    a.residual2.resize(N * C);
    a.ln2.resize(N * C);
    a.ln2_rstd.resize(N);
    a.gate_up.resize(N * 2 * F);
    a.swiglu.resize(N * F);
    a.mlp_out.resize(N * C);
    a.residual3.resize(N * C);
  }
  lnf_.resize(N * C);
  lnf_rstd_.resize(N);
  logits_.resize(N * V);
  probs_.resize(N * V);
  losses_.resize(N);
  dresidual_.resize(N * C);
  dbuffer_c_.resize(N * C);
  dbuffer_3c_.resize(N * 3 * C);
  dbuffer_f_.resize(N * F);
  dbuffer_2f_.resize(N * 2 * F);
  dlogits_.resize(N * V);
}

std::string transformer::unit_name(int unit) const {
  return unit == layers_ ? std::string("head") : "block " + std::to_string(unit);
}

std::vector<std::pair<std::string, std::string>> transformer::shape_description() const {
  return {{"model", "transformer"},
          {"vocab", std::to_string(vocab_)},
          {"context", std::to_string(context_)},
          {"d_model", std::to_string(channels_)},
          {"layers", std::to_string(layers_)},
          {"heads", std::to_string(heads_)},
          {"hidden", std::to_string(hidden_)}};
}

void transformer::init_weights(rng& generator) {
  // Normal(0, 0.02) matrices, with the projections into the residual stream (wo, w_down) scaled by
  // 1/sqrt(2L) so the stream's variance does not grow with depth (GPT-2); norm gains start at 1.
  const float residual_std = init_std / std::sqrt(2.0f * float(layers_));
  for (std::size_t i = 0; i < params_.tensor_count(); ++i) {
    const tensor_spec& spec = params_.specs()[i];
    float* w = params_.master.data() + params_.offset(i);
    const bool is_norm = spec.shape.size() == 1;
    const bool into_residual =
        spec.name.find(".wo") != std::string::npos || spec.name.find(".w_down") != std::string::npos;
    const float std_dev = into_residual ? residual_std : init_std;
    for (std::size_t j = 0; j < spec.size(); ++j) w[j] = is_norm ? 1.0f : float(generator.normal()) * std_dev;
  }
}

double transformer::forward(const pass_context& pass, const std::int32_t* inputs,
                            const std::int32_t* targets) {
  const int N = batch_ * context_, C = channels_, F = hidden_, V = vocab_;
  const std::size_t NC = std::size_t(N) * std::size_t(C);
  const storage stored = pass.policy->activation_storage();
  const gemm_mode attention_mode = pass.policy->other_mode();
  const attention_shape shape{batch_, context_, channels_, heads_};
  std::copy(inputs, inputs + N, inputs_.begin());
  std::copy(targets, targets + N, targets_.begin());

  embedding_forward(encoded_.data(), compute(wte_), inputs_.data(), N, C);  // [N, C]
  const float* residual = encoded_.data();
  for (int l = 0; l < layers_; ++l) {
    block_activations& a = acts_[std::size_t(l)];
    const block_parameters& p = blocks_[std::size_t(l)];
    const std::size_t linear = std::size_t(4 * l);
    rmsnorm_forward(a.ln1.data(), a.ln1_rstd.data(), residual, compute(p.attn_norm), N, C, stored);
    linear_forward(pass, site(linear + 0), a.qkv.data(), a.ln1.data(), compute(p.wqkv), N, C, 3 * C);
    attention_forward(a.atty.data(), a.qkvr.data(), a.att.data(), a.qkv.data(), rope_, shape, attention_mode,
                      stored);
    linear_forward(pass, site(linear + 1), a.attproj.data(), a.atty.data(), compute(p.wo), N, C, C);
    residual_forward(a.residual2.data(), residual, a.attproj.data(), NC, stored);
    rmsnorm_forward(a.ln2.data(), a.ln2_rstd.data(), a.residual2.data(), compute(p.mlp_norm), N, C, stored);
    linear_forward(pass, site(linear + 2), a.gate_up.data(), a.ln2.data(), compute(p.w_gate_up), N, C, 2 * F);
    swiglu_forward(a.swiglu.data(), a.gate_up.data(), N, F, stored);
    linear_forward(pass, site(linear + 3), a.mlp_out.data(), a.swiglu.data(), compute(p.w_down), N, F, C);
    residual_forward(a.residual3.data(), a.residual2.data(), a.mlp_out.data(), NC, stored);
    residual = a.residual3.data();
  }
  rmsnorm_forward(lnf_.data(), lnf_rstd_.data(), residual, compute(final_norm_), N, C, stored);
  linear_forward(pass, site(linears_.size() - 1), logits_.data(), lnf_.data(), compute(lm_head_), N, C, V);
  return cross_entropy_forward(losses_.data(), probs_.data(), logits_.data(), targets_.data(), N, V);
}

void transformer::backward(const pass_context& pass) {
  const int N = batch_ * context_, C = channels_, F = hidden_, V = vocab_;
  const storage stored = pass.policy->activation_storage();
  const gemm_mode attention_mode = pass.policy->other_mode();
  const attention_shape shape{batch_, context_, channels_, heads_};

  cross_entropy_backward(dlogits_.data(), probs_.data(), targets_.data(), N, V, stored);
  // The head: dlnf = dlogits . W_head, dW_head += dlogits^T . lnf.
  linear_backward(pass, site(linears_.size() - 1), dbuffer_c_.data(), grad(lm_head_), dlogits_.data(),
                  lnf_.data(), compute(lm_head_), N, C, V);
  std::fill(dresidual_.begin(), dresidual_.end(), 0.0f);
  const float* last = layers_ > 0 ? acts_.back().residual3.data() : encoded_.data();
  rmsnorm_backward(dresidual_.data(), grad(final_norm_), dbuffer_c_.data(), last, compute(final_norm_),
                   lnf_rstd_.data(), N, C, stored);

  for (int l = layers_ - 1; l >= 0; --l) {
    block_activations& a = acts_[std::size_t(l)];
    const block_parameters& p = blocks_[std::size_t(l)];
    const std::size_t linear = std::size_t(4 * l);
    const float* block_input = l == 0 ? encoded_.data() : acts_[std::size_t(l - 1)].residual3.data();
    // MLP branch: residual3 = residual2 + down(swiglu(gate_up(rmsnorm(residual2)))).
    linear_backward(pass, site(linear + 3), dbuffer_f_.data(), grad(p.w_down), dresidual_.data(),
                    a.swiglu.data(), compute(p.w_down), N, F, C);
    swiglu_backward(dbuffer_2f_.data(), dbuffer_f_.data(), a.gate_up.data(), N, F, stored);
    linear_backward(pass, site(linear + 2), dbuffer_c_.data(), grad(p.w_gate_up), dbuffer_2f_.data(),
                    a.ln2.data(), compute(p.w_gate_up), N, C, 2 * F);
    rmsnorm_backward(dresidual_.data(), grad(p.mlp_norm), dbuffer_c_.data(), a.residual2.data(),
                     compute(p.mlp_norm), a.ln2_rstd.data(), N, C, stored);
    // Attention branch: residual2 = input + wo(attention(wqkv(rmsnorm(input)))).
    linear_backward(pass, site(linear + 1), dbuffer_c_.data(), grad(p.wo), dresidual_.data(), a.atty.data(),
                    compute(p.wo), N, C, C);
    attention_backward(dbuffer_3c_.data(), dbuffer_c_.data(), a.qkvr.data(), a.att.data(), rope_, shape,
                       attention_mode, stored);
    linear_backward(pass, site(linear + 0), dbuffer_c_.data(), grad(p.wqkv), dbuffer_3c_.data(), a.ln1.data(),
                    compute(p.wqkv), N, C, 3 * C);
    rmsnorm_backward(dresidual_.data(), grad(p.attn_norm), dbuffer_c_.data(), block_input,
                     compute(p.attn_norm), a.ln1_rstd.data(), N, C, stored);
  }
  embedding_backward(grad(wte_), dresidual_.data(), inputs_.data(), N, C);
}

}  // namespace trainer
