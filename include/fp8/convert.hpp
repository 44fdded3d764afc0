// The one conversion routine between any two formats of format.hpp, plus float, double and integers,
// with explicit rounding and overflow policies. Every fp8 type converts through convert_bits().
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "config.hpp"
#include "format.hpp"

namespace fp8 {

// Which neighbour a value between two representable values goes to.
enum class rounding {
  nearest_even,  // IEEE default; ties to the even code (also across the subnormal boundary)
  toward_zero,   // truncate the magnitude
  upward,        // toward +Inf (for unsigned formats such as E8M0: round the magnitude up)
  stochastic,    // up with probability = discarded fraction, decided by caller-supplied random bits
};

namespace detail {

// A finite or special value split into exact parts: value = (-1)^negative * significand * 2^exponent.
struct unpacked {
  enum class kind : std::uint8_t { zero, finite, infinity, nan };
  kind what;
  bool negative;
  int exponent;
  std::uint64_t significand;  // nonzero exactly when what == finite
};

// Index of the highest set bit of a nonzero value (0..63). GCC and clang evaluate their builtin in
// constant expressions too; elsewhere (device code, other compilers) a branchy binary search.
FP8_HOST_DEVICE constexpr int highest_bit(std::uint64_t x) noexcept {
#if (defined(__GNUC__) || defined(__clang__)) && !FP8_DEVICE_PASS
  return 63 - __builtin_clzll(x);
#else
  int index = 0;
  if (x >> 32) {
    x >>= 32;
    index += 32;
  }
  if (x >> 16) {
    x >>= 16;
    index += 16;
  }
  if (x >> 8) {
    x >>= 8;
    index += 8;
  }
  if (x >> 4) {
    x >>= 4;
    index += 4;
  }
  if (x >> 2) {
    x >>= 2;
    index += 2;
  }
  if (x >> 1) { index += 1; }
  return index;
#endif
}

// Splits the code of any format described by format.hpp into exact parts. Example (E4M3):
// 0b1'0110'101 -> negative, significand 0b1101 = 13, exponent 6 - 7 - 3 = -4, i.e. -13/16.
template <class Format>
FP8_HOST_DEVICE constexpr unpacked unpack_code(typename Format::storage code) noexcept {
  using traits = format_traits<Format>;
  const bool negative = (code & traits::sign_mask) != 0;
  const std::uint64_t magnitude = code & traits::magnitude_mask;
  if (traits::is_nan_code(code)) return {unpacked::kind::nan, negative, 0, 0};
  if (traits::is_inf_code(code)) return {unpacked::kind::infinity, negative, 0, 0};
  const int biased_exponent = int(magnitude >> traits::mantissa_bits);
  const std::uint64_t mantissa = magnitude & traits::mantissa_mask;
  const int quantum_exponent = -traits::bias - traits::mantissa_bits;  // exponent of one mantissa ulp
  if (Format::has_subnormals && biased_exponent == 0) {
    if (mantissa == 0) return {unpacked::kind::zero, negative, 0, 0};
    return {unpacked::kind::finite, negative, quantum_exponent + 1, mantissa};
  }
  const std::uint64_t implicit_bit = std::uint64_t(1) << traits::mantissa_bits;
  return {unpacked::kind::finite, negative, quantum_exponent + biased_exponent, implicit_bit | mantissa};
}

template <class Integer>
FP8_HOST_DEVICE constexpr unpacked unpack_integer(Integer value) noexcept {
  if (value == 0) return {unpacked::kind::zero, false, 0, 0};
  bool negative = false;
  std::uint64_t magnitude = 0;
  if constexpr (std::is_signed_v<Integer>) {
    negative = value < 0;
    // Negate in unsigned arithmetic so that the most negative value does not overflow.
    magnitude = negative ? std::uint64_t(0) - std::uint64_t(std::int64_t(value)) : std::uint64_t(value);
  } else {
    magnitude = std::uint64_t(value);
  }
  return {unpacked::kind::finite, negative, 0, magnitude};
}

// The discarded low bits of a significand, as the decision of each rounding mode sees them.
struct discarded_bits {
  bool any;             // something nonzero was dropped (inexact)
  bool above_half;      // dropped part > half an ulp
  bool exactly_half;    // dropped part == half an ulp
  std::uint32_t top32;  // dropped part as a 32-bit binary fraction of one ulp, truncated
};

// Keeps significand >> shift and describes the rest; shift > 0.
FP8_HOST_DEVICE constexpr discarded_bits split_significand(std::uint64_t significand, int shift,
                                                           std::uint64_t& kept) noexcept {
  if (shift > 64) {  // everything is dropped and it is below half an ulp
    kept = 0;
    const int to_top32 = shift - 32;  // > 32
    const std::uint32_t top32 = to_top32 >= 64 ? 0u : std::uint32_t(significand >> to_top32);
    return {true, false, false, top32};
  }
  const std::uint64_t dropped = shift == 64 ? significand : significand & ((std::uint64_t(1) << shift) - 1);
  kept = shift == 64 ? 0 : significand >> shift;
  const std::uint64_t half = std::uint64_t(1) << (shift - 1);
  const std::uint32_t top32 =
      shift >= 32 ? std::uint32_t(dropped >> (shift - 32)) : std::uint32_t(dropped << (32 - shift));
  return {dropped != 0, dropped > half, dropped == half, top32};
}

// The conversion routine. Steps:
//  1. specials: a NaN input -> the format's canonical NaN, sign dropped (as CUDA's float path; +max
//     for FP4/FP6, which have no NaN); Inf -> the overflow policy;
//     zero -> signed zero (+0 in fnuz formats; the smallest code where the format has no zero);
//  2. find the target's ulp (quantum) for this value's binade, clamped at the subnormal range;
//  3. round the significand to whole quanta with the chosen rounding mode;
//  4. assemble the code (a carry into the next binade falls out of the arithmetic);
//  5. overflow is judged on the rounded result, then the overflow policy applies.
// Worked example, 1.0625 + 2^-30 (double) to E4M3: quantum 2^-3, significand/quanta = 8.5 + 2^-27,
// above half -> 9 quanta -> 0x39 (1.125). Narrowing to float first would have given the tie 8.5 -> 0x38.
template <class To, rounding Rounding, overflow Overflow>
FP8_HOST_DEVICE constexpr typename To::storage round_and_pack(const unpacked& value,
                                                              std::uint32_t random_bits) noexcept {
  using traits = format_traits<To>;
  using storage = typename To::storage;
  const bool negative = To::has_sign && value.negative;
  const storage sign = negative ? traits::sign_mask : storage(0);
  // An overflowing number keeps its sign, also where it becomes NaN (as CUDA's __NV_NOSAT does); the
  // fnuz NaN is the sign bit itself, so there the sign is moot.
  const storage overflowed =
      storage(sign | (Overflow == overflow::saturate ? traits::max_finite_code : traits::overflow_code));
  // Zero and underflow: signed zero; +0 where the format has no -0 (fnuz); the smallest code where it
  // has no zero at all (E8M0).
  const storage zero =
      traits::has_zero ? (traits::has_negative_zero ? sign : storage(0)) : traits::min_positive_code;

  // Step 1.
  switch (value.what) {
    case unpacked::kind::nan: return To::canonical_nan;
    case unpacked::kind::infinity: return overflowed;
    case unpacked::kind::zero: return zero;
    case unpacked::kind::finite: break;
  }

  // Step 2. The value's own binade exponent; below the normal range the quantum stays fixed.
  const int value_exponent = value.exponent + highest_bit(value.significand);
  const int binade_exponent =
      value_exponent < traits::min_normal_exponent ? traits::min_normal_exponent : value_exponent;
  const int quantum_exponent = binade_exponent - traits::mantissa_bits;

  // Step 3. quanta = value / 2^quantum_exponent, rounded.
  std::uint64_t quanta = 0;
  const int shift = quantum_exponent - value.exponent;
  if (shift <= 0) {
    quanta = value.significand << -shift;  // exact: fewer than mantissa_bits + 2 bits remain
  } else if (Rounding != rounding::stochastic && shift < 63 && (value.significand >> 62) == 0) {
    // The common case, without branches: add just under half an ulp (plus the kept lsb for ties to
    // even), or just under one ulp to round up, then truncate.
    const std::uint64_t lsb = (value.significand >> shift) & 1u;
    const std::uint64_t ulp_minus_one = (std::uint64_t(1) << shift) - 1;
    std::uint64_t increment = 0;
    if constexpr (Rounding == rounding::nearest_even) increment = (ulp_minus_one >> 1) + lsb;
    if constexpr (Rounding == rounding::upward) increment = negative ? 0 : ulp_minus_one;
    quanta = (value.significand + increment) >> shift;
  } else {
    const discarded_bits dropped = split_significand(value.significand, shift, quanta);
    bool round_up = false;
    if constexpr (Rounding == rounding::nearest_even) {
      round_up = dropped.above_half || (dropped.exactly_half && (quanta & 1u));
    } else if constexpr (Rounding == rounding::upward) {
      round_up = dropped.any && !negative;
    } else if constexpr (Rounding == rounding::stochastic) {
      // Up iff fraction + random >= 1 (both 32-bit fixed point): P(up) = fraction, exact values
      // never move, and the same random bits always give the same result.
      round_up = std::uint64_t(dropped.top32) + random_bits >= (std::uint64_t(1) << 32);
    }
    quanta += round_up ? 1u : 0u;
  }

  // Step 4. Codes count quanta upward from the bottom of the lowest binade.
  if (quanta == 0) return zero;  // underflow
  const std::int64_t lowest_binade_offset = To::has_subnormals ? 0 : (std::int64_t(1) << To::mantissa_bits);
  const std::int64_t magnitude =
      (std::int64_t(binade_exponent - traits::min_normal_exponent) << traits::mantissa_bits) +
      std::int64_t(quanta) - lowest_binade_offset;

  // Step 5.
  if (magnitude > std::int64_t(traits::max_finite_code)) return overflowed;
  return storage(sign | storage(magnitude));
}

// --- Sources: anything the conversion accepts, split into exact parts. ---

template <class T, class = void>
struct source_traits {};  // not convertible

template <>
struct source_traits<float> {
  FP8_HOST_DEVICE static FP8_BIT_CAST_CONSTEXPR unpacked unpack(float x) noexcept {
    return unpack_code<binary32_format>(bit_cast<std::uint32_t>(x));
  }
};
template <>
struct source_traits<double> {
  FP8_HOST_DEVICE static FP8_BIT_CAST_CONSTEXPR unpacked unpack(double x) noexcept {
    return unpack_code<binary64_format>(bit_cast<std::uint64_t>(x));
  }
};
template <class Integer>
struct source_traits<Integer,
                     std::enable_if_t<std::is_integral_v<Integer> && !std::is_same_v<Integer, bool>>> {
  FP8_HOST_DEVICE static constexpr unpacked unpack(Integer x) noexcept { return unpack_integer(x); }
};

template <class T, class = void>
struct is_source : std::false_type {};
template <class T>
struct is_source<T, std::void_t<decltype(source_traits<T>::unpack(std::declval<const T&>()))>>
    : std::true_type {};
template <class T>
inline constexpr bool is_source_v = is_source<T>::value;

// sm_89 and newer convert float to E4M3/E5M2 with round-to-nearest-even + saturate-to-finite (NaN ->
// 0x7F) in one instruction, `cvt.rn.satfinite`, bit-identical to round_and_pack for every float.
template <class To, rounding Rounding, overflow Overflow, class From>
inline constexpr bool has_hardware_conversion_v =
    std::is_same_v<From, float>&& Rounding == rounding::nearest_even&& Overflow == overflow::saturate &&
    (std::is_same_v<To, e4m3_format> || std::is_same_v<To, e5m2_format>);

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 890)
#define FP8_HARDWARE_CONVERSION 1
template <class To>
__device__ inline std::uint8_t hardware_convert(float value) {
  std::uint16_t packed;  // the instruction converts two floats; the first operand lands in the high byte
  if constexpr (std::is_same_v<To, e4m3_format>) {
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(packed) : "f"(0.0f), "f"(value));
  } else {
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(packed) : "f"(0.0f), "f"(value));
  }
  return std::uint8_t(packed & 0xFFu);
}
#else
#define FP8_HARDWARE_CONVERSION 0
#endif

}  // namespace detail

