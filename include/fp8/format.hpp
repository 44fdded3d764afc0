// Format descriptors: the single source of every constant of a binary floating-point format (field
// widths, bias, which codes are NaN or Inf). The conversion routine and the types derive all else.
#pragma once

#include <cstdint>

#include "config.hpp"

namespace fp8 {

// How a format spends its all-ones exponent field.
enum class special_values {
  ieee,            // exponent all ones: mantissa 0 is +-Inf, anything else NaN (E5M2, bf16, half)
  nan_all_ones,    // no Inf; only the all-ones magnitude is NaN ("fn" formats: E4M3, E8M0)
};

// What a conversion does with a value beyond the largest finite one (judged after rounding).
enum class overflow {
  saturate,       // clamp to +-max finite; +-Inf also becomes +-max; NaN stays NaN
  nonsaturating,  // become +-Inf where the format has it, NaN otherwise
};

// --- The descriptors. Each says only what defines the format; format_traits derives the rest. ---

// OCP FP8 E4M3 ("float8_e4m3fn"): 0b0'1111'110 = 448 is the largest finite value, 0b0'1111'111 NaN.
struct e4m3_format {
  using storage = std::uint8_t;
  static constexpr int exponent_bits = 4;
  static constexpr int mantissa_bits = 3;
  static constexpr int bias = 7;
  static constexpr bool has_sign = true;
  static constexpr bool has_subnormals = true;
  static constexpr special_values specials = special_values::nan_all_ones;
  static constexpr storage canonical_nan = 0b0'1111'111;  // what NaN inputs become (CUDA: 0x7F)
  static constexpr overflow default_overflow = overflow::saturate;  // as __nv_fp8_e4m3(float)
  static constexpr const char* name = "e4m3";
};

// OCP FP8 E5M2: IEEE-style; 0b0'11110'11 = 57344 is the largest finite value, 0b0'11111'00 is +Inf.
struct e5m2_format {
  using storage = std::uint8_t;
  static constexpr int exponent_bits = 5;
  static constexpr int mantissa_bits = 2;
  static constexpr int bias = 15;
  static constexpr bool has_sign = true;
  static constexpr bool has_subnormals = true;
  static constexpr special_values specials = special_values::ieee;
  static constexpr storage canonical_nan = 0b0'11111'11;  // CUDA's float path gives 0x7F
  static constexpr overflow default_overflow = overflow::saturate;  // as __nv_fp8_e5m2(float)
  static constexpr const char* name = "e5m2";
};

// OCP MX E8M0 block scale: an unsigned power of two 2^(code - 127), code 0..254; 0xFF is NaN.
// No sign (negative inputs convert their magnitude), no zero (underflow gives 2^-127), no subnormals.
struct e8m0_format {
  using storage = std::uint8_t;
  static constexpr int exponent_bits = 8;
  static constexpr int mantissa_bits = 0;
  static constexpr int bias = 127;
  static constexpr bool has_sign = false;
  static constexpr bool has_subnormals = false;
  static constexpr special_values specials = special_values::nan_all_ones;
  static constexpr storage canonical_nan = 0b1111'1111;
  static constexpr overflow default_overflow = overflow::saturate;
  static constexpr const char* name = "e8m0";
};

// bfloat16 (storage format for BF16 training): float's exponent with 7 mantissa bits.
struct bf16_format {
  using storage = std::uint16_t;
  static constexpr int exponent_bits = 8;
  static constexpr int mantissa_bits = 7;
  static constexpr int bias = 127;
  static constexpr bool has_sign = true;
  static constexpr bool has_subnormals = true;
  static constexpr special_values specials = special_values::ieee;
  static constexpr storage canonical_nan = 0b0'11111111'1000000;  // quiet NaN 0x7FC0
  static constexpr overflow default_overflow = overflow::nonsaturating;  // IEEE: overflow is Inf
  static constexpr const char* name = "bf16";
};

// IEEE binary16 ("half").
struct fp16_format {
  using storage = std::uint16_t;
  static constexpr int exponent_bits = 5;
  static constexpr int mantissa_bits = 10;
  static constexpr int bias = 15;
  static constexpr bool has_sign = true;
  static constexpr bool has_subnormals = true;
  static constexpr special_values specials = special_values::ieee;
  static constexpr storage canonical_nan = 0b0'11111'1000000000;  // quiet NaN 0x7E00
  static constexpr overflow default_overflow = overflow::nonsaturating;
  static constexpr const char* name = "fp16";
};

// IEEE binary32 and binary64, described the same way so float and double are decoded and produced by
// the same routine as the small formats.
struct binary32_format {
  using storage = std::uint32_t;
  static constexpr int exponent_bits = 8;
  static constexpr int mantissa_bits = 23;
  static constexpr int bias = 127;
  static constexpr bool has_sign = true;
  static constexpr bool has_subnormals = true;
  static constexpr special_values specials = special_values::ieee;
  static constexpr storage canonical_nan = 0x7FC00000u;
  static constexpr overflow default_overflow = overflow::nonsaturating;
  static constexpr const char* name = "binary32";
};

struct binary64_format {
  using storage = std::uint64_t;
  static constexpr int exponent_bits = 11;
  static constexpr int mantissa_bits = 52;
  static constexpr int bias = 1023;
  static constexpr bool has_sign = true;
  static constexpr bool has_subnormals = true;
  static constexpr special_values specials = special_values::ieee;
  static constexpr storage canonical_nan = 0x7FF8000000000000ull;
  static constexpr overflow default_overflow = overflow::nonsaturating;
  static constexpr const char* name = "binary64";
};

// Everything derived from a descriptor. Codes are compared as magnitudes (sign bit cleared): for all
// these formats the magnitude codes are ordered like the values they encode.
template <class Format>
struct format_traits {
  using storage = typename Format::storage;
  static constexpr int exponent_bits = Format::exponent_bits;
  static constexpr int mantissa_bits = Format::mantissa_bits;
  static constexpr int bias = Format::bias;
  static constexpr int total_bits = (Format::has_sign ? 1 : 0) + exponent_bits + mantissa_bits;
  static_assert(total_bits <= 8 * int(sizeof(storage)), "storage too small for the format");

