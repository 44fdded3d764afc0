// Current-scaling quantization of a row-major matrix at any granularity (per tensor, per row, 1x128
// tiles, 128x128 blocks, MX 1x32 with E8M0 scales): each block's amax, its scale, then its cast.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "../scaling/fp8_format.hpp"
#include "../scaling/granularity.hpp"
#include "../scaling/recipe.hpp"
#include "../scaling/scale.hpp"
#include "checks.hpp"
#include "isa.hpp"
#include "kernels.hpp"

namespace fp8 {
namespace detail {

// Calls f(block_row, block_col, r0, r1, c0, c1) for every block of the layout, rows outermost
// (block (i, j) covers rows [r0, r1) and columns [c0, c1) of the matrix).
template <class Function>
void for_each_block(const scale_layout& layout, Function&& f) {
  for (std::size_t i = 0; i < layout.grid_rows; ++i) {
    const std::size_t r0 = i * layout.block_rows;
    const std::size_t r1 = std::min(layout.rows, r0 + layout.block_rows);
    for (std::size_t j = 0; j < layout.grid_cols; ++j) {
      const std::size_t c0 = j * layout.block_cols;
      const std::size_t c1 = std::min(layout.cols, c0 + layout.block_cols);
      f(i, j, r0, r1, c0, c1);
    }
  }
}

template <class Ops, class T>
std::uint32_t block_amax_bits(const T* in, std::size_t cols, std::size_t r0, std::size_t r1, std::size_t c0,
                              std::size_t c1) noexcept {
  std::uint32_t bits = 0;
  for (std::size_t r = r0; r < r1; ++r) bits = max_bits(bits, amax_span<Ops>(in + r * cols + c0, c1 - c0));
  return bits;
}

template <class Ops, class Format, class T>
void cast_block(const T* in, std::size_t cols, std::size_t r0, std::size_t r1, std::size_t c0, std::size_t c1,
                float scale, std::uint8_t* out) noexcept {
  for (std::size_t r = r0; r < r1; ++r) {
    cast_span<Ops, Format, false>(in + r * cols + c0, c1 - c0, scale, out + r * cols + c0);
  }
}

template <class Ops, class Format, class T>
void decode_block(const std::uint8_t* in, std::size_t cols, std::size_t r0, std::size_t r1, std::size_t c0,
                  std::size_t c1, float scale_inv, T* out) noexcept {
  for (std::size_t r = r0; r < r1; ++r) {
    decode_span<Ops, Format>(in + r * cols + c0, c1 - c0, scale_inv, out + r * cols + c0);
  }
}

template <class Ops, class T>
float quantize_blocks_with(const T* in, std::size_t rows, std::size_t cols, const quantization& q,
                           std::uint8_t* out, float* scale_inv) {
  const scale_layout layout = make_scale_layout(q.granularity, rows, cols);
  std::fill(scale_inv, scale_inv + layout.count, 0.0f);  // padding entries
  const float fp8_max = max_finite(q.format);
  std::uint32_t tensor_bits = 0;
  visit_format(q.format, [&](auto descriptor) {
    using format_t = decltype(descriptor);
    for_each_block(layout, [&](std::size_t i, std::size_t j, std::size_t r0, std::size_t r1, std::size_t c0,
                               std::size_t c1) {
      const std::uint32_t bits = block_amax_bits<Ops>(in, cols, r0, r1, c0, c1);
      tensor_bits = max_bits(tensor_bits, bits);
      const float scale =
          scale_from_amax_unchecked(amax_from_bits(bits), fp8_max, q.margin, q.power_of_two_scales, 1.0f);
      cast_block<Ops, format_t>(in, cols, r0, r1, c0, c1, scale, out);
      scale_inv[layout.index(i, j)] = 1.0f / scale;
    });
  });
  return amax_from_bits(tensor_bits);
}

template <class Ops, class T>
float quantize_mx_with(const T* in, std::size_t rows, std::size_t cols, const quantization& q,
                       std::uint8_t* out, std::uint8_t* scale_e8m0) {
  const scale_layout layout = make_scale_layout(q.granularity, rows, cols);
  std::uint32_t tensor_bits = 0;
  visit_format(q.format, [&](auto descriptor) {
    using format_t = decltype(descriptor);
    for_each_block(layout, [&](std::size_t i, std::size_t j, std::size_t r0, std::size_t r1, std::size_t c0,
                               std::size_t c1) {
      const std::uint32_t bits = block_amax_bits<Ops>(in, cols, r0, r1, c0, c1);
      tensor_bits = max_bits(tensor_bits, bits);
      const std::uint8_t code = mx_scale_code(amax_from_bits(bits), q.format);
      cast_block<Ops, format_t>(in, cols, r0, r1, c0, c1, mx_element_scale(code), out);
      scale_e8m0[layout.index(i, j)] = code;
    });
  });
  return amax_from_bits(tensor_bits);
}

template <class Ops, class T>
void dequantize_blocks_with(const std::uint8_t* in, std::size_t rows, std::size_t cols, const quantization& q,
                            const float* scale_inv, T* out) {
  const scale_layout layout = make_scale_layout(q.granularity, rows, cols);
  // Every scale is checked before anything is written.
  for_each_block(
      layout, [&](std::size_t i, std::size_t j, std::size_t, std::size_t, std::size_t, std::size_t) {
        const float s = scale_inv[layout.index(i, j)];
        if (!(s > 0.0f) || !(s <= std::numeric_limits<float>::max())) {
          throw invalid_argument("fp8::dequantize: scale_inv of block (" + std::to_string(i) + ", " +
                                 std::to_string(j) + ") at index " + std::to_string(layout.index(i, j)) +
                                 " is " + std::to_string(s) + "; it must be a positive finite float");
        }
      });
  visit_format(q.format, [&](auto descriptor) {
    using format_t = decltype(descriptor);
    for_each_block(layout, [&](std::size_t i, std::size_t j, std::size_t r0, std::size_t r1, std::size_t c0,
                               std::size_t c1) {
      decode_block<Ops, format_t>(in, cols, r0, r1, c0, c1, scale_inv[layout.index(i, j)], out);
    });
  });
}

template <class Ops, class T>
void dequantize_mx_with(const std::uint8_t* in, std::size_t rows, std::size_t cols, const quantization& q,
                        const std::uint8_t* scale_e8m0, T* out) {
  const scale_layout layout = make_scale_layout(q.granularity, rows, cols);
  for (std::size_t k = 0; k < layout.count; ++k) {
    if (format_traits<e8m0_format>::is_nan_code(scale_e8m0[k])) {
      throw invalid_argument("fp8::dequantize: E8M0 scale at index " + std::to_string(k) +
                             " is the NaN code 0xFF");
    }
  }
  visit_format(q.format, [&](auto descriptor) {
    using format_t = decltype(descriptor);
    for_each_block(layout, [&](std::size_t i, std::size_t j, std::size_t r0, std::size_t r1, std::size_t c0,
                               std::size_t c1) {
      decode_block<Ops, format_t>(in, cols, r0, r1, c0, c1, mx_scale_inv(scale_e8m0[layout.index(i, j)]),
                                  out);
    });
  });
}

// Checks of the matrix functions; `high` is the float / bf16 / half side, `codes` the FP8 side.
template <class T>
void check_matrix_arguments(const T* high, const void* codes, const void* scales, std::size_t rows,
                            std::size_t cols, const quantization& q, const char* function, bool mx_scales,
                            bool quantizing) {
  static_check_element<T>();
  const std::size_t count = checked_size(rows, cols, function);
  check_pointer(high, count, function, quantizing ? "in" : "out");
  check_pointer(codes, count, function, quantizing ? "out" : "in");
  check_quantization(q, function, mx_scales);
  check_pointer(scales, scale_count(q.granularity, rows, cols), function, "the scale buffer");
}

}  // namespace detail

inline namespace FP8_QUANTIZE_ABI_NAMESPACE {

// Current scaling of a rows x cols row-major matrix. For each block of q.granularity: its amax, the
// scale scale_from_amax(amax, q.format, q.margin, q.power_of_two_scales, 1) (amax 0, Inf or NaN gives
// scale 1), then out = FP8(in * scale) as in the per-tensor quantize. scale_inv receives 1 / scale
// per block in the layout of make_scale_layout(q.granularity, rows, cols) (scale_count() floats,
// padding set to 0). Returns the amax of the whole matrix (NaN if any NaN, else Inf if any Inf).
// Throws fp8::invalid_argument (before writing) on null pointers, bad q, or q.granularity mx_1x32
// (use the E8M0 overload).
template <class T>
float quantize(const T* in, std::size_t rows, std::size_t cols, const quantization& q, std::uint8_t* out,
               float* scale_inv) {
  detail::check_matrix_arguments(in, out, scale_inv, rows, cols, q, "fp8::quantize", false, true);
  return detail::quantize_blocks_with<detail::simd_ops>(in, rows, cols, q, out, scale_inv);
}

// MX (q.granularity == mx_1x32): per 32 elements of a row, the E8M0 code of
// X = 2^(floor(log2(amax)) - emax) (mx_scale_code), and out = FP8(in * (1 / X)) rounded to nearest
// even and saturated (OCP MX v1.0). scale_e8m0 gets rows x ceil(cols / 32) codes, row-major.
template <class T>
float quantize(const T* in, std::size_t rows, std::size_t cols, const quantization& q, std::uint8_t* out,
               std::uint8_t* scale_e8m0) {
  detail::check_matrix_arguments(in, out, scale_e8m0, rows, cols, q, "fp8::quantize", true, true);
  return detail::quantize_mx_with<detail::simd_ops>(in, rows, cols, q, out, scale_e8m0);
}

// Inverse of the matrix quantize: out = T(decode(code) * scale_inv of the element's block).
// Throws fp8::invalid_argument, before writing, if a block's scale_inv is not a positive finite float.
template <class T>
void dequantize(const std::uint8_t* in, std::size_t rows, std::size_t cols, const quantization& q,
                const float* scale_inv, T* out) {
  detail::check_matrix_arguments(out, in, scale_inv, rows, cols, q, "fp8::dequantize", false, false);
  detail::dequantize_blocks_with<detail::simd_ops>(in, rows, cols, q, scale_inv, out);
}

// MX inverse: out = T(decode(code) * 2^(e8m0 - 127)). Throws on an E8M0 NaN code (0xFF).
template <class T>
void dequantize(const std::uint8_t* in, std::size_t rows, std::size_t cols, const quantization& q,
                const std::uint8_t* scale_e8m0, T* out) {
  detail::check_matrix_arguments(out, in, scale_e8m0, rows, cols, q, "fp8::dequantize", true, false);
  detail::dequantize_mx_with<detail::simd_ops>(in, rows, cols, q, scale_e8m0, out);
}

}  // namespace FP8_QUANTIZE_ABI_NAMESPACE
}  // namespace fp8
