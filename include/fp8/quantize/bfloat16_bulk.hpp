// Bulk float -> bfloat16 conversion, round to nearest even: the bits fp8::bfloat16(x) gives for each
// element, computed with a few branch-free integer operations per element so that the loops
// vectorise (SSE/AVX2/AVX-512, whatever the target allows). For mixed-precision code that keeps
// BF16 tensors, or rounds FP32 buffers to BF16 values in place (BF16 activations held in floats).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../float8.hpp"
#include "../format.hpp"

namespace fp8 {

namespace detail {

// The float's bits rounded to BF16's 16 upper bits: add just under half of BF16's last place
// (0x7FFF), plus one when the kept part is odd, then keep the upper half. A carry out of the
// mantissa moves to the next binade (from the largest finite values to Inf), exactly as rounding
// does; NaN becomes BF16's canonical NaN, as fp8::bfloat16(float) makes it.
//   1.00390625f = 0x3F808000 (1 + 2^-8, a tie, kept part even) -> 0x3F80 = 1.0
//   1.01171875f = 0x3F818000 (a tie, kept part odd)            -> 0x3F82 = 1.015625
constexpr std::uint16_t bfloat16_bits_rne(std::uint32_t bits) noexcept {
  using float_traits = format_traits<binary32_format>;
  using bf16_traits = format_traits<bf16_format>;
  constexpr int dropped_bits = float_traits::mantissa_bits - bf16_traits::mantissa_bits;  // 16
  constexpr std::uint32_t half_minus_one = (std::uint32_t(1) << (dropped_bits - 1)) - 1;  // 0x7FFF
  const bool is_nan = (bits & float_traits::magnitude_mask) > float_traits::infinity_code;
  const std::uint32_t rounded = (bits + half_minus_one + ((bits >> dropped_bits) & 1u)) >> dropped_bits;
  return is_nan ? bf16_format::canonical_nan : std::uint16_t(rounded);
}

inline std::uint32_t float_bits(float value) noexcept {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

// Elements per block of the loops below: a constant trip count lets GCC vectorise the inner loop
// even at -O2 (whose cost model refuses loops of unknown length), 16 fills one AVX-512 register.
inline constexpr std::size_t bfloat16_bulk_block = 16;

inline void round_to_bfloat16_block(float* data, std::size_t count) noexcept {
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t bits = std::uint32_t(bfloat16_bits_rne(float_bits(data[i]))) << 16;
    std::memcpy(data + i, &bits, sizeof(bits));
  }
}

inline void to_bfloat16_block(const float* in, bfloat16* out, std::size_t count) noexcept {
  for (std::size_t i = 0; i < count; ++i) out[i] = bfloat16::from_bits(bfloat16_bits_rne(float_bits(in[i])));
}

}  // namespace detail

// out[i] = fp8::bfloat16(in[i]) for i < count. `in` and `out` must not overlap.
inline void to_bfloat16(const float* in, bfloat16* out, std::size_t count) noexcept {
  constexpr std::size_t block = detail::bfloat16_bulk_block;
  std::size_t i = 0;
  for (; i + block <= count; i += block) detail::to_bfloat16_block(in + i, out + i, block);
  detail::to_bfloat16_block(in + i, out + i, count - i);
}

// data[i] = float(fp8::bfloat16(data[i])) for i < count: rounds a float buffer to BF16 values in place.
inline void round_to_bfloat16(float* data, std::size_t count) noexcept {
  constexpr std::size_t block = detail::bfloat16_bulk_block;
  std::size_t i = 0;
  for (; i + block <= count; i += block) detail::round_to_bfloat16_block(data + i, block);
  detail::round_to_bfloat16_block(data + i, count - i);
}

}  // namespace fp8
