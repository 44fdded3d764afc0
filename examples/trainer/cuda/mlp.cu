// The MLP's forward and backward passes on the device, in the CPU model's order (../mlp.cpp).
#include "mlp.cuh"

#include <string>

#include <fp8/cuda/error.hpp>

#include "../mlp.hpp"
#include "embedding.hpp"
#include "gelu.hpp"

namespace trainer::cuda {

device_mlp::device_mlp(const model_options& shape, int batch, const parameter_set& host,
                       const std::vector<linear_layer_info>& linears, const precision_policy& policy,
                       const fp8::gemm_recipe& recipe, bool with_shadow, cudaStream_t stream,
                       fp8::cuda::device_amax_reducer* amax_reducer)
    : device_model(host, linear_features_of(shape, linears.size()), linears,
                   std::int64_t(batch) * std::int64_t(shape.context), policy, recipe, with_shadow, stream,
                   amax_reducer),
      batch_(batch),
      context_(shape.context),
      window_(shape.window),
      embed_(shape.channels),
      hidden_(shape.hidden),
      layers_(shape.layers),
      vocab_(shape.vocab),
      wte_(host.index_of("wte")) {
  if (linears.size() != std::size_t(layers_ + 1)) {
    throw fp8::invalid_argument("trainer::cuda::device_mlp: expected " + std::to_string(layers_ + 1) +
                                " linear layers, got " + std::to_string(linears.size()));
  }
  for (int l = 0; l < layers_; ++l) weights_.push_back(host.index_of("fc" + std::to_string(l + 1)));
  weights_.push_back(host.index_of("head"));
  const std::size_t N = std::size_t(batch_) * std::size_t(context_);
  const std::size_t WE = std::size_t(window_) * std::size_t(embed_), M = std::size_t(hidden_);
  windows_host_.resize(N * std::size_t(window_));
  windows_ = device_buffer<std::int32_t>(windows_host_.size());
  targets_ = device_buffer<std::int32_t>(N);
  concat_ = device_buffer<float>(N * WE);
  for (int l = 0; l < layers_; ++l) {
    pre_.emplace_back(N * M);
    post_.emplace_back(N * M);
  }
  loss_ = device_loss(N, vocab_);
  dpost_ = device_buffer<float>(N * M);
  dpre_ = device_buffer<float>(N * M);
  dconcat_ = device_buffer<float>(N * WE);
}

double device_mlp::forward_pass(const std::int32_t* inputs, const std::int32_t* targets, pass_kind kind) {
  const int N = batch_ * context_, W = window_, E = embed_, M = hidden_, V = vocab_;
  const std::size_t NM = std::size_t(N) * std::size_t(M);
  // The window bytes on the host (the CPU model's rule), then one copy: the embedding lookup of the
  // [N * W] window bytes fills the [N, W * E] concatenation, its rows being contiguous.
  for (int n = 0; n < N; ++n) {
    for (int w = 0; w < W; ++w) {
      windows_host_[std::size_t(n) * std::size_t(W) + std::size_t(w)] =
          mlp_window_byte(inputs, context_, window_, n, w);
    }
  }
  mark(phase::other);
  FP8_CUDA_CHECK(cudaMemcpyAsync(windows_.data(), windows_host_.data(),
                                 windows_.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream_));
  FP8_CUDA_CHECK(cudaMemcpyAsync(targets_.data(), targets, targets_.size() * sizeof(std::int32_t),
                                 cudaMemcpyHostToDevice, stream_));
  FP8_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the host buffers may change after this returns
  mark(phase::embedding);
  embedding_forward(concat_.data(), compute(wte_), windows_.data(), N * W, E, V, stream_);
  const float* x = concat_.data();
  for (int l = 0; l < layers_; ++l) {
    linear_forward(std::size_t(l), kind, pre_[std::size_t(l)].data(), x, weights_[std::size_t(l)], N);
    mark(phase::activation);
    gelu_forward(post_[std::size_t(l)].data(), pre_[std::size_t(l)].data(), NM, stored_, stream_);
    x = post_[std::size_t(l)].data();
  }
  linear_forward(std::size_t(layers_), kind, loss_.logits(), x, weights_.back(), N);
  mark(phase::loss);
  const double loss = loss_.forward_backward(targets_.data(), N, stored_, stream_);
  stop_profile();
  return loss;
}

void device_mlp::backward_pass() {
  const int N = batch_ * context_, W = window_, E = embed_, M = hidden_, V = vocab_;
  const std::size_t NM = std::size_t(N) * std::size_t(M);
  // The head, then the hidden layers from the top; dpost_ holds the gradient of the current output.
  const float* dy = loss_.dlogits();
  for (int l = layers_; l >= 0; --l) {
    const float* x = l == 0 ? concat_.data() : post_[std::size_t(l - 1)].data();
    float* dx = l == 0 ? dconcat_.data() : dpost_.data();
    linear_backward(std::size_t(l), dx, weights_[std::size_t(l)], dy, x, N);
    if (l > 0) {
      mark(phase::activation);
      gelu_backward(dpre_.data(), dpost_.data(), pre_[std::size_t(l - 1)].data(), NM, stored_, stream_);
      dy = dpre_.data();
    }
  }
  mark(phase::embedding);
  // Row by row in window order (n, then w): the CPU loop's additions in its order.
  embedding_backward(grad(wte_), dconcat_.data(), windows_.data(), N * W, E, V, stream_);
  stop_profile();
}

}  // namespace trainer::cuda
