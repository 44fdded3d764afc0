// Quantization that writes both the row-major FP8 copy and the transposed one (the backward pass's
// dgrad and wgrad GEMMs read X^T and dY^T in cuBLASLt's TN layout), with scales for each copy.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../scaling/fp8_format.hpp"
#include "../scaling/granularity.hpp"
#include "../scaling/recipe.hpp"
#include "../scaling/scale.hpp"
#include "blockwise.hpp"
#include "checks.hpp"
#include "isa.hpp"
#include "kernels.hpp"
#include "per_tensor.hpp"

namespace fp8 {
namespace detail {

// Rows of the input handled together: their codes (at most this many rows x cols bytes) stay in cache
// while they are transposed.
inline constexpr std::size_t transpose_panel_rows = 64;

// dst[j * dst_stride + dst_col + i] = src[i * cols + j] for i < height, j < cols.
inline void transpose_codes(const std::uint8_t* src, std::size_t height, std::size_t cols, std::uint8_t* dst,
                            std::size_t dst_stride, std::size_t dst_col) noexcept {
  constexpr std::size_t column_block = 64;
  for (std::size_t j0 = 0; j0 < cols; j0 += column_block) {
    const std::size_t j1 = std::min(cols, j0 + column_block);
    for (std::size_t j = j0; j < j1; ++j) {
      std::uint8_t* column = dst + j * dst_stride + dst_col;
      for (std::size_t i = 0; i < height; ++i) column[i] = src[i * cols + j];
    }
  }
}

// Given-scale cast of the whole matrix into out and out_t in one read of the input.
template <class Ops, class T>
float quantize_transpose_with(const T* in, std::size_t rows, std::size_t cols, fp8_format format, float scale,
                              std::uint8_t* out, std::uint8_t* out_t) {
  std::uint32_t bits = 0;
  visit_format(format, [&](auto descriptor) {
    using format_t = decltype(descriptor);
    for (std::size_t s0 = 0; s0 < rows; s0 += transpose_panel_rows) {
      const std::size_t s1 = std::min(rows, s0 + transpose_panel_rows);
      for (std::size_t r = s0; r < s1; ++r) {
        bits = max_bits(bits, cast_span<Ops, format_t, true>(in + r * cols, cols, scale, out + r * cols));
      }
      transpose_codes(out + s0 * cols, s1 - s0, cols, out_t, rows, s0);
    }
  });
  return amax_from_bits(bits);
}

// The transposed copy of a column-wise recipe (the transpose's rows are the input's columns): for
// each panel of input rows that one transposed block spans (all rows for per_row, 128 for 1x128 tiles,
// 32 for MX), the per-column amaxes, then per-column scales from `make_scales(column_bits, panel,
// column_scales)`, then the cast with those scales, transposed panel by panel. Every one of the
// `panels` panels gets its scales, even an empty one (per_row of a matrix with no rows still has one
// panel, whose amaxes are 0 and whose scales are 1, as quantize() of the transpose writes them).
template <class Ops, class T, class MakeScales>
void transposed_copy_with(const T* in, std::size_t rows, std::size_t cols, fp8_format format,
                          std::size_t panel_rows, std::size_t panels, std::uint8_t* out_t,
                          MakeScales&& make_scales) {
  std::vector<std::uint32_t> column_bits(cols);
  std::vector<float> column_scales(cols);
  std::vector<std::uint8_t> codes(transpose_panel_rows * cols);
  visit_format(format, [&](auto descriptor) {
    using format_t = decltype(descriptor);
    for (std::size_t panel = 0; panel < panels; ++panel) {
      const std::size_t p0 = std::min(rows, panel * panel_rows);
      const std::size_t p1 = std::min(rows, p0 + panel_rows);
      std::fill(column_bits.begin(), column_bits.end(), 0u);
      for (std::size_t r = p0; r < p1; ++r) column_amax_span<Ops>(in + r * cols, cols, column_bits.data());
      make_scales(column_bits, panel, column_scales);
      for (std::size_t s0 = p0; s0 < p1; s0 += transpose_panel_rows) {
        const std::size_t s1 = std::min(p1, s0 + transpose_panel_rows);
        for (std::size_t r = s0; r < s1; ++r) {
          cast_span_scales<Ops, format_t>(in + r * cols, cols, column_scales.data(),
                                          codes.data() + (r - s0) * cols);
        }
        transpose_codes(codes.data(), s1 - s0, cols, out_t, rows, s0);
      }
    }
  });
}

template <class Ops, class T>
float quantize_transpose_blocks_with(const T* in, std::size_t rows, std::size_t cols, const quantization& q,
                                     std::uint8_t* out, float* scale_inv, std::uint8_t* out_t,
                                     float* scale_inv_t) {
  const scale_layout layout = make_scale_layout(q.granularity, rows, cols);
  const scale_layout layout_t = make_scale_layout(q.granularity, cols, rows);
  const float fp8_max = max_finite(q.format);
  if (q.granularity == granularity::per_tensor) {
    // One amax for both copies, then one fused pass.
    const float amax = compute_amax_with<Ops>(in, rows * cols);
    const float scale = scale_from_amax_unchecked(amax, fp8_max, q.margin, q.power_of_two_scales, 1.0f);
    scale_inv[0] = scale_inv_t[0] = 1.0f / scale;
    quantize_transpose_with<Ops>(in, rows, cols, q.format, scale, out, out_t);
    return amax;
  }
  const float amax = quantize_blocks_with<Ops>(in, rows, cols, q, out, scale_inv);
  std::fill(scale_inv_t, scale_inv_t + layout_t.count, 0.0f);
  if (q.granularity == granularity::block_128x128) {
    // A 128x128 block of X^T is a transposed block of X: same amax, same scale, transposed codes.
    for (std::size_t i = 0; i < layout.grid_rows; ++i) {
      for (std::size_t j = 0; j < layout.grid_cols; ++j)
        scale_inv_t[layout_t.index(j, i)] = scale_inv[layout.index(i, j)];
    }
    for (std::size_t s0 = 0; s0 < rows; s0 += transpose_panel_rows) {
      transpose_codes(out + s0 * cols, std::min(rows, s0 + transpose_panel_rows) - s0, cols, out_t, rows, s0);
    }
    return amax;
  }
  // per_row and 1x128 tiles of X^T: columns of X, whole or in 128-row panels.
  const std::size_t panel_rows = layout_t.block_cols;
  transposed_copy_with<Ops>(
      in, rows, cols, q.format, panel_rows, layout_t.grid_cols, out_t,
      [&](const std::vector<std::uint32_t>& bits, std::size_t panel, std::vector<float>& scales) {
        for (std::size_t j = 0; j < bits.size(); ++j) {
          scales[j] = scale_from_amax_unchecked(amax_from_bits(bits[j]), fp8_max, q.margin,
                                                q.power_of_two_scales, 1.0f);
          scale_inv_t[layout_t.index(j, panel)] = 1.0f / scales[j];
        }
      });
  return amax;
}

template <class Ops, class T>
float quantize_transpose_mx_with(const T* in, std::size_t rows, std::size_t cols, const quantization& q,
                                 std::uint8_t* out, std::uint8_t* scale_e8m0, std::uint8_t* out_t,
                                 std::uint8_t* scale_e8m0_t) {
  const scale_layout layout_t = make_scale_layout(q.granularity, cols, rows);
  const float amax = quantize_mx_with<Ops>(in, rows, cols, q, out, scale_e8m0);
  transposed_copy_with<Ops>(
      in, rows, cols, q.format, layout_t.block_cols, layout_t.grid_cols, out_t,
      [&](const std::vector<std::uint32_t>& bits, std::size_t panel, std::vector<float>& scales) {
        for (std::size_t j = 0; j < bits.size(); ++j) {
          const std::uint8_t code = mx_scale_code(amax_from_bits(bits[j]), q.format);
          scales[j] = mx_element_scale(code);
          scale_e8m0_t[layout_t.index(j, panel)] = code;
        }
      });
  return amax;
}

template <class T>
void check_transpose_arguments(const T* in, std::size_t rows, std::size_t cols, const void* out,
                               const void* out_t, const void* scales, const void* scales_t,
                               const quantization& q, bool mx_scales) {
  constexpr const char* function = "fp8::quantize_transpose";
  check_matrix_arguments(in, out, scales, rows, cols, q, function, mx_scales, true);
  check_pointer(out_t, rows * cols, function, "out_t");
  check_pointer(scales_t, scale_count(q.granularity, cols, rows), function, "the transposed scale buffer");
}

}  // namespace detail

inline namespace FP8_QUANTIZE_ABI_NAMESPACE {

// Delayed (given-scale) cast of a rows x cols matrix into out (rows x cols) and out_t (cols x rows,
// out_t[j * rows + i] = out[i * cols + j]), in one read of the input; returns the amax. Both copies
// use `scale` (their scale_inv is 1 / scale).
template <class T>
float quantize_transpose(const T* in, std::size_t rows, std::size_t cols, fp8_format format, float scale,
                         std::uint8_t* out, std::uint8_t* out_t) {
  constexpr const char* function = "fp8::quantize_transpose";
  detail::static_check_element<T>();
  const std::size_t count = detail::checked_size(rows, cols, function);
  detail::check_pointer(in, count, function, "in");
  detail::check_pointer(out, count, function, "out");
  detail::check_pointer(out_t, count, function, "out_t");
  detail::check_format(format, function);
  detail::check_scale_argument(scale, function, "scale");
  return detail::quantize_transpose_with<detail::simd_ops>(in, rows, cols, format, scale, out, out_t);
}

// Current scaling into both copies: out and scale_inv exactly as quantize(in, rows, cols, q, ...), and
// out_t / scale_inv_t exactly as quantize() of the transposed matrix (cols x rows) would produce them:
// the transpose's rows are the input's columns, so per-row and 1x128 scales of the transposed copy
// come from columns of the input (what Transformer Engine calls column-wise scaling). Per-tensor and
// 128x128 scales are shared (the same blocks, transposed). Returns the amax of the matrix.
template <class T>
float quantize_transpose(const T* in, std::size_t rows, std::size_t cols, const quantization& q,
                         std::uint8_t* out, float* scale_inv, std::uint8_t* out_t, float* scale_inv_t) {
  detail::check_transpose_arguments(in, rows, cols, out, out_t, scale_inv, scale_inv_t, q, false);
  return detail::quantize_transpose_blocks_with<detail::simd_ops>(in, rows, cols, q, out, scale_inv, out_t,
                                                                  scale_inv_t);
}

// MX into both copies (1x32 blocks along the rows of each copy, i.e. 32x1 blocks of the input for out_t).
template <class T>
float quantize_transpose(const T* in, std::size_t rows, std::size_t cols, const quantization& q,
                         std::uint8_t* out, std::uint8_t* scale_e8m0, std::uint8_t* out_t,
                         std::uint8_t* scale_e8m0_t) {
  detail::check_transpose_arguments(in, rows, cols, out, out_t, scale_e8m0, scale_e8m0_t, q, true);
  return detail::quantize_transpose_mx_with<detail::simd_ops>(in, rows, cols, q, out, scale_e8m0, out_t,
                                                              scale_e8m0_t);
}

}  // namespace FP8_QUANTIZE_ABI_NAMESPACE
}  // namespace fp8
