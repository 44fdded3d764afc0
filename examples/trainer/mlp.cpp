// The MLP model's parameters, forward pass and backward pass.
#include "mlp.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "cross_entropy.hpp"
#include "gelu.hpp"
#include "linear.hpp"

namespace trainer {

namespace {

constexpr float embedding_std = 1.0f;  // embeddings feed a linear layer directly: unit scale

void check_positive(int value, const char* name) {
  if (value <= 0)
    throw std::invalid_argument(std::string(name) + " must be positive; got " + std::to_string(value));
}

std::vector<tensor_spec> mlp_specs(const model_options& options, int batch_size) {
  check_positive(batch_size, "--batch");
  check_positive(options.context, "--context");
  check_positive(options.window, "--window");
  check_positive(options.channels, "--d-model");
  check_positive(options.hidden, "--hidden");
  check_positive(options.layers, "--layers");
  std::vector<tensor_spec> specs;
  specs.push_back({"wte", {options.vocab, options.channels}, true});
  int fan_in = options.window * options.channels;
  for (int l = 0; l < options.layers; ++l) {
    specs.push_back({"fc" + std::to_string(l + 1), {options.hidden, fan_in}, true});
    fan_in = options.hidden;
  }
  specs.push_back({"head", {options.vocab, fan_in}, true});
  return specs;
}

}  // namespace

mlp::mlp(const model_options& options, int batch_size)
    : batch_(batch_size),
      context_(options.context),
      window_(options.window),
      embed_(options.channels),
      hidden_(options.hidden),
      layers_(options.layers),
      vocab_(options.vocab),
      params_(mlp_specs(options, batch_size)) {
  wte_ = params_.index_of("wte");
  for (int l = 0; l < layers_; ++l) {
    const std::string name = "fc" + std::to_string(l + 1);
    weights_.push_back(params_.index_of(name));
    linears_.push_back({name, l});
  }
  weights_.push_back(params_.index_of("head"));
  linears_.push_back({"head", layers_});

  const std::size_t N = std::size_t(batch_) * std::size_t(context_);
  inputs_.resize(N);
  targets_.resize(N);
  concat_.resize(N * std::size_t(window_) * std::size_t(embed_));
  pre_.assign(std::size_t(layers_), std::vector<float>(N * std::size_t(hidden_)));
  post_ = pre_;
  logits_.resize(N * std::size_t(vocab_));
  probs_.resize(logits_.size());
  losses_.resize(N);
  dlogits_.resize(logits_.size());
  dpost_.resize(N * std::size_t(hidden_));
  dpre_.resize(N * std::size_t(hidden_));
  dconcat_.resize(concat_.size());
}

std::vector<std::pair<std::string, std::string>> mlp::shape_description() const {
  return {{"model", "mlp"},
          {"vocab", std::to_string(vocab_)},
          {"context", std::to_string(context_)},
          {"window", std::to_string(window_)},
          {"d_model", std::to_string(embed_)},
          {"layers", std::to_string(layers_)},
          {"hidden", std::to_string(hidden_)}};
}

std::int32_t mlp_window_byte(const std::int32_t* inputs, int context, int window, int n, int w) {
  const int t = n % context;
  const int source = t - (window - 1) + w;
  return source < 0 ? 0 : inputs[std::size_t(n - t + source)];
}

std::int32_t mlp::window_byte(int n, int w) const {
  return mlp_window_byte(inputs_.data(), context_, window_, n, w);
}

void mlp::init_weights(rng& generator) {
  // Embeddings N(0, 1); each matrix N(0, 1/fan_in) so that activations keep unit scale (He-like).
  for (std::size_t i = 0; i < params_.tensor_count(); ++i) {
    const tensor_spec& spec = params_.specs()[i];
    float* w = params_.master.data() + params_.offset(i);
    const float std_dev = i == wte_ ? embedding_std : 1.0f / std::sqrt(float(spec.shape[1]));
    for (std::size_t j = 0; j < spec.size(); ++j) w[j] = float(generator.normal()) * std_dev;
  }
}

double mlp::forward(const pass_context& pass, const std::int32_t* inputs, const std::int32_t* targets) {
  const int N = batch_ * context_, WE = window_ * embed_;
  const storage stored = pass.policy->activation_storage();
  std::copy(inputs, inputs + N, inputs_.begin());
  std::copy(targets, targets + N, targets_.begin());
  const float* table = params_.compute.data() + params_.offset(wte_);
  for (int n = 0; n < N; ++n) {
    for (int w = 0; w < window_; ++w) {
      std::memcpy(concat_.data() + std::size_t(n) * std::size_t(WE) + std::size_t(w * embed_),
                  table + std::size_t(window_byte(n, w)) * std::size_t(embed_),
                  sizeof(float) * std::size_t(embed_));
    }
  }
  const float* x = concat_.data();
  int fan_in = WE;
  for (int l = 0; l < layers_; ++l) {
    const float* w = params_.compute.data() + params_.offset(weights_[std::size_t(l)]);
    linear_forward(pass, {l, std::size_t(l)}, pre_[std::size_t(l)].data(), x, w, N, fan_in, hidden_);
    gelu_forward(post_[std::size_t(l)].data(), pre_[std::size_t(l)].data(), pre_[std::size_t(l)].size(),
                 stored);
    x = post_[std::size_t(l)].data();
    fan_in = hidden_;
  }
  const float* head = params_.compute.data() + params_.offset(weights_.back());
  linear_forward(pass, {layers_, std::size_t(layers_)}, logits_.data(), x, head, N, fan_in, vocab_);
  return cross_entropy_forward(losses_.data(), probs_.data(), logits_.data(), targets_.data(), N, vocab_);
}

void mlp::backward(const pass_context& pass) {
  const int N = batch_ * context_, WE = window_ * embed_;
  const storage stored = pass.policy->activation_storage();
  cross_entropy_backward(dlogits_.data(), probs_.data(), targets_.data(), N, vocab_, stored);

  // The head, then the hidden layers from the top; dpost_ holds the gradient of the current output.
  const float* dy = dlogits_.data();
  int out_width = vocab_;
  for (int l = layers_; l >= 0; --l) {
    const std::size_t weight = weights_[std::size_t(l)];
    const float* w = params_.compute.data() + params_.offset(weight);
    float* dw = params_.grad.data() + params_.offset(weight);
    const float* x = l == 0 ? concat_.data() : post_[std::size_t(l - 1)].data();
    const int fan_in = l == 0 ? WE : hidden_;
    float* dx = l == 0 ? dconcat_.data() : dpost_.data();
    linear_backward(pass, {l, std::size_t(l)}, dx, dw, dy, x, w, N, fan_in, out_width);
    if (l > 0) {
      gelu_backward(dpre_.data(), dpost_.data(), pre_[std::size_t(l - 1)].data(), dpre_.size(), stored);
      dy = dpre_.data();
      out_width = hidden_;
    }
  }
  float* dtable = params_.grad.data() + params_.offset(wte_);
  for (int n = 0; n < N; ++n) {
    for (int w = 0; w < window_; ++w) {
      float* row = dtable + std::size_t(window_byte(n, w)) * std::size_t(embed_);
      const float* d = dconcat_.data() + std::size_t(n) * std::size_t(WE) + std::size_t(w * embed_);
      for (int j = 0; j < embed_; ++j) row[j] += d[j];
    }
  }
}

}  // namespace trainer
