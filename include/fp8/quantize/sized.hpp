// Size-checked overloads of the quantize API: every buffer comes as an fp8::span, and each is checked
// against what the call reads or writes (rows x cols elements, scale_count() scales) before anything
// is touched, so a buffer that is too small is an fp8::invalid_argument naming it, never a heap
// overflow. The high-precision side is passed as fp8::span(x) (its element type picks the overload);
// the FP8 codes and scales take containers directly. Otherwise each call is its pointer overload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../scaling/fp8_format.hpp"
#include "../scaling/granularity.hpp"
#include "../scaling/recipe.hpp"
#include "blockwise.hpp"
#include "checks.hpp"
#include "per_tensor.hpp"
#include "span.hpp"
#include "transpose.hpp"

namespace fp8 {
namespace detail {

inline void check_span_size(std::size_t size, std::size_t needed, const char* function, const char* name,
                            const char* what) {
  if (size < needed) {
    throw invalid_argument(std::string(function) + ": " + name + " holds " + std::to_string(size) +
                           " elements but " + std::to_string(needed) + " are needed (" + what + ")");
  }
}

// The sizes of a rows x cols call: the elements and, under q, the scale entries of the matrix.
inline std::size_t checked_elements(std::size_t rows, std::size_t cols, const char* function) {
  return checked_size(rows, cols, function);
}
inline std::size_t checked_scales(const quantization& q, std::size_t rows, std::size_t cols,
                                  const char* function, bool mx_scales) {
  check_quantization(q, function, mx_scales);
  return scale_count(q.granularity, rows, cols);
}

// The three code-sized spans of quantize_transpose: in, out and out_t hold rows x cols elements each.
template <class T>
void check_transpose_codes(span<T> in, span<std::uint8_t> out, span<std::uint8_t> out_t, std::size_t elements,
                           const char* function) {
  check_span_size(in.size(), elements, function, "in", "rows x cols");
  check_span_size(out.size(), elements, function, "out", "rows x cols");
  check_span_size(out_t.size(), elements, function, "out_t", "rows x cols");
}

// What the scale spans of the scaled calls are called in their errors, by scale type: float scale_inv
// (any float granularity) or E8M0 scale_e8m0 (MX), each with its transposed copy's name.
template <class Scale>
struct scale_span_names;
template <>
struct scale_span_names<float> {
  static constexpr bool mx = false;
  static constexpr const char* name = "scale_inv";
  static constexpr const char* name_t = "scale_inv_t";
  static constexpr const char* count = "scale_count(granularity, rows, cols)";
  static constexpr const char* count_t = "scale_count(granularity, cols, rows)";
};
template <>
struct scale_span_names<std::uint8_t> {
  static constexpr bool mx = true;
  static constexpr const char* name = "scale_e8m0";
  static constexpr const char* name_t = "scale_e8m0_t";
  static constexpr const char* count = "scale_count(mx_1x32, rows, cols)";
  static constexpr const char* count_t = "scale_count(mx_1x32, cols, rows)";
};

// Every span of a scaled quantize_transpose (float or E8M0 scales): the codes as above, scales the
// scale_count(q.granularity, rows, cols) entries of the matrix and scales_t those of its transpose.
template <class T, class Scale>
void check_transpose_spans(span<T> in, std::size_t rows, std::size_t cols, const quantization& q,
                           span<std::uint8_t> out, span<Scale> scales, span<std::uint8_t> out_t,
                           span<Scale> scales_t) {
  using names = scale_span_names<Scale>;
  constexpr const char* function = "fp8::quantize_transpose";
  const std::size_t elements = checked_elements(rows, cols, function);
  const std::size_t scale_entries = checked_scales(q, rows, cols, function, names::mx);
  const std::size_t scale_entries_t = scale_count(q.granularity, cols, rows);
  check_transpose_codes(in, out, out_t, elements, function);
  check_span_size(scales.size(), scale_entries, function, names::name, names::count);
  check_span_size(scales_t.size(), scale_entries_t, function, names::name_t, names::count_t);
}

}  // namespace detail

inline namespace FP8_QUANTIZE_ABI_NAMESPACE {

template <class T>
float compute_amax(span<T> in) {
  return compute_amax(static_cast<const std::remove_const_t<T>*>(in.data()), in.size());
}

// Per tensor: out must hold in.size() codes.
template <class T>
float quantize(span<T> in, fp8_format format, float scale, span<std::uint8_t> out) {
  detail::check_span_size(out.size(), in.size(), "fp8::quantize", "out", "one code per input element");
  return quantize(static_cast<const std::remove_const_t<T>*>(in.data()), in.size(), format, scale,
                  out.data());
}

template <class T>
void cast_to_fp8(span<T> in, fp8_format format, span<std::uint8_t> out, float scale = 1.0f) {
  detail::check_span_size(out.size(), in.size(), "fp8::cast_to_fp8", "out", "one code per input element");
  cast_to_fp8(static_cast<const std::remove_const_t<T>*>(in.data()), in.size(), format, out.data(), scale);
}

template <class T>
void dequantize(span<const std::uint8_t> in, fp8_format format, float scale_inv, span<T> out) {
  static_assert(!std::is_const_v<T>, "fp8::dequantize writes its output: pass a span of non-const elements");
  detail::check_span_size(out.size(), in.size(), "fp8::dequantize", "out", "one value per code");
  dequantize(in.data(), in.size(), format, scale_inv, out.data());
}

// Current scaling of a rows x cols matrix: in and out hold rows x cols elements, scale_inv (or
// scale_e8m0) scale_count(q.granularity, rows, cols) entries.
template <class T>
float quantize(span<T> in, std::size_t rows, std::size_t cols, const quantization& q, span<std::uint8_t> out,
               span<float> scale_inv) {
  constexpr const char* function = "fp8::quantize";
  const std::size_t elements = detail::checked_elements(rows, cols, function);
  const std::size_t scales = detail::checked_scales(q, rows, cols, function, false);
  detail::check_span_size(in.size(), elements, function, "in", "rows x cols");
  detail::check_span_size(out.size(), elements, function, "out", "rows x cols");
  detail::check_span_size(scale_inv.size(), scales, function, "scale_inv",
                          "scale_count(granularity, rows, cols)");
  return quantize(static_cast<const std::remove_const_t<T>*>(in.data()), rows, cols, q, out.data(),
                  scale_inv.data());
}

template <class T>
float quantize(span<T> in, std::size_t rows, std::size_t cols, const quantization& q, span<std::uint8_t> out,
               span<std::uint8_t> scale_e8m0) {
  constexpr const char* function = "fp8::quantize";
  const std::size_t elements = detail::checked_elements(rows, cols, function);
  const std::size_t scales = detail::checked_scales(q, rows, cols, function, true);
  detail::check_span_size(in.size(), elements, function, "in", "rows x cols");
  detail::check_span_size(out.size(), elements, function, "out", "rows x cols");
  detail::check_span_size(scale_e8m0.size(), scales, function, "scale_e8m0",
                          "scale_count(mx_1x32, rows, cols)");
  return quantize(static_cast<const std::remove_const_t<T>*>(in.data()), rows, cols, q, out.data(),
                  scale_e8m0.data());
}

template <class T>
void dequantize(span<const std::uint8_t> in, std::size_t rows, std::size_t cols, const quantization& q,
                span<const float> scale_inv, span<T> out) {
  static_assert(!std::is_const_v<T>, "fp8::dequantize writes its output: pass a span of non-const elements");
  constexpr const char* function = "fp8::dequantize";
  const std::size_t elements = detail::checked_elements(rows, cols, function);
  const std::size_t scales = detail::checked_scales(q, rows, cols, function, false);
  detail::check_span_size(in.size(), elements, function, "in", "rows x cols");
  detail::check_span_size(out.size(), elements, function, "out", "rows x cols");
  detail::check_span_size(scale_inv.size(), scales, function, "scale_inv",
                          "scale_count(granularity, rows, cols)");
  dequantize(in.data(), rows, cols, q, scale_inv.data(), out.data());
}

template <class T>
void dequantize(span<const std::uint8_t> in, std::size_t rows, std::size_t cols, const quantization& q,
                span<const std::uint8_t> scale_e8m0, span<T> out) {
  static_assert(!std::is_const_v<T>, "fp8::dequantize writes its output: pass a span of non-const elements");
  constexpr const char* function = "fp8::dequantize";
  const std::size_t elements = detail::checked_elements(rows, cols, function);
  const std::size_t scales = detail::checked_scales(q, rows, cols, function, true);
  detail::check_span_size(in.size(), elements, function, "in", "rows x cols");
  detail::check_span_size(out.size(), elements, function, "out", "rows x cols");
  detail::check_span_size(scale_e8m0.size(), scales, function, "scale_e8m0",
                          "scale_count(mx_1x32, rows, cols)");
  dequantize(in.data(), rows, cols, q, scale_e8m0.data(), out.data());
}

// The transposed copies: out_t holds rows x cols codes, scale_inv_t (scale_e8m0_t) the scales of the
// cols x rows transpose.
template <class T>
float quantize_transpose(span<T> in, std::size_t rows, std::size_t cols, fp8_format format, float scale,
                         span<std::uint8_t> out, span<std::uint8_t> out_t) {
  constexpr const char* function = "fp8::quantize_transpose";
  detail::check_transpose_codes(in, out, out_t, detail::checked_elements(rows, cols, function), function);
  return quantize_transpose(static_cast<const std::remove_const_t<T>*>(in.data()), rows, cols, format, scale,
                            out.data(), out_t.data());
}

template <class T>
float quantize_transpose(span<T> in, std::size_t rows, std::size_t cols, const quantization& q,
                         span<std::uint8_t> out, span<float> scale_inv, span<std::uint8_t> out_t,
                         span<float> scale_inv_t) {
  detail::check_transpose_spans(in, rows, cols, q, out, scale_inv, out_t, scale_inv_t);
  return quantize_transpose(static_cast<const std::remove_const_t<T>*>(in.data()), rows, cols, q, out.data(),
                            scale_inv.data(), out_t.data(), scale_inv_t.data());
}

template <class T>
float quantize_transpose(span<T> in, std::size_t rows, std::size_t cols, const quantization& q,
                         span<std::uint8_t> out, span<std::uint8_t> scale_e8m0, span<std::uint8_t> out_t,
                         span<std::uint8_t> scale_e8m0_t) {
  detail::check_transpose_spans(in, rows, cols, q, out, scale_e8m0, out_t, scale_e8m0_t);
  return quantize_transpose(static_cast<const std::remove_const_t<T>*>(in.data()), rows, cols, q, out.data(),
                            scale_e8m0.data(), out_t.data(), scale_e8m0_t.data());
}

}  // namespace FP8_QUANTIZE_ABI_NAMESPACE
}  // namespace fp8
