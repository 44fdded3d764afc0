// The transformer's forward and backward passes on the device, in the CPU model's order
// (../transformer.cpp), with the linear layers through fp8::cuda::linear_layer.
#include "transformer.cuh"

#include <algorithm>
#include <string>

#include <fp8/cuda/error.hpp>

#include "cross_entropy.hpp"
#include "embedding.hpp"
#include "residual.hpp"
#include "rmsnorm.hpp"
#include "storage.hpp"
#include "swiglu.hpp"

namespace trainer::cuda {

namespace {

std::size_t max_of(std::initializer_list<std::size_t> values) { return std::max(values); }

}  // namespace

device_transformer::device_transformer(const model_options& shape, int batch, const parameter_set& host,
                                       const std::vector<linear_layer_info>& linears,
                                       const precision_policy& policy, const fp8::gemm_recipe& recipe,
                                       bool with_shadow, cudaStream_t stream)
    : batch_(batch),
      context_(shape.context),
      channels_(shape.channels),
      layers_(shape.layers),
      heads_(shape.heads),
      hidden_(shape.hidden),
      vocab_(shape.vocab),
      fp32_(policy.base == precision::fp32),
      stored_(policy.activation_storage()),
      attention_mode_(policy.other_mode()),
      stream_(stream),
      params_(host),
      weights16_(policy.base == precision::fp32 ? 0 : host.size()),
      wte_(host.index_of("wte")),
      final_norm_(host.index_of("final_norm")),
      lm_head_(host.index_of("lm_head")),
      shape_{batch, shape.context, shape.channels, shape.heads},
      rope_(make_rope_table(shape.context, shape.channels / shape.heads)),
      attention_(shape_),
      scaling_(recipe, linears.size()) {
  if (linears.size() != std::size_t(4 * layers_ + 1)) {
    throw fp8::invalid_argument("trainer::cuda::device_transformer: expected " +
                                std::to_string(4 * layers_ + 1) + " linear layers, got " +
                                std::to_string(linears.size()));
  }
  for (int l = 0; l < layers_; ++l) {
    const std::string prefix = "blocks." + std::to_string(l) + ".";
    blocks_.push_back({host.index_of(prefix + "attn_norm"), host.index_of(prefix + "wqkv"),
                       host.index_of(prefix + "wo"), host.index_of(prefix + "mlp_norm"),
                       host.index_of(prefix + "w_gate_up"), host.index_of(prefix + "w_down")});
  }
  const std::size_t N = std::size_t(batch_) * std::size_t(context_);
  const std::size_t C = std::size_t(channels_), F = std::size_t(hidden_), V = std::size_t(vocab_);
  const std::size_t T = std::size_t(context_), BH = std::size_t(batch_) * std::size_t(heads_);
  std::size_t largest_weight = 0;
  for (std::size_t i = 0; i < linears.size(); ++i) {
    const linear_features features = transformer_linear_features(shape, i);
    largest_weight = std::max(largest_weight, std::size_t(features.in) * std::size_t(features.out));
    if (fp32_) continue;  // FP32 products through cuBLAS, no layer objects
    const std::int64_t k = features.in, n = features.out;
    fp8::cuda::linear_config config{k, n, std::int64_t(N), false, recipe, {}};
    config.precision = linear_precision_of(policy, linears[i].unit);
    try {
      layers_fp8_.push_back(std::make_unique<fp8::cuda::linear_layer>(config, scaling_, i, lt_));
      if (with_shadow) {
        config.precision = fp8::cuda::linear_precision::bf16();
        layers_shadow_.push_back(std::make_unique<fp8::cuda::linear_layer>(config, scaling_, i, lt_));
      }
    } catch (const fp8::invalid_argument& e) {
      throw fp8::invalid_argument("linear layer " + linears[i].name + " (" + std::to_string(k) + " -> " +
                                  std::to_string(n) + ", " + std::to_string(N) +
                                  " tokens) does not fit the GPU's FP8 products: " + e.what() +
                                  " (keep it in BF16 with --bf16-layers, or change the shape)");
    }
  }
  inputs_ = device_buffer<std::int32_t>(N);
  targets_ = device_buffer<std::int32_t>(N);
  encoded_ = device_buffer<float>(N * C);
  acts_.resize(std::size_t(layers_));
  for (block_activations& a : acts_) {
    a.ln1 = device_buffer<float>(N * C);
    a.ln1_rstd = device_buffer<float>(N);
    a.qkv = device_buffer<float>(N * 3 * C);
    a.qkvr = device_buffer<float>(N * 3 * C);
    a.att = device_buffer<float>(BH * T * T);
    a.atty = device_buffer<float>(N * C);
    a.attproj = device_buffer<float>(N * C);
    a.residual2 = device_buffer<float>(N * C);
    a.ln2 = device_buffer<float>(N * C);
    a.ln2_rstd = device_buffer<float>(N);
    a.gate_up = device_buffer<float>(N * 2 * F);
    a.swiglu = device_buffer<float>(N * F);
    a.mlp_out = device_buffer<float>(N * C);
    a.residual3 = device_buffer<float>(N * C);
  }
  lnf_ = device_buffer<float>(N * C);
  lnf_rstd_ = device_buffer<float>(N);
  logits_ = device_buffer<float>(N * V);
  losses_ = device_buffer<float>(N);
  dresidual_ = device_buffer<float>(N * C);
  dbuffer_c_ = device_buffer<float>(N * C);
  dbuffer_3c_ = device_buffer<float>(N * 3 * C);
  dbuffer_f_ = device_buffer<float>(N * F);
  dbuffer_2f_ = device_buffer<float>(N * 2 * F);
  dlogits_ = device_buffer<float>(N * V);
  norm_workspace_ = device_buffer<float>(rmsnorm_backward_workspace_size(int(N), channels_));
  mean_scratch_ = device_buffer<double>(1);
  if (fp32_) {
    wgrad_scratch_ = device_buffer<float>(largest_weight);
  } else {
    x16_ = device_buffer<std::uint16_t>(N * max_of({C, F}));
    dx16_ = device_buffer<std::uint16_t>(N * max_of({C, F}));
    y16_ = device_buffer<std::uint16_t>(N * max_of({3 * C, 2 * F, V, C}));
    dy16_ = device_buffer<std::uint16_t>(N * max_of({3 * C, 2 * F, V, C}));
    to_bf16(weights16_.data(), params_.compute.data(), params_.size(), stream_);
  }
}

const __nv_bfloat16* device_transformer::weight16(std::size_t tensor) const {
  return reinterpret_cast<const __nv_bfloat16*>(weights16_.data() + params_.offset(tensor));
}

fp8::cuda::linear_layer& device_transformer::layer(std::size_t linear, pass_kind kind) {
  if (kind == pass_kind::shadow) {
    if (layers_shadow_.empty()) {
      throw fp8::invalid_argument("trainer::cuda::device_transformer: a shadow pass needs with_shadow");
    }
    return *layers_shadow_[linear];
  }
  return *layers_fp8_[linear];
}

void device_transformer::linear_forward(std::size_t linear, pass_kind kind, float* y, const float* x,
                                        std::size_t weight, int m, int k, int n) {
  const std::size_t mk = std::size_t(m) * std::size_t(k), mn = std::size_t(m) * std::size_t(n);
  if (fp32_) {
    mark(phase::linear);
    batched_gemm(cublas_.get(), gemm_mode::fp32, {x, m, k}, {compute(weight), n, k}, y, 0, 1, stream_);
    return;
  }
  mark(phase::staging);
  to_bf16(x16_.data(), x, mk, stream_);
  mark(phase::linear);
  fp8::cuda::linear_layer::forward_args args;
  args.x = reinterpret_cast<const __nv_bfloat16*>(x16_.data());
  args.w = weight16(weight);
  args.y = reinterpret_cast<__nv_bfloat16*>(y16_.data());
  args.m = m;
  args.record_amax = kind == pass_kind::train;
  layer(linear, kind).forward(args, stream_);
  mark(phase::staging);
  from_bf16(y, y16_.data(), mn, stream_);
}

void device_transformer::linear_backward(std::size_t linear, float* dx, std::size_t weight, const float* dy,
                                         const float* x, int m, int k, int n) {
  const std::size_t mk = std::size_t(m) * std::size_t(k), mn = std::size_t(m) * std::size_t(n);
  if (fp32_) {
    mark(phase::linear);
    // dx[M, K] = dy[M, N] . W[N, K]  (W read as its transpose [K, N]).
    batched_gemm(cublas_.get(), gemm_mode::fp32, {dy, m, n}, {compute(weight), n, k, true}, dx, 0, 1,
                 stream_);
    // dW[N, K] += dy^T[N, M] . x[M, K]: the product, then added to the gradient.
    const std::size_t nk = std::size_t(n) * std::size_t(k);
    batched_gemm(cublas_.get(), gemm_mode::fp32, {dy, m, n, true}, {x, m, k, true}, wgrad_scratch_.data(), 0,
                 1, stream_);
    residual_forward(grad(weight), grad(weight), wgrad_scratch_.data(), nk, storage::fp32, stream_);
    return;
  }
  mark(phase::staging);
  to_bf16(dy16_.data(), dy, mn, stream_);
  to_bf16(x16_.data(), x, mk, stream_);  // read by a BF16 wgrad (an FP8 wgrad uses the forward's copy)
  mark(phase::linear);
  fp8::cuda::linear_layer::backward_args args;
  args.dy = reinterpret_cast<const __nv_bfloat16*>(dy16_.data());
  args.x = reinterpret_cast<const __nv_bfloat16*>(x16_.data());
  args.w = weight16(weight);
  args.dx = reinterpret_cast<__nv_bfloat16*>(dx16_.data());
  args.dw = grad(weight);
  args.m = m;
  args.accumulate = true;  // into the gradients zero_grad() cleared, as the CPU's wgrad does
  args.record_amax = true;
  layer(linear, pass_kind::train).backward(args, stream_);
  mark(phase::staging);
  from_bf16(dx, dx16_.data(), mk, stream_);
}

double device_transformer::forward(const std::int32_t* inputs, const std::int32_t* targets, pass_kind kind) {
  const std::size_t bytes = inputs_.size() * sizeof(std::int32_t);
  FP8_CUDA_CHECK(cudaMemcpyAsync(inputs_.data(), inputs, bytes, cudaMemcpyHostToDevice, stream_));
  FP8_CUDA_CHECK(cudaMemcpyAsync(targets_.data(), targets, bytes, cudaMemcpyHostToDevice, stream_));
  // The host vectors may change as soon as this returns: the copies must be done.
  FP8_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return forward_device(inputs_.data(), targets_.data(), kind);
}

double device_transformer::forward_device(const std::int32_t* inputs, const std::int32_t* targets,
                                          pass_kind kind) {
  const int N = batch_ * context_, C = channels_, F = hidden_, V = vocab_;
  const std::size_t NC = std::size_t(N) * std::size_t(C);
  const storage stored = stored_;
  const gemm_mode attention_mode = attention_mode_;
  if (inputs != inputs_.data()) {
    FP8_CUDA_CHECK(cudaMemcpyAsync(inputs_.data(), inputs, inputs_.size() * sizeof(std::int32_t),
                                   cudaMemcpyDeviceToDevice, stream_));
  }
  if (targets != targets_.data()) {
    FP8_CUDA_CHECK(cudaMemcpyAsync(targets_.data(), targets, targets_.size() * sizeof(std::int32_t),
                                   cudaMemcpyDeviceToDevice, stream_));
  }
  mark(phase::other);
  embedding_forward(encoded_.data(), compute(wte_), inputs_.data(), N, C, V, stream_);
  const float* residual = encoded_.data();
  for (int l = 0; l < layers_; ++l) {
    block_activations& a = acts_[std::size_t(l)];
    const block_parameters& p = blocks_[std::size_t(l)];
    const std::size_t linear = std::size_t(4 * l);
    mark(phase::other);
    rmsnorm_forward(a.ln1.data(), a.ln1_rstd.data(), residual, compute(p.attn_norm), N, C, stored, stream_);
    linear_forward(linear + 0, kind, a.qkv.data(), a.ln1.data(), p.wqkv, N, C, 3 * C);
    mark(phase::attention);
    attention_forward(a.atty.data(), a.qkvr.data(), a.att.data(), a.qkv.data(), rope_, shape_, attention_mode,
                      stored, attention_, cublas_.get(), stream_);
    linear_forward(linear + 1, kind, a.attproj.data(), a.atty.data(), p.wo, N, C, C);
    mark(phase::other);
    residual_forward(a.residual2.data(), residual, a.attproj.data(), NC, stored, stream_);
    rmsnorm_forward(a.ln2.data(), a.ln2_rstd.data(), a.residual2.data(), compute(p.mlp_norm), N, C, stored,
                    stream_);
    linear_forward(linear + 2, kind, a.gate_up.data(), a.ln2.data(), p.w_gate_up, N, C, 2 * F);
    mark(phase::other);
    swiglu_forward(a.swiglu.data(), a.gate_up.data(), N, F, stored, stream_);
    linear_forward(linear + 3, kind, a.mlp_out.data(), a.swiglu.data(), p.w_down, N, F, C);
    mark(phase::other);
    residual_forward(a.residual3.data(), a.residual2.data(), a.mlp_out.data(), NC, stored, stream_);
    residual = a.residual3.data();
  }
  rmsnorm_forward(lnf_.data(), lnf_rstd_.data(), residual, compute(final_norm_), N, C, stored, stream_);
  linear_forward(std::size_t(4 * layers_), kind, logits_.data(), lnf_.data(), lm_head_, N, C, V);
  mark(phase::other);
  // The loss and its gradient in one pass (bit-identical to the CPU's forward, then backward).
  const double loss =
      cross_entropy_forward_backward(losses_.data(), dlogits_.data(), logits_.data(), targets_.data(), N, V,
                                     stored, mean_scratch_.data(), stream_);
  if (profile_ != nullptr) profile_->stop();
  return loss;
}

void device_transformer::backward() {
  const int N = batch_ * context_, C = channels_, F = hidden_, V = vocab_;
  const storage stored = stored_;
  const gemm_mode attention_mode = attention_mode_;
  // The head: dlnf = dlogits . W_head, dW_head += dlogits^T . lnf.
  linear_backward(std::size_t(4 * layers_), dbuffer_c_.data(), lm_head_, dlogits_.data(), lnf_.data(), N, C,
                  V);
  mark(phase::other);
  FP8_CUDA_CHECK(cudaMemsetAsync(dresidual_.data(), 0, dresidual_.size() * sizeof(float), stream_));
  const float* last = layers_ > 0 ? acts_.back().residual3.data() : encoded_.data();
  rmsnorm_backward(dresidual_.data(), grad(final_norm_), dbuffer_c_.data(), last, compute(final_norm_),
                   lnf_rstd_.data(), N, C, stored, norm_workspace_.data(), stream_);
  for (int l = layers_ - 1; l >= 0; --l) {
    block_activations& a = acts_[std::size_t(l)];
    const block_parameters& p = blocks_[std::size_t(l)];
    const std::size_t linear = std::size_t(4 * l);
    const float* block_input = l == 0 ? encoded_.data() : acts_[std::size_t(l - 1)].residual3.data();
    // MLP branch: residual3 = residual2 + down(swiglu(gate_up(rmsnorm(residual2)))).
    linear_backward(linear + 3, dbuffer_f_.data(), p.w_down, dresidual_.data(), a.swiglu.data(), N, F, C);
    mark(phase::other);
    swiglu_backward(dbuffer_2f_.data(), dbuffer_f_.data(), a.gate_up.data(), N, F, stored, stream_);
    linear_backward(linear + 2, dbuffer_c_.data(), p.w_gate_up, dbuffer_2f_.data(), a.ln2.data(), N, C,
                    2 * F);
    mark(phase::other);
    rmsnorm_backward(dresidual_.data(), grad(p.mlp_norm), dbuffer_c_.data(), a.residual2.data(),
                     compute(p.mlp_norm), a.ln2_rstd.data(), N, C, stored, norm_workspace_.data(), stream_);
    // Attention branch: residual2 = input + wo(attention(wqkv(rmsnorm(input)))).
    linear_backward(linear + 1, dbuffer_c_.data(), p.wo, dresidual_.data(), a.atty.data(), N, C, C);
    mark(phase::attention);
    attention_backward(dbuffer_3c_.data(), dbuffer_c_.data(), a.qkvr.data(), a.att.data(), rope_, shape_,
                       attention_mode, stored, attention_, cublas_.get(), stream_);
    linear_backward(linear + 0, dbuffer_c_.data(), p.wqkv, dbuffer_3c_.data(), a.ln1.data(), N, C, 3 * C);
    mark(phase::other);
    rmsnorm_backward(dresidual_.data(), grad(p.attn_norm), dbuffer_c_.data(), block_input,
                     compute(p.attn_norm), a.ln1_rstd.data(), N, C, stored, norm_workspace_.data(), stream_);
  }
  embedding_backward(grad(wte_), dresidual_.data(), inputs_.data(), N, C, V, stream_);
  if (profile_ != nullptr) profile_->stop();
}

void device_transformer::weights_changed() {
  params_.refresh_compute(stored_, stream_);
  if (!fp32_) to_bf16(weights16_.data(), params_.compute.data(), params_.size(), stream_);
  drop_weight_copies();
}

void device_transformer::drop_weight_copies() {
  for (auto& l : layers_fp8_) l->weights_changed();
  for (auto& l : layers_shadow_) l->weights_changed();
}

double optimizer_step(device_transformer& model, const adamw_options& options, float learning_rate, long step,
                      float clip_norm, phase_profile* profile) {
  if (profile != nullptr) profile->mark(phase::optimizer);
  device_parameters& params = model.parameters();
  const double norm = gradient_norm(params, model.stream());
  clip_gradients(params, norm, clip_norm, model.stream());
  adamw_update(params, options, learning_rate, step, model.stream());
  model.weights_changed();
  if (model.records_scaling()) model.scaling().end_step(model.stream());
  if (profile != nullptr) profile->stop();
  return norm;
}

}  // namespace trainer::cuda
