// The inference forward pass, layer by layer, mirroring transformer::forward (transformer.cpp).
#include "engine.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "embedding.hpp"
#include "gemm.hpp"
#include "parallel.hpp"
#include "precision.hpp"
#include "rmsnorm.hpp"
#include "swiglu.hpp"

namespace generate {

namespace {

using trainer::storage;

std::vector<float> bf16_copy(const std::vector<float>& values) {
  std::vector<float> copy = values;
  trainer::round_to_bf16(copy.data(), copy.size());
  return copy;
}

prepared_linear prepare(const checkpoint_model& model, const std::string& name, int rows, int cols,
                        weight_mode mode) {
  prepared_linear layer;
  layer.name = name;
  layer.rows = rows;
  layer.cols = cols;
  const std::vector<float>& master = model.weight(name);
  if (mode == weight_mode::bf16) {
    layer.weight = bf16_copy(master);
    return layer;
  }
  // The FP8 weight is made from the BF16 weight the trainer's forward reads, as a server quantizes
  // the BF16 checkpoint it is given.
  const std::vector<float> bf16 = bf16_copy(master);
  const auto granularity = mode == weight_mode::fp8_tensor ? fp8::inference::weight_granularity::per_tensor
                                                           : fp8::inference::weight_granularity::per_channel;
  layer.quantized =
      fp8::inference::quantize_weight(bf16.data(), std::size_t(rows), std::size_t(cols), granularity);
  layer.weight.resize(bf16.size());
  layer.quantized->decode_unscaled(layer.weight.data());
  return layer;
}

// out[i] = a[i] + b[i], stored in BF16 (transformer.cpp's residual_forward).
void residual_add(float* out, const float* a, const float* b, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
  trainer::round_to_bf16(out, count);
}

}  // namespace

calibration_scales scales_from(const calibration_observers& observed, const quant_config& config) {
  calibration_scales scales;
  for (const auto& histogram : observed.linear_inputs) {
    const float clip = fp8::inference::calibrated_clip(histogram, config.method, config.percentile);
    scales.linear_input.push_back(fp8::inference::static_scale(clip));
  }
  // Keys and values are not clipped: a saturated key changes which token a head attends to.
  const std::size_t entries = observed.keys.size();
  scales.keys.resize(entries);
  scales.values.resize(entries);
  for (std::size_t i = 0; i < entries; ++i) {
    scales.keys[i] = observed.keys[i].scale();
    scales.values[i] = observed.values[i].scale();
  }
  return scales;
}

engine::engine(const checkpoint_model& model, const quant_config& config, const calibration_scales* scales)
    : shape_(model.shape), config_(config) {
  config_.validate();
  const model_shape& s = shape_;
  const int C = s.channels, F = s.hidden, H = s.heads, D = s.head_dim(), T = s.context;
  if (config_.needs_calibration()) {
    if (scales == nullptr)
      throw std::invalid_argument("static activation scales and an FP8 KV cache need calibration scales");
    if (scales->linear_input.size() != std::size_t(4 * s.layers) ||
        scales->keys.size() != std::size_t(s.layers * H) ||
        scales->values.size() != std::size_t(s.layers * H)) {
      throw std::invalid_argument("calibration scales do not match the model's layers and heads");
    }
  }
  rope_ = trainer::make_rope_table(T, D);
  wte_ = bf16_copy(model.weight("wte"));
  for (int l = 0; l < s.layers; ++l) {
    const std::string prefix = "blocks." + std::to_string(l) + ".";
    attn_norms_.push_back(bf16_copy(model.weight(prefix + "attn_norm")));
    mlp_norms_.push_back(bf16_copy(model.weight(prefix + "mlp_norm")));
    linears_.push_back(prepare(model, prefix + "wqkv", 3 * C, C, config_.weights));
    linears_.push_back(prepare(model, prefix + "wo", C, C, config_.weights));
    linears_.push_back(prepare(model, prefix + "w_gate_up", 2 * F, C, config_.weights));
    linears_.push_back(prepare(model, prefix + "w_down", C, F, config_.weights));
  }
  final_norm_ = bf16_copy(model.weight("final_norm"));
  head_ = prepare(model, "lm_head", s.vocab, C, weight_mode::bf16);
  if (config_.activations == activation_mode::static_scale) {
    for (std::size_t i = 0; i < linears_.size(); ++i) linears_[i].input_scale = scales->linear_input[i];
  }
  if (config_.kv == kv_mode::fp8) {
    k_scales_ = scales->keys;
    v_scales_ = scales->values;
    std::vector<float> k = k_scales_, v = v_scales_;
    if (config_.kv_scales == fp8::inference::kv_scale_granularity::per_tensor) {
      // One scale per layer: the smallest head scale (the largest amax) of the layer.
      k.assign(std::size_t(s.layers), 0.0f);
      v.assign(std::size_t(s.layers), 0.0f);
      for (int l = 0; l < s.layers; ++l) {
        const auto first = std::size_t(l * H), last = std::size_t((l + 1) * H);
        k[std::size_t(l)] = *std::min_element(k_scales_.begin() + std::ptrdiff_t(first),
                                              k_scales_.begin() + std::ptrdiff_t(last));
        v[std::size_t(l)] = *std::min_element(v_scales_.begin() + std::ptrdiff_t(first),
                                              v_scales_.begin() + std::ptrdiff_t(last));
        for (std::size_t h = first; h < last; ++h) {
          k_scales_[h] = k[std::size_t(l)];
          v_scales_[h] = v[std::size_t(l)];
        }
      }
    }
    fp8_cache_ = std::make_unique<fp8::inference::fp8_kv_cache>(s.layers, H, D, T, config_.kv_scales, k, v);
  } else {
    const std::size_t size = std::size_t(s.layers) * std::size_t(H) * std::size_t(T) * std::size_t(D);
    bf16_keys_.assign(size, 0.0f);
    bf16_values_.assign(size, 0.0f);
  }
  const std::size_t NC = std::size_t(T) * std::size_t(C);
  residual_.resize(NC);
  ln_.resize(NC);
  rstd_.resize(std::size_t(T));
  qkv_.resize(3 * NC);
  atty_.resize(NC);
  proj_.resize(NC);
  gate_up_.resize(std::size_t(T) * 2 * std::size_t(F));
  swiglu_.resize(std::size_t(T) * std::size_t(F));
  xq_.resize(std::size_t(T) * std::size_t(std::max(C, F)));
  codes_.resize(xq_.size());
  row_scales_.resize(std::size_t(T));
  lnf_.resize(NC);
}

void engine::reset() {
  length_ = 0;
  if (fp8_cache_) fp8_cache_->clear();
}

void engine::observe(calibration_observers* observers) {
  observers_ = observers;
  if (observers_ != nullptr) {
    observers_->linear_inputs.resize(linears_.size());
    observers_->keys.resize(std::size_t(shape_.layers * shape_.heads));
    observers_->values.resize(observers_->keys.size());
  }
}

const std::vector<float>& engine::norm(int layer, bool mlp) const {
  return mlp ? mlp_norms_[std::size_t(layer)] : attn_norms_[std::size_t(layer)];
}

const std::vector<float>& engine::kv_scales(bool values) const { return values ? v_scales_ : k_scales_; }

std::size_t engine::linear_weight_bytes() const {
  std::size_t bytes = 0;
  for (const prepared_linear& l : linears_) {
    bytes += l.quantized ? l.quantized->bytes() : l.weight.size() * 2;
    if (config_.activations == activation_mode::static_scale) bytes += sizeof(float);
  }
  return bytes + head_.weight.size() * 2;
}

std::size_t engine::other_weight_bytes() const {
  std::size_t bytes = wte_.size() * 2 + final_norm_.size() * 4;
  for (int l = 0; l < shape_.layers; ++l)
    bytes += (attn_norms_[std::size_t(l)].size() + mlp_norms_[std::size_t(l)].size()) * 4;
  return bytes;
}

std::size_t engine::kv_cache_bytes() const {
  if (fp8_cache_) return fp8_cache_->bytes();
  return (bf16_keys_.size() + bf16_values_.size()) * 2;
}

void engine::linear(const prepared_linear& layer, int linear_index, const float* x, int n, float* y) {
  const std::size_t count = std::size_t(n) * std::size_t(layer.cols);
  if (observers_ != nullptr && linear_index >= 0)
    observers_->linear_inputs[std::size_t(linear_index)].observe(x, count);
  trainer::gemm_matrix a{x, n, layer.cols};
  const trainer::gemm_matrix b{layer.weight.data(), layer.rows, layer.cols};
  float input_scale_inv = 1.0f;
  const float* a_scales = &input_scale_inv;
  std::size_t a_count = 1;
  if (layer.quantized && config_.activations != activation_mode::bf16) {
    if (config_.activations == activation_mode::dynamic) {
      fp8::inference::quantize_per_token(x, std::size_t(n), std::size_t(layer.cols), codes_.data(),
                                         row_scales_.data());
      a_scales = row_scales_.data();
      a_count = std::size_t(n);
    } else {
      fp8::inference::quantize_static(x, std::size_t(n), std::size_t(layer.cols), layer.input_scale,
                                      codes_.data());
      input_scale_inv = 1.0f / layer.input_scale;
    }
    fp8::dequantize(codes_.data(), count, fp8::fp8_format::e4m3, 1.0f, xq_.data());  // exact FP8 values
    a.data = xq_.data();
  }
  trainer::float_gemm(a, b, y, false);
  if (layer.quantized) {
    const auto& w = layer.quantized->scale_inv;
    fp8::inference::apply_scales(y, std::size_t(n), std::size_t(layer.rows), a_scales, a_count, w.data(),
                                 w.size());
  }
  trainer::round_to_bf16(y, std::size_t(n) * std::size_t(layer.rows));
}

void engine::attention(int layer, const float* qkv, int n, float* out) {
  const int C = shape_.channels, H = shape_.heads, D = shape_.head_dim(), T = shape_.context;
  const int start = length_, total = length_ + n;
  const std::size_t head_stride = std::size_t(T) * std::size_t(D);
  std::vector<float> q(std::size_t(H) * std::size_t(n) * std::size_t(D));                         // [H, n, D]
  std::vector<float> k_token(static_cast<std::size_t>(C)), v_token(static_cast<std::size_t>(C));  // [H, D]
  for (int t = 0; t < n; ++t) {
    const float* token = qkv + std::size_t(t) * 3 * std::size_t(C);
    for (int h = 0; h < H; ++h) {
      float* qh = q.data() + (std::size_t(h) * std::size_t(n) + std::size_t(t)) * std::size_t(D);
      float* kh = k_token.data() + std::size_t(h * D);
      float* vh = v_token.data() + std::size_t(h * D);
      for (int d = 0; d < D; ++d) {
        qh[d] = token[h * D + d];
        kh[d] = token[C + h * D + d];
        vh[d] = token[2 * C + h * D + d];
      }
      trainer::rope_forward(qh, rope_, start + t);
      trainer::rope_forward(kh, rope_, start + t);
      trainer::round_to_bf16(qh, std::size_t(D));  // q and k are stored in BF16 after the rotation
      trainer::round_to_bf16(kh, std::size_t(D));
      if (observers_ != nullptr) {
        const std::size_t at = std::size_t(layer * H + h);
        observers_->keys[at].observe(kh, std::size_t(D));
        observers_->values[at].observe(vh, std::size_t(D));
      }
    }
    if (fp8_cache_) {
      fp8_cache_->append(layer, k_token.data(), v_token.data());
    } else {
      for (int h = 0; h < H; ++h) {
        const std::size_t at = (std::size_t(layer) * std::size_t(H) + std::size_t(h)) * head_stride +
                               std::size_t(start + t) * std::size_t(D);
        std::copy_n(k_token.data() + h * D, D, bf16_keys_.data() + at);
        std::copy_n(v_token.data() + h * D, D, bf16_values_.data() + at);
      }
    }
  }

  const float scale = 1.0f / std::sqrt(float(D));
  FP8_TRAINER_PARALLEL_FOR
  for (int h = 0; h < H; ++h) {
    std::vector<float> keys, values;
    const float* K = nullptr;
    const float* V = nullptr;
    if (fp8_cache_) {
      keys.resize(std::size_t(total) * std::size_t(D));
      values.resize(keys.size());
      fp8_cache_->read(layer, h, keys.data(), values.data());
      K = keys.data();
      V = values.data();
    } else {
      const std::size_t at = (std::size_t(layer) * std::size_t(H) + std::size_t(h)) * head_stride;
      K = bf16_keys_.data() + at;
      V = bf16_values_.data() + at;
    }
    std::vector<float> p(std::size_t(n) * std::size_t(total));  // [n, total] scores, then probabilities
    const float* qh = q.data() + std::size_t(h) * std::size_t(n) * std::size_t(D);
    trainer::float_gemm({qh, n, D}, {K, total, D}, p.data(), false);
    for (int i = 0; i < n; ++i) {
      float* row = p.data() + std::size_t(i) * std::size_t(total);
      const int last = start + i;  // causal: position start + i sees positions 0 .. start + i
      float row_max = -std::numeric_limits<float>::infinity();
      for (int j = 0; j <= last; ++j) row_max = std::max(row_max, row[j] * scale);
      float sum = 0.0f;
      for (int j = 0; j <= last; ++j) {
        row[j] = std::exp(row[j] * scale - row_max);
        sum += row[j];
      }
      for (int j = 0; j <= last; ++j) row[j] /= sum;
      for (int j = last + 1; j < total; ++j) row[j] = 0.0f;
    }
    trainer::round_to_bf16(p.data(), p.size());
    std::vector<float> y(std::size_t(n) * std::size_t(D));
    trainer::gemm_call values_call;
    values_call.mode = trainer::gemm_mode::bf16;
    values_call.a = {p.data(), n, total};
    values_call.b = {V, total, D, /*transposed=*/true};
    values_call.c = y.data();
    values_call.out = storage::bf16;
    trainer::gemm(values_call);
    for (int t = 0; t < n; ++t) {
      std::copy_n(y.data() + std::size_t(t) * std::size_t(D), D,
                  out + std::size_t(t) * std::size_t(C) + std::size_t(h * D));
    }
  }
}

void engine::forward(const std::int32_t* tokens, int n, float* logits) {
  const model_shape& s = shape_;
  if (n <= 0 || length_ + n > s.context) {
    throw std::invalid_argument("forward: " + std::to_string(n) + " tokens after " + std::to_string(length_) +
                                " do not fit the context of " + std::to_string(s.context));
  }
  for (int t = 0; t < n; ++t) {
    if (tokens[t] < 0 || tokens[t] >= s.vocab)
      throw std::invalid_argument("forward: token " + std::to_string(tokens[t]) +
                                  " is outside the vocabulary");
  }
  const int C = s.channels, F = s.hidden;
  const std::size_t NC = std::size_t(n) * std::size_t(C);
  trainer::embedding_forward(residual_.data(), wte_.data(), tokens, n, C);
  for (int l = 0; l < s.layers; ++l) {
    const prepared_linear* w = linears_.data() + 4 * l;
    const int index = 4 * l;
    trainer::rmsnorm_forward(ln_.data(), rstd_.data(), residual_.data(), attn_norms_[std::size_t(l)].data(),
                             n, C, storage::bf16);
    linear(w[0], index + 0, ln_.data(), n, qkv_.data());
    attention(l, qkv_.data(), n, atty_.data());
    linear(w[1], index + 1, atty_.data(), n, proj_.data());
    residual_add(residual_.data(), residual_.data(), proj_.data(), NC);
    trainer::rmsnorm_forward(ln_.data(), rstd_.data(), residual_.data(), mlp_norms_[std::size_t(l)].data(), n,
                             C, storage::bf16);
    linear(w[2], index + 2, ln_.data(), n, gate_up_.data());
    trainer::swiglu_forward(swiglu_.data(), gate_up_.data(), n, F, storage::bf16);
    linear(w[3], index + 3, swiglu_.data(), n, proj_.data());
    residual_add(residual_.data(), residual_.data(), proj_.data(), NC);
  }
  trainer::rmsnorm_forward(lnf_.data(), rstd_.data(), residual_.data(), final_norm_.data(), n, C,
                           storage::bf16);
  linear(head_, -1, lnf_.data(), n, logits);
  length_ += n;
}

}  // namespace generate