  static constexpr storage sign_mask =
      Format::has_sign ? storage(storage(1) << (total_bits - 1)) : storage(0);
  static constexpr storage mantissa_mask = storage((storage(1) << mantissa_bits) - 1);
  static constexpr storage magnitude_mask =
      storage((std::uint64_t(1) << (exponent_bits + mantissa_bits)) - 1);
  static constexpr storage exponent_mask = storage(magnitude_mask & ~mantissa_mask);

  static constexpr bool has_infinity = Format::specials == special_values::ieee;
  static constexpr storage infinity_code = has_infinity ? exponent_mask : storage(0);
  // Largest finite magnitude: just below Inf (ieee) or just below the all-ones NaN (fn formats).
  static constexpr storage max_finite_code =
      has_infinity ? storage(exponent_mask - 1) : storage(magnitude_mask - 1);
  // Smallest positive normal: biased exponent 1, or 0 where the format has no subnormals (E8M0).
  static constexpr int min_normal_biased_exponent = Format::has_subnormals ? 1 : 0;
  static constexpr storage min_normal_code = storage(storage(min_normal_biased_exponent) << mantissa_bits);
  static constexpr storage min_positive_code = Format::has_subnormals ? storage(1) : min_normal_code;
  static constexpr bool has_zero = Format::has_subnormals;  // only E8M0-like formats lack zero

  // Unbiased exponents of the smallest normal and of the largest finite value.
  static constexpr int min_normal_exponent = min_normal_biased_exponent - bias;
  static constexpr int max_exponent = int(max_finite_code >> mantissa_bits) - bias;

  FP8_HOST_DEVICE static constexpr bool is_nan_code(storage code) noexcept {
    const storage magnitude = storage(code & magnitude_mask);
    return has_infinity ? magnitude > infinity_code : magnitude == magnitude_mask;
  }
  FP8_HOST_DEVICE static constexpr bool is_inf_code(storage code) noexcept {
    return has_infinity && storage(code & magnitude_mask) == infinity_code;
  }
};

}  // namespace fp8
