// An FP8 (E4M3) key/value cache for autoregressive decoding.
//
// Scale policy: every scale is fixed before the first token (from calibration: the amax of the keys
// and values each head produced on calibration text), one per (layer, head) or one per layer. A
// token is quantized once, when it is appended, and never again: appending does not touch what is
// stored, and a stored token reads back the same whatever comes after it. Values beyond a head's
// calibrated range saturate to +-448 / scale; the cache counts such appends (saturated_appends())
// so a server can notice calibration that no longer fits its traffic.
//
// Layout per layer: keys and values [heads, capacity, head_dim], so one head's history is
// contiguous (what an attention kernel reads); scales [heads] (per head) or [1] (per tensor).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "../quantize.hpp"

namespace fp8 {
namespace inference {

enum class kv_scale_granularity { per_tensor, per_head };

inline const char* to_string(kv_scale_granularity g) {
  return g == kv_scale_granularity::per_tensor ? "per-tensor" : "per-head";
}

class fp8_kv_cache {
 public:
  // k_scales, v_scales: layers x heads entries (per head) or layers entries (per tensor), each a
  // positive finite scale (448 / calibrated amax).
  fp8_kv_cache(int layers, int heads, int head_dim, int capacity, kv_scale_granularity granularity,
               std::vector<float> k_scales, std::vector<float> v_scales)
      : layers_(layers),
        heads_(heads),
        head_dim_(head_dim),
        capacity_(capacity),
        granularity_(granularity),
        k_scales_(std::move(k_scales)),
        v_scales_(std::move(v_scales)) {
    if (layers <= 0 || heads <= 0 || head_dim <= 0 || capacity <= 0) {
      throw invalid_argument(
          "fp8::inference::fp8_kv_cache: layers, heads, head_dim and capacity must be positive");
    }
    const std::size_t want =
        std::size_t(layers) * (granularity == kv_scale_granularity::per_head ? std::size_t(heads) : 1);
    if (k_scales_.size() != want || v_scales_.size() != want) {
      throw invalid_argument("fp8::inference::fp8_kv_cache: expected " + std::to_string(want) +
                             " key and value scales (" + to_string(granularity) + "); got " +
                             std::to_string(k_scales_.size()) + " and " + std::to_string(v_scales_.size()));
    }
    for (const std::vector<float>* scales : {&k_scales_, &v_scales_}) {
      for (float s : *scales) {
        if (!(s > 0.0f) || !(s < 3.4e38f))
          throw invalid_argument("fp8::inference::fp8_kv_cache: a scale is not positive and finite");
      }
    }
    const std::size_t per_layer = std::size_t(heads) * std::size_t(capacity) * std::size_t(head_dim);
    keys_.assign(std::size_t(layers) * per_layer, 0);
    values_.assign(keys_.size(), 0);
    lengths_.assign(std::size_t(layers), 0);
  }

  int layers() const { return layers_; }
  int heads() const { return heads_; }
  int head_dim() const { return head_dim_; }
  int capacity() const { return capacity_; }
  int length(int layer) const { return lengths_[std::size_t(layer)]; }
  kv_scale_granularity granularity() const { return granularity_; }
  float k_scale(int layer, int head) const { return k_scales_[scale_index(layer, head)]; }
  float v_scale(int layer, int head) const { return v_scales_[scale_index(layer, head)]; }
  std::uint64_t saturated_appends() const { return saturated_; }

  // Stored bytes: codes for the full capacity plus the float scales.
  std::size_t bytes() const {
    return keys_.size() + values_.size() + (k_scales_.size() + v_scales_.size()) * sizeof(float);
  }

  // Appends one token's keys and values of `layer`: k and v are [heads, head_dim]. Throws
  // fp8::invalid_argument when the layer is full.
  void append(int layer, const float* k, const float* v) {
    check_layer(layer, "append");
    int& length = lengths_[std::size_t(layer)];
    if (length >= capacity_) {
      throw invalid_argument("fp8::inference::fp8_kv_cache::append: layer " + std::to_string(layer) +
                             " is full (" + std::to_string(capacity_) + " tokens)");
    }
    for (int h = 0; h < heads_; ++h) {
      const std::size_t at = offset(layer, h, length);
      const std::size_t from = std::size_t(h) * std::size_t(head_dim_);
      const float k_amax = fp8::quantize(k + from, std::size_t(head_dim_), fp8_format::e4m3,
                                         k_scale(layer, h), keys_.data() + at);
      const float v_amax = fp8::quantize(v + from, std::size_t(head_dim_), fp8_format::e4m3,
                                         v_scale(layer, h), values_.data() + at);
      if (!(k_amax * k_scale(layer, h) <= 448.0f) || !(v_amax * v_scale(layer, h) <= 448.0f)) ++saturated_;
    }
    ++length;
  }

  // Dequantizes tokens [0, length) of one head: keys and values [length, head_dim] each.
  void read(int layer, int head, float* keys, float* values) const {
    check_layer(layer, "read");
    const std::size_t count = std::size_t(length(layer)) * std::size_t(head_dim_);
    const std::size_t at = offset(layer, head, 0);
    fp8::dequantize(keys_.data() + at, count, fp8_format::e4m3, 1.0f / k_scale(layer, head), keys);
    fp8::dequantize(values_.data() + at, count, fp8_format::e4m3, 1.0f / v_scale(layer, head), values);
  }

  // The raw codes of one token of one head (for tests and for tools that export the cache).
  const std::uint8_t* key_codes(int layer, int head, int token) const {
    return keys_.data() + offset(layer, head, token);
  }
  const std::uint8_t* value_codes(int layer, int head, int token) const {
    return values_.data() + offset(layer, head, token);
  }

  // Forgets every token (the scales stay).
  void clear() { std::fill(lengths_.begin(), lengths_.end(), 0); }

 private:
  std::size_t scale_index(int layer, int head) const {
    return granularity_ == kv_scale_granularity::per_head
               ? std::size_t(layer) * std::size_t(heads_) + std::size_t(head)
               : std::size_t(layer);
  }
  std::size_t offset(int layer, int head, int token) const {
    return ((std::size_t(layer) * std::size_t(heads_) + std::size_t(head)) * std::size_t(capacity_) +
            std::size_t(token)) *
           std::size_t(head_dim_);
  }
  void check_layer(int layer, const char* what) const {
    if (layer < 0 || layer >= layers_) {
      throw invalid_argument(std::string("fp8::inference::fp8_kv_cache::") + what + ": layer " +
                             std::to_string(layer) + " is outside [0, " + std::to_string(layers_) + ")");
    }
  }

  int layers_, heads_, head_dim_, capacity_;
  kv_scale_granularity granularity_;
  std::vector<float> k_scales_, v_scales_;
  std::vector<std::uint8_t> keys_, values_;  // [layers, heads, capacity, head_dim]
  std::vector<int> lengths_;
  std::uint64_t saturated_ = 0;
};

}  // namespace inference
}  // namespace fp8
