// The linear layers of the device models, what the models share, and the optimizer step.
#include "device_model.cuh"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>

#include <fp8/cuda/error.hpp>

#include "mlp.cuh"
#include "residual.hpp"
#include "storage.hpp"
#include "transformer.cuh"

namespace trainer::cuda {

device_linears::device_linears(const std::vector<linear_features>& features,
                               const std::vector<linear_layer_info>& infos, std::int64_t max_tokens,
                               const precision_policy& policy, const fp8::gemm_recipe& recipe,
                               bool with_shadow, fp8::cuda::device_amax_reducer* amax_reducer,
                               const std::vector<linear_bf16_operands>& bf16_operands)
    : features_(features),
      bf16_operands_(bf16_operands.empty() ? std::vector<linear_bf16_operands>(features.size())
                                           : bf16_operands),
      fp32_(policy.base == precision::fp32),
      scaling_(amax_reducer != nullptr ? fp8::cuda::linear_scaling(recipe, features.size(), *amax_reducer)
                                       : fp8::cuda::linear_scaling(recipe, features.size())) {
  if (infos.size() != features.size()) {
    throw fp8::invalid_argument("trainer::cuda::device_linears: " + std::to_string(features.size()) +
                                " layer sizes for " + std::to_string(infos.size()) + " layers");
  }
  if (bf16_operands_.size() != features.size()) {
    throw fp8::invalid_argument("trainer::cuda::device_linears: BF16 operand plans for " +
                                std::to_string(bf16_operands_.size()) + " of " +
                                std::to_string(features.size()) + " layers");
  }
  // A layer the GPU's FP8 products cannot run, refused with its name and shape.
  const auto refused = [&](std::size_t i, const fp8::invalid_argument& e) {
    return fp8::invalid_argument("linear layer " + infos[i].name + " (" + std::to_string(features[i].in) +
                                 " -> " + std::to_string(features[i].out) + ", " +
                                 std::to_string(max_tokens) +
                                 " tokens) does not fit the GPU's FP8 products: " + e.what() +
                                 " (keep it in BF16 with --bf16-layers, or change the shape)");
  };
  // Staged operands only: an operand the model passes as BF16 needs no copy.
  std::size_t staged_x = 0, staged_dx = 0, staged_y = 0, staged_dy = 0, largest = 0;
  std::vector<fp8::cuda::linear_config> configs;
  std::size_t shared_bytes = 0;  // of the copies the layers use only within a call (linear_workspace)
  for (std::size_t i = 0; i < features.size(); ++i) {
    const std::int64_t k = features[i].in, n = features[i].out;
    const linear_bf16_operands& planned = bf16_operands_[i];
    if (fp32_ && planned.any()) {
      throw fp8::invalid_argument("trainer::cuda::device_linears: linear layer " + infos[i].name +
                                  ": an fp32 run's products take no BF16 operands");
    }
    if (!planned.x) staged_x = std::max(staged_x, std::size_t(k));
    if (!planned.dx) staged_dx = std::max(staged_dx, std::size_t(k));
    if (!planned.y) staged_y = std::max(staged_y, std::size_t(n));
    if (!planned.dy) staged_dy = std::max(staged_dy, std::size_t(n));
    largest = std::max(largest, std::size_t(k) * std::size_t(n));
    if (fp32_) continue;  // FP32 products through cuBLAS, no layer objects
    fp8::cuda::linear_config config{k, n, max_tokens, false, recipe, {}};
    config.precision = linear_precision_of(policy, infos[i].unit);
    try {
      shared_bytes = std::max(shared_bytes, fp8::cuda::linear_workspace_bytes(config));
    } catch (const fp8::invalid_argument& e) { throw refused(i, e); }
    configs.push_back(config);
  }
  // The layers run one after another on the model's stream, so the copies each uses only within a
  // call (X's row-major copy, dY's two) are held once, for the largest layer, not once per layer.
  if (shared_bytes > 0) workspace_ = std::make_unique<fp8::cuda::linear_workspace>(shared_bytes);
  for (std::size_t i = 0; i < configs.size(); ++i) {
    try {
      layers_.push_back(
          std::make_unique<fp8::cuda::linear_layer>(configs[i], scaling_, i, lt_, workspace_.get()));
      if (with_shadow) {  // all BF16: no FP8 copies
        fp8::cuda::linear_config shadow = configs[i];
        shadow.precision = fp8::cuda::linear_precision::bf16();
        shadow_layers_.push_back(std::make_unique<fp8::cuda::linear_layer>(shadow, scaling_, i, lt_));
      }
    } catch (const fp8::invalid_argument& e) { throw refused(i, e); }
  }
  const std::size_t m = std::size_t(max_tokens);
  if (fp32_) {
    wgrad_scratch_ = device_buffer<float>(largest);
  } else {
    staged_amax_ = device_buffer<float>(2);
    refresh_takes_amax();
    x16_ = device_buffer<std::uint16_t>(m * staged_x);
    dx16_ = device_buffer<std::uint16_t>(m * staged_dx);
    y16_ = device_buffer<std::uint16_t>(m * staged_y);
    dy16_ = device_buffer<std::uint16_t>(m * staged_dy);
  }
}

void device_linears::set_profile(phase_profile* profile) {
  profile_ = profile;
  // The layers mark their own stages, their kernels (the casts) and their products, in stream order.
  using stage = fp8::cuda::linear_layer::stage;
  std::function<void(stage)> hook;
  if (profile != nullptr) {
    hook = [profile](stage s) {
      profile->mark(s == stage::products ? phase::linear_gemms : phase::linear_casts);
    };
  }
  for (auto& l : layers_) l->set_stage_hook(hook);
  for (auto& l : shadow_layers_) l->set_stage_hook(hook);
}

fp8::cuda::linear_layer& device_linears::layer(std::size_t linear, pass_kind kind) {
  if (kind == pass_kind::shadow) {
    if (shadow_layers_.empty()) {
      throw fp8::invalid_argument("trainer::cuda::device_linears: a shadow pass needs with_shadow");
    }
    return *shadow_layers_.at(linear);
  }
  return *layers_.at(linear);
}

template <class Float, class Bf16>
Float* device_linears::fp32_operand(const linear_tensor<Float, Bf16>& t, std::size_t linear,
                                    const char* name) const {
  if (!t.staged()) {
    throw fp8::invalid_argument("trainer::cuda::device_linears: layer " + std::to_string(linear) + ": " +
                                name + " is BF16, but an fp32 run's products read and write floats");
  }
  return t.floats();
}

template <class Float, class Bf16>
void device_linears::check_planned(const linear_tensor<Float, Bf16>& t, bool bf16_planned, std::size_t linear,
                                   const char* name) const {
  if (t.staged() && bf16_planned) {
    throw fp8::invalid_argument("trainer::cuda::device_linears: layer " + std::to_string(linear) + ": " +
                                name + " is floats, but the layer was planned with BF16 " + name +
                                " (no staging copy for it)");
  }
}

const __nv_bfloat16* device_linears::layer_operand(linear_input t, device_buffer<std::uint16_t>& scratch,
                                                   std::size_t count, cudaStream_t stream, float* amax) {
  if (!t.staged()) return reinterpret_cast<const __nv_bfloat16*>(t.bf16());
  mark(phase::staging);
  if (amax != nullptr) FP8_CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  to_bf16(scratch.data(), t.floats(), count, stream, amax);
  return reinterpret_cast<const __nv_bfloat16*>(scratch.data());
}

float* device_linears::amax_slot(std::size_t linear, fp8::cuda::linear_tensor tensor, float* slot) const {
  if (fp32_ || !producer_amaxes_) return nullptr;
  return takes_amax_.at(linear)[tensor == fp8::cuda::linear_tensor::x ? 0 : 1] ? slot : nullptr;
}

void device_linears::set_record_bf16_amax(bool on) {
  for (auto& l : layers_) l->set_record_bf16_amax(on);
  refresh_takes_amax();
}

void device_linears::refresh_takes_amax() {
  takes_amax_.clear();
  for (auto& l : layers_) {
    takes_amax_.push_back({l->takes_given_amax(fp8::cuda::linear_tensor::x),
                           l->takes_given_amax(fp8::cuda::linear_tensor::dy)});
  }
}

__nv_bfloat16* device_linears::layer_result(linear_output t, device_buffer<std::uint16_t>& scratch) {
  return reinterpret_cast<__nv_bfloat16*>(t.staged() ? scratch.data() : t.bf16());
}

void device_linears::stage_result(linear_output t, const device_buffer<std::uint16_t>& scratch,
                                  std::size_t count, cudaStream_t stream) {
  if (!t.staged()) return;  // the layer wrote it
  mark(phase::staging);
  from_bf16(t.floats(), scratch.data(), count, stream);
}

void device_linears::forward(std::size_t linear, pass_kind kind, linear_output y, linear_input x,
                             const float* w, const __nv_bfloat16* w16, int m, cudaStream_t stream) {
  const int k = int(features_.at(linear).in), n = int(features_.at(linear).out);
  const std::size_t mk = std::size_t(m) * std::size_t(k), mn = std::size_t(m) * std::size_t(n);
  if (fp32_) {
    const float* x32 = fp32_operand(x, linear, "x");
    float* y32 = fp32_operand(y, linear, "y");
    mark(phase::linear_gemms);
    batched_gemm(cublas_.get(), gemm_mode::fp32, {x32, m, k}, {w, n, k}, y32, 0, 1, stream);
    return;
  }
  const linear_bf16_operands& planned = bf16_operands_.at(linear);
  check_planned(x, planned.x, linear, "x");
  check_planned(y, planned.y, linear, "y");
  fp8::cuda::linear_layer::forward_args args;
  const taken_operand in =
      take_operand(x, linear, fp8::cuda::linear_tensor::x, kind, m, mk, x16_, staged_amax_.data(), stream);
  args.x = in.bf16;
  args.x_amax = in.amax;
  args.x_written = in.written;
  args.w = w16;
  args.y = layer_result(y, y16_);
  args.m = m;
  args.record_amax = kind == pass_kind::train;
  args.backward_follows = kind != pass_kind::evaluate;  // no Xᵀ copy for an evaluation
  args.statistics = statistics_ && kind == pass_kind::train;
  layer(linear, kind).forward(args, stream);  // it marks its stages (set_profile)
  stage_result(y, y16_, mn, stream);
}

void device_linears::backward(std::size_t linear, linear_output dx, float* dw, linear_input dy,
                              linear_input x, const float* w, const __nv_bfloat16* w16, int m,
                              gradient_mode mode, cudaStream_t stream) {
  const int k = int(features_.at(linear).in), n = int(features_.at(linear).out);
  const std::size_t mk = std::size_t(m) * std::size_t(k), mn = std::size_t(m) * std::size_t(n);
  if (fp32_) {
    float* dx32 = fp32_operand(dx, linear, "dx");
    const float* dy32 = fp32_operand(dy, linear, "dy");
    const float* x32 = fp32_operand(x, linear, "x");
    mark(phase::linear_gemms);
    // dx[M, K] = dy[M, N] . W[N, K]  (W read as its transpose [K, N]).
    batched_gemm(cublas_.get(), gemm_mode::fp32, {dy32, m, n}, {w, n, k, true}, dx32, 0, 1, stream);
    // dW[N, K] = dy^T[N, M] . x[M, K]; accumulating: the product, then added to the gradient.
    const bool add = mode == gradient_mode::accumulate;
    batched_gemm(cublas_.get(), gemm_mode::fp32, {dy32, m, n, true}, {x32, m, k, true},
                 add ? wgrad_scratch_.data() : dw, 0, 1, stream);
    if (add)
      residual_forward(dw, dw, wgrad_scratch_.data(), std::size_t(n) * std::size_t(k), storage::fp32, stream);
    return;
  }
  const linear_bf16_operands& planned = bf16_operands_.at(linear);
  check_planned(dx, planned.dx, linear, "dx");
  check_planned(x, planned.x, linear, "x");
  check_planned(dy, planned.dy, linear, "dy");
  fp8::cuda::linear_layer& chosen = layer(linear, pass_kind::train);
  fp8::cuda::linear_layer::backward_args args;
  const taken_operand in = take_operand(dy, linear, fp8::cuda::linear_tensor::dy, pass_kind::train, m, mn,
                                        dy16_, staged_amax_.data() + 1, stream);
  args.dy = in.bf16;
  args.dy_amax = in.amax;
  args.dy_written = in.written;
  // x is read by a BF16 wgrad only (an FP8 or fake wgrad uses the forward's Xᵀ copy, and X's amaxes
  // were recorded in forward): a BF16 x is passed as it is, a float one staged again, and neither is
  // passed when the wgrad does not read it.
  const bool reads_x = wgrad_reads_x(linear);
  if (reads_x && x.is_fp8_written()) {
    // fp8_output_of offers codes only to layers whose every class of X is FP8.
    throw std::logic_error("trainer::cuda::device_linears::backward: layer " + std::to_string(linear) +
                           "'s wgrad reads X in BF16, but its producer wrote X as FP8 codes");
  }
  if (reads_x) args.x = layer_operand(x, x16_, mk, stream);
  args.w = w16;
  args.dx = layer_result(dx, dx16_);
  args.dw = dw;
  args.m = m;
  args.accumulate = mode == gradient_mode::accumulate;  // else beta = 0: nothing to clear or read
  args.record_amax = true;
  args.statistics = statistics_;
  chosen.backward(args, stream);  // it marks its stages (set_profile)
  stage_result(dx, dx16_, mk, stream);
}

linear_memory device_linears::memory() const {
  linear_memory out;
  out.layers = !fp32_;
  for (const auto* group : {&layers_, &shadow_layers_}) {
    for (const auto& layer : *group) out.own += layer->device_bytes();
  }
  if (workspace_ != nullptr) out.shared = workspace_->size();
  return out;
}

bool device_linears::wgrad_reads_x(std::size_t linear) const {
  return fp32_ || !fp8::cuda::casts_to_fp8(layers_.at(linear)->config().precision.wgrad);
}

device_linears::taken_operand device_linears::take_operand(linear_input t, std::size_t linear,
                                                           fp8::cuda::linear_tensor tensor, pass_kind kind,
                                                           int m, std::size_t count,
                                                           device_buffer<std::uint16_t>& scratch,
                                                           float* amax_scratch, cudaStream_t stream) {
  if (t.is_fp8_written() || stage_codes(t, linear, tensor, kind, m, count, stream)) {
    ++producer_calls_.fp8_codes;
    return {nullptr, nullptr, true};  // its codes are in the layer's copy already
  }
  // A staged operand's amax from its staging copy; a BF16 one's from the model's kernel that wrote it.
  float* staged_amax = amax_slot(linear, tensor, amax_scratch);
  const __nv_bfloat16* bf16 = layer_operand(t, scratch, count, stream, staged_amax);
  const float* amax = t.staged() ? staged_amax : t.amax();
  if (amax != nullptr) ++producer_calls_.amaxes;
  return {bf16, amax, false};
}

bool device_linears::stage_codes(linear_input t, std::size_t linear, fp8::cuda::linear_tensor tensor,
                                 pass_kind kind, int m, std::size_t count, cudaStream_t stream) {
  if (!t.staged()) return false;
  const std::optional<fp8_output> codes = fp8_output_of(linear, tensor, kind, m);
  if (!codes) return false;
  mark(phase::staging);
  to_fp8(*codes, t.floats(), count, stream);
  return true;
}

std::optional<fp8_output> device_linears::fp8_output_of(std::size_t linear, fp8::cuda::linear_tensor tensor,
                                                        pass_kind kind, int m) {
  if (fp32_ || !producer_fp8_ || kind == pass_kind::shadow) return std::nullopt;
  if (statistics_ && kind == pass_kind::train) return std::nullopt;
  fp8::cuda::linear_layer& chosen = layer(linear, kind);
  if (!chosen.takes_fp8_input(tensor)) return std::nullopt;
  const fp8::cuda::linear_layer::fp8_input_target target = chosen.fp8_input(tensor, m);
  fp8_output out{target.codes, target.scale, nullptr, target.format, target.rows, target.cols};
  if (kind == pass_kind::train) out.amax = target.amax;  // evaluations record none
  return out;
}

void device_linears::drop_weight_copies() {
  for (auto& l : layers_) l->weights_changed();
  for (auto& l : shadow_layers_) l->weights_changed();
}

std::vector<fp8::cuda::linear_statistics> device_linears::read_statistics(cudaStream_t stream) {
  std::vector<fp8::cuda::linear_statistics> out;
  out.reserve(layers_.size());
  for (auto& l : layers_) out.push_back(l->read_statistics(stream));
  return out;
}

device_model::device_model(const parameter_set& host, const std::vector<linear_features>& features,
                           const std::vector<linear_layer_info>& infos, std::int64_t max_tokens,
                           const precision_policy& policy, const fp8::gemm_recipe& recipe, bool with_shadow,
                           cudaStream_t stream, fp8::cuda::device_amax_reducer* amax_reducer,
                           const std::vector<linear_bf16_operands>& bf16_operands)
    : stream_(stream),
      stored_(policy.activation_storage()),
      attention_mode_(policy.other_mode()),
      params_(host),
      weights16_(policy.base == precision::fp32 ? 0 : host.size()),
      linears_(features, infos, max_tokens, policy, recipe, with_shadow, amax_reducer, bf16_operands) {
  // A linear layer is named after its weight tensor (linear_layer_info).
  for (const linear_layer_info& info : infos) linear_weight_.push_back(host.index_of(info.name));
  other_ranges_ = ranges_except(host.specs(), linear_weight_);
  if (!linears_.fp32()) to_bf16(weights16_.data(), params_.compute.data(), params_.size(), stream_);
}

void device_model::weights_updated() {
  if (!linears_.fp32()) {
    for (const parameter_range& r : other_ranges_) {
      from_bf16(params_.compute.data() + r.offset, weights16_.data() + r.offset, r.count, stream_);
    }
  }
  linears_.drop_weight_copies();
}

double device_model::forward(const std::int32_t* inputs, const std::int32_t* targets, pass_kind kind) {
  return record_forward(kind, [&] { return forward_pass(inputs, targets, kind); });
}

void device_model::backward(gradient_mode mode) {
  if (last_forward_ != pass_kind::train) {
    throw std::logic_error(
        std::string("trainer::cuda::device_model::backward: the buffers hold the activations of ") +
        (!last_forward_                          ? "no complete forward pass"
         : *last_forward_ == pass_kind::evaluate ? "an evaluation pass"
                                                 : "a shadow pass") +
        ", not of a training forward: run forward(..., pass_kind::train) first");
  }
  mark(phase::other);
  if (mode == gradient_mode::overwrite) {
    // The linear weights' gradients are written by their wgrads; the rest are added into by kernels.
    for (const parameter_range& r : other_ranges_) {
      FP8_CUDA_CHECK(cudaMemsetAsync(params_.grad.data() + r.offset, 0, r.count * sizeof(float), stream_));
    }
  }
  mode_ = mode;
  backward_done_.assign(linear_weight_.size(), false);
  backward_pass();
  for (std::size_t linear = 0; linear < backward_done_.size(); ++linear) {
    if (!backward_done_[linear]) {
      // Its gradient would keep the last step's values (overwrite) or miss this pass (accumulate).
      throw std::logic_error(
          "trainer::cuda::device_model::backward: the pass ran no backward of linear layer " +
          std::to_string(linear));
    }
  }
}

void device_model::linear_backward(std::size_t linear, linear_output dx, std::size_t weight, linear_input dy,
                                   linear_input x, int m) {
  if (linear >= linear_weight_.size() || linear_weight_[linear] != weight) {
    // An overwriting pass cleared only the other tensors: a gradient written through another layer
    // than its own would be added to stale values.
    throw std::logic_error("trainer::cuda::device_model::linear_backward: linear layer " +
                           std::to_string(linear) + " was given tensor " + std::to_string(weight) +
                           ", not the layer's own weight");
  }
  linears_.backward(linear, dx, grad(weight), dy, x, compute(weight), weight16(weight), m, mode_, stream_);
  backward_done_[linear] = true;
}

const __nv_bfloat16* device_model::weight16(std::size_t tensor) const {
  if (weights16_.size() == 0) return nullptr;  // fp32 runs read the float weights
  return reinterpret_cast<const __nv_bfloat16*>(weights16_.data() + params_.offset(tensor));
}

void device_model::weights_changed() {
  params_.refresh_compute(stored_, stream_);
  if (!linears_.fp32()) to_bf16(weights16_.data(), params_.compute.data(), params_.size(), stream_);
  linears_.drop_weight_copies();
}

std::unique_ptr<device_model> make_device_model(const model_options& shape, int batch, const model& host,
                                                const precision_policy& policy,
                                                const fp8::gemm_recipe& recipe, bool with_shadow,
                                                cudaStream_t stream,
                                                fp8::cuda::device_amax_reducer* amax_reducer,
                                                attention_kernel attention) {
  if (shape.kind == "transformer") {
    return std::make_unique<device_transformer>(shape, batch, host.parameters(), host.linear_layers(), policy,
                                                recipe, with_shadow, stream, amax_reducer, attention);
  }
  if (shape.kind == "mlp") {
    return std::make_unique<device_mlp>(shape, batch, host.parameters(), host.linear_layers(), policy, recipe,
                                        with_shadow, stream, amax_reducer);
  }
  throw fp8::invalid_argument("trainer::cuda::make_device_model: no device form of the model '" + shape.kind +
                              "'");
}

double optimizer_step(device_model& model, const adamw_options& options, float learning_rate, long step,
                      float clip_norm, phase_profile* profile) {
  if (profile != nullptr) profile->mark(phase::optimizer);
  device_parameters& params = model.parameters();
  const double norm = gradient_norm(params, model.stream());
  adamw_fusion fused = model.weights_fusion();
  fused.clip_factor = clip_factor(norm, clip_norm);
  adamw_update(params, options, learning_rate, step, model.stream(), fused);
  model.weights_updated();
  if (model.records_scaling()) model.scaling().end_step(model.stream());
  if (profile != nullptr) profile->stop();
  return norm;
}

}  // namespace trainer::cuda
