// The integer constants with which the SIMD kernels encode float -> FP8 (nearest even, saturating)
// and decode FP8 -> float, all derived from the format descriptors so no format is spelled out twice.
#pragma once

#include <cstdint>

#include "../config.hpp"
#include "../convert.hpp"
#include "../format.hpp"

namespace fp8::detail {

// The encoding, on a float's magnitude bits a = bits(|x|):
//  - a > +Inf bits (NaN):         the format's canonical NaN, without sign (as convert_bits does);
//  - first a = min(a, max_finite_bits): saturation. Every finite magnitude above the largest FP8
//    value rounds either to it or beyond it, and both saturate to it, as does Inf, so clamping the
//    input to the largest value is exact (NaN, also clamped, is replaced at the end);
//  - a <  min_normal (subnormal): add the float `subnormal_magic`, whose ulp is the FP8 subnormal
//    quantum, so the FPU's own round-to-nearest-even does the rounding; bits(sum) - bits(magic) is
//    the code. E4M3: magic 2^14 (ulp 2^-9); x = 2.5 * 2^-9 is a tie, 2^14 + x rounds to even
//    2^14 + 2 * 2^-9, code 2; just below 2^-6 the sum rounds to 2^14 + 8 * 2^-9, code 8 = min normal.
//  - otherwise (normal):          round the float's mantissa to M bits in integer arithmetic
//    (a + half_ulp - 1 + lsb, the carry into the exponent is the right answer) and rebias:
//    code = (rounded >> drop) - rebias, computed as (a + lsb + round_and_rebias) >> drop.
//  Finally the sign bit moves from bit 31 to bit 7.
template <class Format>
struct encoding_constants {
  using traits = format_traits<Format>;
  using float_traits = format_traits<binary32_format>;
  static_assert(traits::total_bits == 8 && Format::has_sign && Format::has_subnormals,
                "SIMD kernels handle the signed 8-bit formats with subnormals (E4M3, E5M2)");

  static constexpr int drop = float_traits::mantissa_bits - traits::mantissa_bits;  // 20 (E4M3), 21 (E5M2)
  static constexpr std::uint32_t half_ulp_minus_one = (std::uint32_t(1) << (drop - 1)) - 1;
  static constexpr std::uint32_t rebias = std::uint32_t(float_traits::bias - traits::bias)
                                          << traits::mantissa_bits;
  // half_ulp_minus_one - (rebias << drop), modulo 2^32: rounding and rebiasing in one addition, so a
  // normal magnitude's code is (a + lsb + round_and_rebias) >> drop.
  static constexpr std::uint32_t round_and_rebias = half_ulp_minus_one - (rebias << drop);
  static constexpr std::uint32_t magnitude_mask = float_traits::magnitude_mask;     // 0x7FFFFFFF
  static constexpr std::uint32_t infinity_bits = float_traits::infinity_code;       // 0x7F800000
  static constexpr int sign_shift = float_traits::total_bits - traits::total_bits;  // 24
  static constexpr std::uint32_t sign_mask = traits::sign_mask;                     // 0x80
  static constexpr std::uint32_t max_code = traits::max_finite_code;                // 0x7E, 0x7B
  static constexpr std::uint32_t nan_code = Format::canonical_nan;                  // 0x7F, 0x7F
  static constexpr std::uint32_t code_magnitude_mask = traits::magnitude_mask;      // 0x7F

  static constexpr std::uint32_t float_bits_of(typename Format::storage code) noexcept {
    return bit_cast<std::uint32_t>(decode<float, Format>(code));
  }
  // Smallest normal as float bits: 2^-6 = 0x3C800000 (E4M3), 2^-14 = 0x38800000 (E5M2).
  static constexpr std::uint32_t min_normal_bits = float_bits_of(traits::min_normal_code);
  // The largest finite value as float bits: 448 = 0x43E00000 (E4M3), 57344 = 0x47600000 (E5M2).
  static constexpr std::uint32_t max_finite_bits = float_bits_of(traits::max_finite_code);
  // Saturation by clamping is exact only if the largest value encodes back to the largest code.
  static_assert(((max_finite_bits + half_ulp_minus_one + ((max_finite_bits >> drop) & 1u)) >> drop) -
                        rebias ==
                    traits::max_finite_code,
                "clamping to the largest value must round to the largest code");
  // 2^(min_normal_exponent - mantissa_bits + 23): the float whose ulp is the FP8 subnormal quantum.
  static constexpr int magic_exponent =
      traits::min_normal_exponent - traits::mantissa_bits + float_traits::mantissa_bits;
  static constexpr std::uint32_t subnormal_magic_bits = std::uint32_t(magic_exponent + float_traits::bias)
                                                        << float_traits::mantissa_bits;

  // Decoding: codes below `first_normal_code` are subnormal (mantissa * quantum); from
  // `first_special_code` on (E5M2: 0x7C Inf, above NaN; E4M3: 0x7F NaN) the result is special.
  static constexpr std::uint32_t first_normal_code = traits::min_normal_code;
  static constexpr std::uint32_t first_special_code =
      traits::has_infinity ? traits::infinity_code : traits::magnitude_mask;
  // A normal code's float bits: (code << drop) + rebias_bits.
  static constexpr std::uint32_t rebias_bits = rebias << drop;
  // Subnormal quantum 2^(min_normal_exponent - mantissa_bits) as float bits (2^-9, 2^-16).
  static constexpr std::uint32_t subnormal_quantum_bits =
      std::uint32_t(traits::min_normal_exponent - traits::mantissa_bits + float_traits::bias)
      << float_traits::mantissa_bits;
  static constexpr std::uint32_t float_quiet_nan = binary32_format::canonical_nan;  // 0x7FC00000
};

// bfloat16 and half outputs: float -> bf16 rounds the top 16 bits to nearest even (overflow to Inf
// falls out of the carry); every NaN becomes the canonical NaN, as convert_bits does.
struct bf16_constants {
  static constexpr int shift =
      format_traits<binary32_format>::total_bits - format_traits<bf16_format>::total_bits;    // 16
  static constexpr std::uint32_t half_ulp_minus_one = (std::uint32_t(1) << (shift - 1)) - 1;  // 0x7FFF
  static constexpr std::uint32_t canonical_nan = bf16_format::canonical_nan;                  // 0x7FC0
};
struct fp16_constants {
  static constexpr std::uint32_t canonical_nan = fp16_format::canonical_nan;  // 0x7E00
};

}  // namespace fp8::detail