// Converts `value` to the code of format `To` (a descriptor of format.hpp), rounding once.
// `random_bits` is read only by rounding::stochastic. In device code for sm_89+, the default policy
// from float is the hardware instruction (except in constant evaluation); the result is the same.
template <class To, rounding Rounding = rounding::nearest_even, overflow Overflow = To::default_overflow,
          class From>
FP8_HOST_DEVICE constexpr typename To::storage convert_bits(const From& value,
                                                            std::uint32_t random_bits = 0) noexcept {
#if FP8_HARDWARE_CONVERSION
  if constexpr (detail::has_hardware_conversion_v<To, Rounding, Overflow, From>) {
    if (!__builtin_is_constant_evaluated()) return detail::hardware_convert<To>(value);
  }
#endif
  return detail::round_and_pack<To, Rounding, Overflow>(detail::source_traits<From>::unpack(value),
                                                        random_bits);
}

// Produces a float or double from a code: exact for every format here (all are narrower than float,
// except double from double), so no policy applies.
template <class Real, class Format>
FP8_HOST_DEVICE FP8_BIT_CAST_CONSTEXPR Real decode(typename Format::storage code) noexcept {
  static_assert(std::is_same_v<Real, float> || std::is_same_v<Real, double>, "decode to float or double");
  using wide_format = std::conditional_t<std::is_same_v<Real, float>, binary32_format, binary64_format>;
  static_assert(format_traits<Format>::mantissa_bits <= format_traits<wide_format>::mantissa_bits,
                "decode would round");
  const auto unpacked_code = detail::unpack_code<Format>(code);
  if (unpacked_code.what == detail::unpacked::kind::nan) {
    // Keep the sign of a NaN; quiet it.
    const auto nan = wide_format::canonical_nan;
    return detail::bit_cast<Real>(
        unpacked_code.negative ? decltype(nan)(nan | format_traits<wide_format>::sign_mask) : nan);
  }
  return detail::bit_cast<Real>(
      detail::round_and_pack<wide_format, rounding::nearest_even, overflow::nonsaturating>(unpacked_code, 0));
}

}  // namespace fp8
