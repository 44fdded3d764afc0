// Format descriptors: the single source of every constant of a binary floating-point format (field
// widths, bias, which codes are NaN or Inf). The conversion routine and the types derive all else.
#pragma once

#include <cstdint>

#include "config.hpp"

namespace fp8 {

// Which codes of a format are special. The names follow ml_dtypes' suffixes: "fn" = finite (no Inf),
// "uz" = unsigned zero (the would-be -0 is the NaN).
enum class special_values {
  ieee,               // exponent all ones: mantissa 0 is +-Inf, anything else NaN (E5M2, bf16, half)
  nan_all_ones,       // no Inf; only the all-ones magnitude is NaN ("fn" formats: E4M3, E8M0)
  nan_negative_zero,  // no Inf, no -0; the single NaN is the sign bit alone, 0x80 ("fnuz" formats)
  none,               // no Inf, no NaN: every code is a finite number (OCP MX FP4 and FP6)
};

// What a conversion does with a value beyond the largest finite one (judged after rounding).
enum class overflow {
  saturate,       // clamp to +-max finite; +-Inf also becomes +-max; NaN stays NaN
  nonsaturating,  // become +-Inf where the format has it, NaN otherwise; formats with neither
                  // (FP4, FP6) have nothing to overflow to and saturate under both policies
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
  static constexpr storage canonical_nan = 0b0'1111'111;            // what NaN inputs become (CUDA: 0x7F)
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
  static constexpr storage canonical_nan = 0b0'11111'11;            // CUDA's float path gives 0x7F
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

// --- The formats beyond OCP FP8 (ml_dtypes names in brackets). ---

// OCP MX FP4 E2M1 [float4_e2m1fn]: values +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}; no Inf, no NaN. A NaN input
// becomes +6 (0b0'11'1), as CUDA's __nv_cvt_float_to_fp4 does. Four bits, stored one per byte here
// (packed two per byte by packed.hpp).
struct e2m1_format {
  using storage = std::uint8_t;
  static constexpr int exponent_bits = 2;
  static constexpr int mantissa_bits = 1;
  static constexpr int bias = 1;
  static constexpr bool has_sign = true;
  static constexpr bool has_subnormals = true;
  static constexpr special_values specials = special_values::none;
  static constexpr storage canonical_nan = 0b0'11'1;  // NaN input -> +max (no NaN code exists)
  static constexpr overflow default_overflow = overflow::saturate;
  static constexpr const char* name = "e2m1";
};

// OCP MX FP6 E2M3 [float6_e2m3fn]: max 7.5 (0b0'11'111), min subnormal 2^-3; no Inf, no NaN.
struct e2m3_format {
  using storage = std::uint8_t;
  static constexpr int exponent_bits = 2;
  static constexpr int mantissa_bits = 3;
  static constexpr int bias = 1;
  static constexpr bool has_sign = true;
  static constexpr bool has_subnormals = true;
  static constexpr special_values specials = special_values::none;
  static constexpr storage canonical_nan = 0b0'11'111;  // NaN input -> +max, as CUDA's fp6 conversion
  static constexpr overflow default_overflow = overflow::saturate;
  static constexpr const char* name = "e2m3";
};

// OCP MX FP6 E3M2 [float6_e3m2fn]: max 28 (0b0'111'11), min subnormal 2^-4; no Inf, no NaN.
struct e3m2_format {
  using storage = std::uint8_t;
  static constexpr int exponent_bits = 3;
  static constexpr int mantissa_bits = 2;
  static constexpr int bias = 3;
  static constexpr bool has_sign = true;
  static constexpr bool has_subnormals = true;
  static constexpr special_values specials = special_values::none;
  static constexpr storage canonical_nan = 0b0'111'11;  // NaN input -> +max, as CUDA's fp6 conversion
  static constexpr overflow default_overflow = overflow::saturate;
  static constexpr const char* name = "e3m2";
};

// AMD MI300's E4M3 [float8_e4m3fnuz]: bias 8, max 240 (0b0'1111'111), no Inf, no -0, NaN 0b1'0000'000.
struct e4m3fnuz_format {
  using storage = std::uint8_t;
  static constexpr int exponent_bits = 4;
  static constexpr int mantissa_bits = 3;
  static constexpr int bias = 8;
  static constexpr bool has_sign = true;
  static constexpr bool has_subnormals = true;
  static constexpr special_values specials = special_values::nan_negative_zero;
  static constexpr storage canonical_nan = 0b1'0000'000;
  static constexpr overflow default_overflow = overflow::saturate;
  static constexpr const char* name = "e4m3fnuz";
};

// AMD MI300's E5M2 [float8_e5m2fnuz]: bias 16, max 57344 (0b0'11111'11), no Inf, no -0, NaN 0x80.
struct e5m2fnuz_format {
  using storage = std::uint8_t;
  static constexpr int exponent_bits = 5;
  static constexpr int mantissa_bits = 2;
  static constexpr int bias = 16;
  static constexpr bool has_sign = true;
  static constexpr bool has_subnormals = true;
  static constexpr special_values specials = special_values::nan_negative_zero;
  static constexpr storage canonical_nan = 0b1'00000'00;
  static constexpr overflow default_overflow = overflow::saturate;
  static constexpr const char* name = "e5m2fnuz";
};

// IEEE-style E3M4 [float8_e3m4]: bias 3, max 15.5 (0b0'110'1111), Inf 0b0'111'0000.
struct e3m4_format {
  using storage = std::uint8_t;
  static constexpr int exponent_bits = 3;
  static constexpr int mantissa_bits = 4;
  static constexpr int bias = 3;
  static constexpr bool has_sign = true;
  static constexpr bool has_subnormals = true;
  static constexpr special_values specials = special_values::ieee;
  static constexpr storage canonical_nan = 0b0'111'1000;  // quiet NaN
  static constexpr overflow default_overflow = overflow::saturate;
  static constexpr const char* name = "e3m4";
};

// IEEE-style E4M3 [float8_e4m3]: bias 7 like OCP E4M3 but the all-ones exponent is Inf/NaN, so the
// largest finite value is 240 (0b0'1110'111), not 448. Not the OCP/CUDA E4M3 of e4m3_format.
struct e4m3_ieee_format {
  using storage = std::uint8_t;
  static constexpr int exponent_bits = 4;
  static constexpr int mantissa_bits = 3;
  static constexpr int bias = 7;
  static constexpr bool has_sign = true;
  static constexpr bool has_subnormals = true;
  static constexpr special_values specials = special_values::ieee;
  static constexpr storage canonical_nan = 0b0'1111'100;  // quiet NaN
  static constexpr overflow default_overflow = overflow::saturate;
  static constexpr const char* name = "e4m3_ieee";
};

// NVFP4's block scale UE4M3: OCP E4M3 without the sign (7 bits in a byte; bit 7 is ignored when
// decoding and always 0 when encoding). Max 448 (0x7E), NaN 0x7F, min subnormal 2^-9. Negative inputs
// convert their magnitude, as for E8M0.
struct ue4m3_format {
  using storage = std::uint8_t;
  static constexpr int exponent_bits = 4;
  static constexpr int mantissa_bits = 3;
  static constexpr int bias = 7;
  static constexpr bool has_sign = false;
  static constexpr bool has_subnormals = true;
  static constexpr special_values specials = special_values::nan_all_ones;
  static constexpr storage canonical_nan = 0b1111'111;
  static constexpr overflow default_overflow = overflow::saturate;
  static constexpr const char* name = "ue4m3";
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
  static constexpr storage canonical_nan = 0b0'11111111'1000000;         // quiet NaN 0x7FC0
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
  static constexpr bool has_nan = Format::specials != special_values::none;
  static constexpr storage infinity_code = has_infinity ? exponent_mask : storage(0);
  // Largest finite magnitude: just below Inf (ieee), just below the all-ones NaN (fn formats), or the
  // all-ones magnitude itself where no magnitude is special (fnuz, FP4/FP6).
  static constexpr storage max_finite_code =
      has_infinity
          ? storage(exponent_mask - 1)
          : (Format::specials == special_values::nan_all_ones ? storage(magnitude_mask - 1) : magnitude_mask);
  // Smallest positive normal: biased exponent 1, or 0 where the format has no subnormals (E8M0).
  static constexpr int min_normal_biased_exponent = Format::has_subnormals ? 1 : 0;
  static constexpr storage min_normal_code = storage(storage(min_normal_biased_exponent) << mantissa_bits);
  static constexpr storage min_positive_code = Format::has_subnormals ? storage(1) : min_normal_code;
  static constexpr bool has_zero = Format::has_subnormals;  // only E8M0-like formats lack zero
  // fnuz formats spend the -0 code on NaN: zero results are always +0 there.
  static constexpr bool has_negative_zero =
      Format::has_sign && has_zero && Format::specials != special_values::nan_negative_zero;
  // What non-saturating overflow produces (before the sign): Inf, else the NaN, else max (FP4/FP6).
  static constexpr storage overflow_code =
      has_infinity ? infinity_code : (has_nan ? Format::canonical_nan : max_finite_code);

  // Unbiased exponents of the smallest normal and of the largest finite value.
  static constexpr int min_normal_exponent = min_normal_biased_exponent - bias;
  static constexpr int max_exponent = int(max_finite_code >> mantissa_bits) - bias;

  FP8_HOST_DEVICE static constexpr bool is_nan_code(storage code) noexcept {
    const storage magnitude = storage(code & magnitude_mask);
    switch (Format::specials) {
      case special_values::ieee: return magnitude > infinity_code;
      case special_values::nan_all_ones: return magnitude == magnitude_mask;
      case special_values::nan_negative_zero: return magnitude == 0 && (code & sign_mask) != 0;
      case special_values::none: break;
    }
    return false;
  }
  FP8_HOST_DEVICE static constexpr bool is_inf_code(storage code) noexcept {
    return has_infinity && storage(code & magnitude_mask) == infinity_code;
  }
};

}  // namespace fp8
