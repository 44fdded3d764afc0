// Post-training weight quantization: a [rows, cols] row-major weight (rows = output channels, cols =
// the GEMM's K) becomes E4M3 codes with saved inverse scales, one per tensor or one per row (output
// channel, cuBLASLt's OUTER_VEC_32F layout). The cast is the library's current-scaling quantize.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "../quantize.hpp"

namespace fp8 {
namespace inference {

enum class weight_granularity { per_tensor, per_channel };

inline const char* to_string(weight_granularity g) {
  return g == weight_granularity::per_tensor ? "per-tensor" : "per-channel";
}

// An FP8 weight: codes [rows, cols] and scale_inv ([1] per tensor, [rows] per channel), so that
// W[r, c] ~ decode(codes[r, c]) * scale_inv[per tensor ? 0 : r].
struct quantized_weight {
  std::size_t rows = 0;
  std::size_t cols = 0;
  weight_granularity granularity = weight_granularity::per_tensor;
  fp8_format format = fp8_format::e4m3;
  std::vector<std::uint8_t> codes;
  std::vector<float> scale_inv;

  float row_scale_inv(std::size_t row) const {
    return granularity == weight_granularity::per_tensor ? scale_inv[0] : scale_inv[row];
  }
  // Bytes a server keeps: one per element plus the float scales.
  std::size_t bytes() const { return codes.size() + scale_inv.size() * sizeof(float); }

  // out[rows, cols] = the FP8 values without their scales (what a tensor core multiplies).
  void decode_unscaled(float* out) const { fp8::dequantize(codes.data(), codes.size(), format, 1.0f, out); }

  // out[rows, cols] = the weight the codes stand for (decode * scale_inv, rounded once to float).
  void dequantize(float* out) const {
    for (std::size_t r = 0; r < rows; ++r) {
      fp8::dequantize(codes.data() + r * cols, cols, format, row_scale_inv(r), out + r * cols);
    }
  }

  // Checks a weight assembled from saved parts (codes and scales read from a file).
  void validate() const {
    if (codes.size() != rows * cols) {
      throw invalid_argument("fp8::inference::quantized_weight: " + std::to_string(codes.size()) +
                             " codes for a " + std::to_string(rows) + " x " + std::to_string(cols) +
                             " weight");
    }
    const std::size_t want = granularity == weight_granularity::per_tensor ? 1 : rows;
    if (scale_inv.size() != want) {
      throw invalid_argument("fp8::inference::quantized_weight: " + std::to_string(scale_inv.size()) +
                             " scales, expected " + std::to_string(want) + " (" + to_string(granularity) +
                             ")");
    }
    for (float s : scale_inv) {
      if (!(s > 0.0f) || !(s < 3.4e38f))
        throw invalid_argument("fp8::inference::quantized_weight: a scale_inv is not positive and finite");
    }
  }
};

// Quantizes a float weight with scales from its own amax (per tensor or per row): scale = 448 / amax
// (E4M3), scale_inv = 1 / scale; an all-zero row gets scale 1. Throws fp8::invalid_argument on null
// pointers or a NaN/Inf weight (a weight with them cannot be served; the error says so).
template <class T>
quantized_weight quantize_weight(const T* weight, std::size_t rows, std::size_t cols,
                                 weight_granularity granularity, fp8_format format = fp8_format::e4m3) {
  quantized_weight q;
  q.rows = rows;
  q.cols = cols;
  q.granularity = granularity;
  q.format = format;
  q.codes.resize(rows * cols);
  q.scale_inv.resize(granularity == weight_granularity::per_tensor ? 1 : rows);
  fp8::quantization recipe;
  recipe.format = format;
  recipe.granularity = granularity == weight_granularity::per_tensor ? fp8::granularity::per_tensor
                                                                     : fp8::granularity::per_row;
  const float amax = fp8::quantize(weight, rows, cols, recipe, q.codes.data(), q.scale_inv.data());
  if (!(amax < 3.4e38f))
    throw invalid_argument("fp8::inference::quantize_weight: the weight holds NaN or Inf");
  return q;
}

}  // namespace inference
}  // namespace fp8
