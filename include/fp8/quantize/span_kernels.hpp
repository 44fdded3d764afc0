// The loops over contiguous spans (cast with amax, amax, column amax, per-column scales, decode),
// written once against an ops type (scalar_ops, avx2_ops, avx512_ops). A ragged tail goes through
// the same vector code via a zero-padded staging buffer, so every element takes the same path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace fp8::detail {

// out[i] = fp8(in[i] * scale); returns the maximum of |in[i]| as float bits (NaN above Inf above finite)
// when WithAmax, else 0. Zero padding of the tail leaves that maximum unchanged.
template <class Ops, class Format, bool WithAmax, class T>
inline std::uint32_t cast_span(const T* in, std::size_t n, float scale, std::uint8_t* out) noexcept {
  const auto s = Ops::broadcast(scale);
  auto acc = Ops::zero_bits();
  std::size_t i = 0;
  for (; i + Ops::width <= n; i += Ops::width) {
    const auto x = Ops::load(in + i);
    if constexpr (WithAmax) acc = Ops::max(acc, Ops::abs_bits(x));
    Ops::template encode_store<Format>(Ops::mul(x, s), out + i);
  }
  if (i < n) {
    T staged_in[Ops::width] = {};
    std::uint8_t staged_out[Ops::width] = {};
    std::memcpy(staged_in, in + i, (n - i) * sizeof(T));
    const auto x = Ops::load(staged_in);
    if constexpr (WithAmax) acc = Ops::max(acc, Ops::abs_bits(x));
    Ops::template encode_store<Format>(Ops::mul(x, s), staged_out);
    std::memcpy(out + i, staged_out, n - i);
  }
  return WithAmax ? Ops::reduce_max(acc) : 0u;
}

// out[i] = fp8(in[i] * scales[i]): one scale per column (the transposed copy of column-wise recipes).
template <class Ops, class Format, class T>
inline void cast_span_scales(const T* in, std::size_t n, const float* scales, std::uint8_t* out) noexcept {
  std::size_t i = 0;
  for (; i + Ops::width <= n; i += Ops::width) {
    Ops::template encode_store<Format>(Ops::mul(Ops::load(in + i), Ops::load(scales + i)), out + i);
  }
  if (i < n) {
    T staged_in[Ops::width] = {};
    float staged_scales[Ops::width] = {};
    std::uint8_t staged_out[Ops::width] = {};
    std::memcpy(staged_in, in + i, (n - i) * sizeof(T));
    std::memcpy(staged_scales, scales + i, (n - i) * sizeof(float));
    Ops::template encode_store<Format>(Ops::mul(Ops::load(staged_in), Ops::load(staged_scales)), staged_out);
    std::memcpy(out + i, staged_out, n - i);
  }
}

template <class Ops, class T>
inline std::uint32_t amax_span(const T* in, std::size_t n) noexcept {
  auto acc = Ops::zero_bits();
  std::size_t i = 0;
  for (; i + Ops::width <= n; i += Ops::width) acc = Ops::max(acc, Ops::abs_bits(Ops::load(in + i)));
  if (i < n) {
    T staged[Ops::width] = {};
    std::memcpy(staged, in + i, (n - i) * sizeof(T));
    acc = Ops::max(acc, Ops::abs_bits(Ops::load(staged)));
  }
  return Ops::reduce_max(acc);
}

// column_bits[j] = max(column_bits[j], |in[j]| bits): one row's contribution to per-column amaxes.
template <class Ops, class T>
inline void column_amax_span(const T* in, std::size_t n, std::uint32_t* column_bits) noexcept {
  std::size_t i = 0;
  for (; i + Ops::width <= n; i += Ops::width) {
    Ops::store_bits(column_bits + i,
                    Ops::max(Ops::load_bits(column_bits + i), Ops::abs_bits(Ops::load(in + i))));
  }
  if (i < n) {
    T staged[Ops::width] = {};
    std::uint32_t staged_bits[Ops::width] = {};
    std::memcpy(staged, in + i, (n - i) * sizeof(T));
    std::memcpy(staged_bits, column_bits + i, (n - i) * sizeof(std::uint32_t));
    Ops::store_bits(staged_bits, Ops::max(Ops::load_bits(staged_bits), Ops::abs_bits(Ops::load(staged))));
    std::memcpy(column_bits + i, staged_bits, (n - i) * sizeof(std::uint32_t));
  }
}

// out[i] = T(float(code[i]) * scale_inv), the product rounded once to T.
template <class Ops, class Format, class T>
inline void decode_span(const std::uint8_t* in, std::size_t n, float scale_inv, T* out) noexcept {
  const auto s = Ops::broadcast(scale_inv);
  std::size_t i = 0;
  for (; i + Ops::width <= n; i += Ops::width)
    Ops::store(out + i, Ops::mul(Ops::template decode_load<Format>(in + i), s));
  if (i < n) {
    std::uint8_t staged_in[Ops::width] = {};
    T staged_out[Ops::width] = {};
    std::memcpy(staged_in, in + i, n - i);
    Ops::store(staged_out, Ops::mul(Ops::template decode_load<Format>(staged_in), s));
    std::memcpy(out + i, staged_out, (n - i) * sizeof(T));
  }
}

}  // namespace fp8::detail
