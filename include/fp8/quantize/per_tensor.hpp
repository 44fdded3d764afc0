// Per-tensor quantization with a given scale (delayed scaling): the cast and the amax in one pass,
// the cast alone, the amax alone, and the inverse (dequantize) for contiguous buffers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../scaling/fp8_format.hpp"
#include "../scaling/scale.hpp"
#include "checks.hpp"
#include "isa.hpp"
#include "kernels.hpp"

namespace fp8 {
namespace detail {

template <class Ops, class T>
float compute_amax_with(const T* in, std::size_t count) {
  return amax_from_bits(amax_span<Ops>(in, count));
}

template <class Ops, bool WithAmax, class T>
float quantize_with(const T* in, std::size_t count, fp8_format format, float scale, std::uint8_t* out) {
  return visit_format(format, [&](auto descriptor) {
    using format_t = decltype(descriptor);
    return amax_from_bits(cast_span<Ops, format_t, WithAmax>(in, count, scale, out));
  });
}

template <class Ops, class T>
void dequantize_with(const std::uint8_t* in, std::size_t count, fp8_format format, float scale_inv, T* out) {
  visit_format(format,
               [&](auto descriptor) { decode_span<Ops, decltype(descriptor)>(in, count, scale_inv, out); });
}

}  // namespace detail

inline namespace FP8_QUANTIZE_ABI_NAMESPACE {

// The largest |x| of a buffer. NaN if any element is NaN, else +Inf if any is infinite, else the
// largest magnitude (0 for an empty buffer). Every NaN comes back as the same quiet NaN.
template <class T>
float compute_amax(const T* in, std::size_t count) {
  detail::static_check_element<T>();
  detail::check_pointer(in, count, "fp8::compute_amax", "in");
  return detail::compute_amax_with<detail::simd_ops>(in, count);
}

// Delayed (given-scale) per-tensor quantization in one pass:
//   out[i] = FP8(in[i] * scale)  rounded to nearest even, saturating (as __nv_fp8_e4m3(float));
//   returns compute_amax(in) of the *unscaled* input, for the amax history.
// in[i] is widened to float exactly, multiplied by `scale` in float (one rounding, as on the GPU),
// then rounded once to FP8. NaN becomes the format's NaN code (0x7F), +-Inf becomes +-max.
// Throws fp8::invalid_argument on a null pointer, an unknown format, or a scale that is not a
// positive finite float, before writing anything.
template <class T>
float quantize(const T* in, std::size_t count, fp8_format format, float scale, std::uint8_t* out) {
  detail::static_check_element<T>();
  detail::check_pointer(in, count, "fp8::quantize", "in");
  detail::check_pointer(out, count, "fp8::quantize", "out");
  detail::check_format(format, "fp8::quantize");
  detail::check_scale_argument(scale, "fp8::quantize", "scale");
  return detail::quantize_with<detail::simd_ops, true>(in, count, format, scale, out);
}

// The same cast without the amax (plain conversion when scale is 1).
template <class T>
void cast_to_fp8(const T* in, std::size_t count, fp8_format format, std::uint8_t* out, float scale = 1.0f) {
  detail::static_check_element<T>();
  detail::check_pointer(in, count, "fp8::cast_to_fp8", "in");
  detail::check_pointer(out, count, "fp8::cast_to_fp8", "out");
  detail::check_format(format, "fp8::cast_to_fp8");
  detail::check_scale_argument(scale, "fp8::cast_to_fp8", "scale");
  detail::quantize_with<detail::simd_ops, false>(in, count, format, scale, out);
}

// out[i] = T(decode(in[i]) * scale_inv): the exact FP8 value times scale_inv in float, rounded once
// to T (nearest even; NaN codes give NaN, E5M2 Inf gives Inf). scale_inv = 1 is plain decoding.
template <class T>
void dequantize(const std::uint8_t* in, std::size_t count, fp8_format format, float scale_inv, T* out) {
  detail::static_check_element<T>();
  detail::check_pointer(in, count, "fp8::dequantize", "in");
  detail::check_pointer(out, count, "fp8::dequantize", "out");
  detail::check_format(format, "fp8::dequantize");
  detail::check_scale_argument(scale_inv, "fp8::dequantize", "scale_inv");
  detail::dequantize_with<detail::simd_ops>(in, count, format, scale_inv, out);
}

}  // namespace FP8_QUANTIZE_ABI_NAMESPACE
}  // namespace fp8
