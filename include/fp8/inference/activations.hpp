// Activation quantization for W8A8 inference, and the epilogue of an FP8 GEMM with row-wise scales.
//  - static:  one scale per tensor, fixed by calibration (see observers.hpp); the cast is one pass.
//  - dynamic: one scale per token (row), from the row's own amax at run time (current scaling).
// Either way the GEMM multiplies unscaled FP8 values and the epilogue applies
//   y[i, j] *= x_scale_inv[i or 0] * w_scale_inv[j or 0]
// which is what cuBLASLt computes with OUTER_VEC_32F (row-wise) or SCALAR_32F scales.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../error.hpp"
#include "../quantize.hpp"

namespace fp8 {
namespace inference {

enum class activation_scaling { per_tensor_static, per_token_dynamic };

// x [rows, cols] -> codes with the calibrated `scale` (values beyond 448 / scale saturate).
// Returns the amax of x, so callers can count how often calibration was exceeded.
template <class T>
float quantize_static(const T* x, std::size_t rows, std::size_t cols, float scale, std::uint8_t* codes,
                      fp8_format format = fp8_format::e4m3) {
  return fp8::quantize(x, rows * cols, format, scale, codes);
}

// x [rows, cols] -> codes with one scale per row from the row's amax; scale_inv [rows].
template <class T>
float quantize_per_token(const T* x, std::size_t rows, std::size_t cols, std::uint8_t* codes,
                         float* scale_inv, fp8_format format = fp8_format::e4m3) {
  fp8::quantization recipe;
  recipe.format = format;
  recipe.granularity = fp8::granularity::per_row;
  return fp8::quantize(x, rows, cols, recipe, codes, scale_inv);
}

// The FP8 GEMM epilogue: y[m, n] *= a_scale_inv[i] * b_scale_inv[j], where each scale vector holds
// either one entry (per tensor: a_count or b_count = 1) or one per row of y (a) / column of y (b).
inline void apply_scales(float* y, std::size_t m, std::size_t n, const float* a_scale_inv,
                         std::size_t a_count, const float* b_scale_inv, std::size_t b_count) {
  if ((a_count != 1 && a_count != m) || (b_count != 1 && b_count != n)) {
    throw invalid_argument(
        "fp8::inference::apply_scales: scale counts must be 1 or match the output's rows / columns");
  }
  for (std::size_t i = 0; i < m; ++i) {
    const float a = a_scale_inv[a_count == 1 ? 0 : i];
    float* row = y + i * n;
    if (b_count == 1) {
      const float s = a * b_scale_inv[0];
      for (std::size_t j = 0; j < n; ++j) row[j] *= s;
    } else {
      for (std::size_t j = 0; j < n; ++j) row[j] *= a * b_scale_inv[j];
    }
  }
}

}  // namespace inference
}  // namespace fp8
