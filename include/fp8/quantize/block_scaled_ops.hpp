// The kernels under the MX / NVFP4 block quantizers (mx.hpp, nvfp4.hpp): block maxima, the two scale
// rules (E8M0 for MX, UE4M3 for NVFP4), float -> small-format encoding (nearest even, saturating) and
// FP4 / FP6 packing, 16 (AVX-512), 8 (AVX2) or 1 (scalar) floats at a time; with AVX-512 VBMI the FP4
// encoder is a table lookup that the scalar conversion fills. block_ops names the set this translation
// unit uses (isa.hpp, and FP8_BLOCK_FP4_LOOKUP below). Every vector result equals the scalar one,
// which is fp8::convert_bits<Format, nearest_even, saturate> itself; the tests check this in all four
// builds (scalar, AVX2, AVX-512, AVX-512 with VBMI).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../config.hpp"
#include "../convert.hpp"
#include "../format.hpp"
#include "../scaling/scale.hpp"
#include "isa.hpp"

#if FP8_QUANTIZE_ISA_AVX512 || FP8_QUANTIZE_ISA_AVX2
#include <immintrin.h>
#endif

// The AVX-512 kernels have a faster FP4 encoder (a table lookup) and a vector FP6 packer where the
// compiler also targets AVX-512 VBMI (vpermb, vpmultishiftqb: Ice Lake and later) and DQ (vrangeps).
// FP8_BLOCK_ABI_NAMESPACE keeps the two AVX-512 variants apart at link time, like the instruction-set
// namespaces of isa.hpp: translation units built with and without VBMI get different symbols.
#if FP8_QUANTIZE_ISA_AVX512 && defined(__AVX512VBMI__) && defined(__AVX512DQ__)
#define FP8_BLOCK_FP4_LOOKUP 1
#define FP8_BLOCK_ABI_NAMESPACE block_vbmi
#define FP8_BLOCK_KERNELS_NAME "avx512 + vbmi lookup"
#else
#define FP8_BLOCK_FP4_LOOKUP 0
#define FP8_BLOCK_ABI_NAMESPACE block_base
#define FP8_BLOCK_KERNELS_NAME FP8_QUANTIZE_ISA_NAME
#endif

namespace fp8::detail {

// The integer recipe the vector encoders follow, on a = bits(|x|) of a finite-or-Inf float x:
//  - saturate first: a = min(a, bits(max finite)). Every magnitude past max rounds to max or beyond,
//    and both saturate to max, so clamping the input is exact;
//  - normal range (a >= bits(min normal)): round float's 23-bit mantissa to M bits in integer
//    arithmetic and rebias in the same addition: code = (a + lsb + round_and_rebias) >> drop;
//  - subnormal range: add the float `magic` whose ulp is the format's subnormal quantum, so the FPU's
//    own nearest-even rounding does the work: code = bits(|x| + magic) - bits(magic).
//    E2M1: magic 2^22 (ulp 0.5); 0.75 + 2^22 is a tie that goes to even 2^22 + 1.0, code 2 = 1.0.
//  - the sign moves from bit 31 to the format's top bit (unsigned formats drop it).
// NaN never reaches these encoders: the block quantizers handle non-finite blocks before encoding.
template <class Format>
struct small_encoding {
  using traits = format_traits<Format>;
  using float_traits = format_traits<binary32_format>;
  static_assert(traits::total_bits <= 8 && Format::has_subnormals, "small formats with subnormals");

  static constexpr int drop = float_traits::mantissa_bits - traits::mantissa_bits;
  static constexpr std::uint32_t rebias = std::uint32_t(float_traits::bias - traits::bias)
                                          << traits::mantissa_bits;
  static constexpr std::uint32_t round_and_rebias = ((std::uint32_t(1) << (drop - 1)) - 1) - (rebias << drop);
  static constexpr std::uint32_t max_finite_bits =
      std::uint32_t(traits::max_exponent + float_traits::bias) << float_traits::mantissa_bits |
      (std::uint32_t(traits::max_finite_code & traits::mantissa_mask) << drop);
  static constexpr std::uint32_t min_normal_bits =
      std::uint32_t(traits::min_normal_exponent + float_traits::bias) << float_traits::mantissa_bits;
  static constexpr std::uint32_t magic_bits =
      std::uint32_t(traits::min_normal_exponent - traits::mantissa_bits + float_traits::mantissa_bits +
                    float_traits::bias)
      << float_traits::mantissa_bits;
  static constexpr int sign_shift = 32 - traits::total_bits;
  static constexpr std::uint32_t sign_mask = traits::sign_mask;
  static_assert(((max_finite_bits + ((max_finite_bits >> drop) & 1u) + round_and_rebias) >> drop) ==
                    traits::max_finite_code,
                "clamping to the largest value must encode to the largest code");
};

inline constexpr std::uint32_t float_infinity_bits = 0x7F800000u;

// One MXFP4 block of 32 floats with `Ops`' amax and packed encoder: returns the E8M0 scale (0xFF for a
// block holding NaN or Inf, whose 16 packed bytes are then zero).
template <class Ops>
std::uint8_t mx_fp4_block_generic(const float* p, int emax, std::uint8_t* packed) noexcept {
  const std::uint32_t amax_bits = Ops::amax_bits(p, 32);
  if (amax_bits >= float_infinity_bits) {
    std::memset(packed, 0, 16);
    return format_traits<e8m0_format>::magnitude_mask;
  }
  const std::uint8_t code = mx_scale_code_from_amax_bits(amax_bits, emax);
  Ops::encode_fp4_packed(p, 32, mx_element_multiplier(code), packed);
  return code;
}

// Two consecutive MXFP4 blocks: the two E8M0 codes as first | second << 8.
template <class Ops>
std::uint32_t mx_fp4_block_pair_generic(const float* p, int emax, std::uint8_t* packed) noexcept {
  return Ops::mx_fp4_block(p, emax, packed) | std::uint32_t(Ops::mx_fp4_block(p + 32, emax, packed + 16))
                                                  << 8;
}

// Sixteen consecutive NVFP4 blocks (256 floats): their UE4M3 scale codes and packed elements, the
// element multipliers read from `multipliers_by_code` (Ops::nvfp4_multipliers). Returns the mask of
// blocks holding NaN or Inf, whose outputs the caller overwrites.
template <class Ops>
std::uint32_t nvfp4_group_generic(const float* p, float encode_times_sixth, const float* multipliers_by_code,
                                  std::uint8_t* scales, std::uint8_t* packed) noexcept {
  std::uint32_t non_finite = 0;
  alignas(32) std::uint32_t amax_bits[16];
  for (int j = 0; j < 16; ++j) {
    amax_bits[j] = Ops::amax_bits(p + 16 * j, 16);
    if (amax_bits[j] >= float_infinity_bits) {
      non_finite |= 1u << j;
      amax_bits[j] = 0;
    }
  }
  Ops::nvfp4_scale_codes(amax_bits, encode_times_sixth, scales);
  for (int j = 0; j < 16; ++j)
    Ops::encode_fp4_packed(p + 16 * j, 16, multipliers_by_code[scales[j]], packed + 8 * j);
  return non_finite;
}

// Sixteen consecutive MXFP4 blocks (512 floats): their E8M0 codes and packed elements, block after
// block. Returns the mask of blocks holding NaN or Inf (scale 0xFF; the caller zeroes their elements).
template <class Ops>
std::uint32_t mx_fp4_group_generic(const float* p, int emax, std::uint8_t* scales,
                                   std::uint8_t* packed) noexcept {
  std::uint32_t non_finite = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = Ops::mx_fp4_block(p + 32 * j, emax, packed + 16 * j);
    if (scales[j] == format_traits<e8m0_format>::magnitude_mask) non_finite |= 1u << j;
  }
  return non_finite;
}

// Ops::mx_fp6_group<Format>, where Ops::has_mx_fp6_group (a template, so that callers can name it in
// an `if constexpr` branch for kernel sets without it).
template <class Ops, class Format>
std::uint32_t mx_fp6_group_of(const float* p, int emax, std::uint8_t* scales, std::uint8_t* packed) noexcept {
  return Ops::template mx_fp6_group<Format>(p, emax, scales, packed);
}

// The kernel sets differ between instruction sets (and, for AVX-512, with VBMI or without): an inline
// namespace per variant gives each its own symbols.
inline namespace FP8_BLOCK_ABI_NAMESPACE {

// "scalar", "avx2", "avx512" or "avx512 + vbmi lookup": the block kernels of this translation unit.
inline constexpr const char* block_kernels_name = FP8_BLOCK_KERNELS_NAME;

// --- Scalar: one value at a time, through the conversion routine itself. ---
// Every kernel set derives from block_ops_base<itself> (CRTP): it inherits the scalar operations it
// does not vectorise, and the block and group routines composed from its own amax and encoders
// (mx_fp4_block_generic and the others above) unless it defines faster ones, as AVX-512 does.
template <class Ops>
struct block_ops_base {
  static constexpr std::size_t width = 1;
  static std::uint32_t amax_bits(const float* p, std::size_t n) noexcept {
    std::uint32_t m = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t a = bit_cast<std::uint32_t>(p[i]) & 0x7FFFFFFFu;
      m = a > m ? a : m;
    }
    return m;
  }
  // Largest |x| bits over the finite values of n floats (any n).
  static std::uint32_t finite_amax_bits(const float* p, std::size_t n) noexcept {
    std::uint32_t m = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t a = bit_cast<std::uint32_t>(p[i]) & 0x7FFFFFFFu;
      m = (a < 0x7F800000u && a > m) ? a : m;
    }
    return m;
  }
  template <class Format>
  static void encode(const float* p, std::size_t n, float multiplier, std::uint8_t* codes) noexcept {
    for (std::size_t i = 0; i < n; ++i) {
      codes[i] =
          std::uint8_t(convert_bits<Format, rounding::nearest_even, overflow::saturate>(p[i] * multiplier));
    }
  }
  // NVFP4: the UE4M3 code of a finite block's scale and the multiplier of its elements (nvfp4.hpp):
  //   code = ue4m3(amax * encode_times_sixth),  multiplier = min(1 / (float(code) * tensor_decode), FLT_MAX)
  static std::uint8_t nvfp4_scale_code(std::uint32_t amax_bits, float encode_times_sixth) noexcept {
    return std::uint8_t(convert_bits<ue4m3_format>(bit_cast<float>(amax_bits) * encode_times_sixth));
  }
  // The codes of 16 finite blocks.
  static void nvfp4_scale_codes(const std::uint32_t* amax_bits, float encode_times_sixth,
                                std::uint8_t* codes) noexcept {
    for (int j = 0; j < 16; ++j) codes[j] = nvfp4_scale_code(amax_bits[j], encode_times_sixth);
  }
  static float nvfp4_multiplier(std::uint8_t code, float tensor_decode) noexcept {
    const float inverse = 1.0f / (decode<float, ue4m3_format>(code) * tensor_decode);
    return inverse < 3.40282347e+38f ? inverse : 3.40282347e+38f;
  }
  static void nvfp4_scale(std::uint32_t amax_bits, float encode_times_sixth, float tensor_decode,
                          std::uint8_t& code, float& multiplier) noexcept {
    code = nvfp4_scale_code(amax_bits, encode_times_sixth);
    multiplier = nvfp4_multiplier(code, tensor_decode);
  }
  // The multiplier depends on the tensor scale and the block's code only: multipliers_by_code[c] for
  // every finite code c (0..126; entry 127, the NaN code, is unused), computed once per tensor so that
  // no block divides.
  static void nvfp4_multipliers(float tensor_decode, float* multipliers_by_code) noexcept {
    for (int c = 0; c < 128; ++c) multipliers_by_code[c] = nvfp4_multiplier(std::uint8_t(c), tensor_decode);
  }
  // E2M1 codes of p[0..n) * multiplier packed two per byte (low nibble first); n even.
  static void encode_fp4_packed(const float* p, std::size_t n, float multiplier,
                                std::uint8_t* packed) noexcept {
    for (std::size_t i = 0; i < n; i += 2) {
      const auto lo =
          convert_bits<e2m1_format, rounding::nearest_even, overflow::saturate>(p[i] * multiplier);
      const auto hi =
          convert_bits<e2m1_format, rounding::nearest_even, overflow::saturate>(p[i + 1] * multiplier);
      packed[i / 2] = std::uint8_t(lo | hi << 4);
    }
  }
  static std::uint8_t mx_fp4_block(const float* p, int emax, std::uint8_t* packed) noexcept {
    return mx_fp4_block_generic<Ops>(p, emax, packed);
  }
  static std::uint32_t mx_fp4_block_pair(const float* p, int emax, std::uint8_t* packed) noexcept {
    return mx_fp4_block_pair_generic<Ops>(p, emax, packed);
  }
  static std::uint32_t nvfp4_group(const float* p, float encode_times_sixth, const float* multipliers_by_code,
                                   std::uint8_t* scales, std::uint8_t* packed) noexcept {
    return nvfp4_group_generic<Ops>(p, encode_times_sixth, multipliers_by_code, scales, packed);
  }
  static std::uint32_t mx_fp4_group(const float* p, int emax, std::uint8_t* scales,
                                    std::uint8_t* packed) noexcept {
    return mx_fp4_group_generic<Ops>(p, emax, scales, packed);
  }
  // Whether mx_fp6_group exists (a vector FP6 packer); without it MXFP6 packs through pack<>().
  static constexpr bool has_mx_fp6_group = false;
};

// The scalar set: the base as it is.
struct block_ops_scalar : block_ops_base<block_ops_scalar> {};

#if FP8_QUANTIZE_ISA_AVX512
struct block_ops_avx512 : block_ops_base<block_ops_avx512> {
  static constexpr std::size_t width = 16;
  // GCC 12's plain forms of several intrinsics pass an "undefined" source operand that trips a false
  // -Wmaybe-uninitialized (GCC PR 105593) under -Werror; the zero-masking forms with every lane
  // selected are the same instructions without it.
  static constexpr __mmask16 all_lanes = 0xFFFF;
  static constexpr __mmask8 all_quadwords = 0xFF;

  // Largest |x| bits of n floats, n a multiple of 16 (NaN bits exceed Inf bits, so NaN shows too).
  static std::uint32_t amax_bits(const float* p, std::size_t n) noexcept {
    const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
    __m512i m = _mm512_setzero_si512();
    for (std::size_t i = 0; i < n; i += width) {
      m = _mm512_maskz_max_epu32(all_lanes, m,
                                 _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(p + i)), magnitude));
    }
    const __m256i halves = _mm256_max_epu32(_mm512_maskz_extracti64x4_epi64(all_quadwords, m, 0),
                                            _mm512_maskz_extracti64x4_epi64(all_quadwords, m, 1));
    __m128i r = _mm_max_epu32(_mm256_castsi256_si128(halves), _mm256_extracti128_si256(halves, 1));
    r = _mm_max_epu32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(1, 0, 3, 2)));
    r = _mm_max_epu32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(2, 3, 0, 1)));
    return std::uint32_t(_mm_cvtsi128_si32(r));
  }
  static std::uint32_t finite_amax_bits(const float* p, std::size_t n) noexcept {
    const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
    const __m512i infinity = _mm512_set1_epi32(0x7F800000);
    __m512i m = _mm512_setzero_si512();
    std::size_t i = 0;
    for (; i + width <= n; i += width) {
      const __m512i a = _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(p + i)), magnitude);
      m = _mm512_mask_max_epu32(m, _mm512_cmplt_epu32_mask(a, infinity), m, a);
    }
    alignas(64) std::uint32_t lanes[width];
    _mm512_store_si512(lanes, m);
    std::uint32_t result = block_ops_scalar::finite_amax_bits(p + i, n - i);
    for (const std::uint32_t lane : lanes) result = lane > result ? lane : result;
    return result;
  }
  template <class Format, bool WithSign = true>
  static __m512i encode_vector(__m512 x) noexcept {
    using c = small_encoding<Format>;
    const __m512i bits = _mm512_castps_si512(x);
    const __m512i a = _mm512_maskz_min_epu32(all_lanes, _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF)),
                                             _mm512_set1_epi32(int(c::max_finite_bits)));
    const __m512i lsb =
        _mm512_and_si512(_mm512_maskz_srli_epi32(all_lanes, a, c::drop), _mm512_set1_epi32(1));
    const __m512i normal = _mm512_maskz_srli_epi32(
        all_lanes, _mm512_add_epi32(a, _mm512_add_epi32(lsb, _mm512_set1_epi32(int(c::round_and_rebias)))),
        c::drop);
    const __m512 magic = _mm512_castsi512_ps(_mm512_set1_epi32(int(c::magic_bits)));
    const __m512i subnormal = _mm512_sub_epi32(
        _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(a), magic)), _mm512_castps_si512(magic));
    __m512i code = _mm512_mask_blend_epi32(
        _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32(int(c::min_normal_bits))), normal, subnormal);
    if constexpr (WithSign && c::sign_mask != 0) {
      code = _mm512_or_si512(code, _mm512_and_si512(_mm512_maskz_srli_epi32(all_lanes, bits, c::sign_shift),
                                                    _mm512_set1_epi32(int(c::sign_mask))));
    }
    return code;
  }
  // Codes of p[0..n) * multiplier, one per byte; n a multiple of 16.
  template <class Format>
  static void encode(const float* p, std::size_t n, float multiplier, std::uint8_t* codes) noexcept {
    const __m512 m = _mm512_set1_ps(multiplier);
    for (std::size_t i = 0; i < n; i += width) {
      const __m512i code = encode_vector<Format>(_mm512_mul_ps(_mm512_loadu_ps(p + i), m));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i), _mm512_maskz_cvtepi32_epi8(all_lanes, code));
    }
  }
#if !FP8_BLOCK_FP4_LOOKUP  // (the lookup version is below)
  // E2M1 codes packed two per byte; n a multiple of 16. Each 64-bit lane holds an (even, odd) pair
  // of codes c0 | c1 << 32; c0 | c1 << 4 is its low byte after x | x >> 28.
  static void encode_fp4_packed(const float* p, std::size_t n, float multiplier,
                                std::uint8_t* packed) noexcept {
    const __m512 m = _mm512_set1_ps(multiplier);
    for (std::size_t i = 0; i < n; i += width) {
      const __m512i code = encode_vector<e2m1_format>(_mm512_mul_ps(_mm512_loadu_ps(p + i), m));
      const __m512i pairs = _mm512_or_si512(code, _mm512_maskz_srli_epi64(all_quadwords, code, 28));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(packed + i / 2),
                       _mm512_maskz_cvtepi64_epi8(all_quadwords, pairs));
    }
  }
#endif
  // The maximum of the 16 lanes, in every lane (no trip through a general-purpose register).
  static __m512i broadcast_max(__m512i m) noexcept {
    m = _mm512_maskz_max_epu32(all_lanes, m,
                               _mm512_maskz_shuffle_i32x4(all_lanes, m, m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm512_maskz_max_epu32(all_lanes, m,
                               _mm512_maskz_shuffle_i32x4(all_lanes, m, m, _MM_SHUFFLE(2, 3, 0, 1)));
    m = _mm512_maskz_max_epu32(all_lanes, m, _mm512_maskz_shuffle_epi32(all_lanes, m, _MM_PERM_BADC));
    return _mm512_maskz_max_epu32(all_lanes, m, _mm512_maskz_shuffle_epi32(all_lanes, m, _MM_PERM_CDAB));
  }
  static __m512i abs_bits(__m512 x) noexcept {
    return _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7FFFFFFF));
  }
  // Two vectors of E2M1 codes (elements 0-15 and 16-31) packed into 16 bytes. packus puts, in each
  // 128-bit lane i, elements 4i..4i+3 of both vectors side by side as 16-bit values; madd with
  // (1, 16) joins each (even, odd) pair into c0 + 16 c1 = the packed byte; the bytes then come out in
  // pair order 0 1 8 9 2 3 10 11 4 5 12 13 6 7 14 15, which one byte shuffle restores.
  static void store_fp4_pairs(__m512i codes_low, __m512i codes_high, std::uint8_t* packed) noexcept {
    const __m512i words = _mm512_maskz_packus_epi32(~__mmask32(0), codes_low, codes_high);
    const __m512i bytes = _mm512_maskz_madd_epi16(all_lanes, words, _mm512_set1_epi32(0x00100001));
    const __m128i scrambled = _mm512_maskz_cvtepi32_epi8(all_lanes, bytes);
    const __m128i order = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(packed), _mm_shuffle_epi8(scrambled, order));
  }
  // MXFP4 scale codes from block maxima (any lanes), the rule of mx_scale_code_from_amax_bits.
  static __m512i mx_scale_codes(__m512i amax, int emax) noexcept {
    const __m512i zero = _mm512_setzero_si512();
    const __m512i code = _mm512_maskz_max_epi32(
        all_lanes, _mm512_sub_epi32(_mm512_maskz_srli_epi32(all_lanes, amax, 23), _mm512_set1_epi32(emax)),
        zero);
    return _mm512_mask_mov_epi32(code, _mm512_cmpeq_epi32_mask(amax, zero),
                                 _mm512_set1_epi32(format_traits<e8m0_format>::bias));
  }
  // 2^(127 - code) in every lane.
  static __m512 mx_multipliers(__m512i code) noexcept {
    return _mm512_castsi512_ps(
        _mm512_maskz_slli_epi32(all_lanes, _mm512_sub_epi32(_mm512_set1_epi32(2 * 127), code), 23));
  }
  // E2M1 code with sign: the sign bit 31 lands on bit 3 in one ternary-logic step.
  static __m512i encode_fp4_signed(__m512 x, __m512 multiplier) noexcept {
    const __m512 scaled = _mm512_mul_ps(x, multiplier);
    const __m512i magnitude_code = encode_vector<e2m1_format, false>(scaled);
    // (sign >> 28) & 8 | code: imm 0xEA = (A & B) | C.
    return _mm512_ternarylogic_epi32(_mm512_maskz_srli_epi32(all_lanes, _mm512_castps_si512(scaled), 28),
                                     _mm512_set1_epi32(8), magnitude_code, 0xEA);
  }

#if FP8_BLOCK_FP4_LOOKUP
  static constexpr __mmask64 all_bytes = ~__mmask64(0);
  // E2M1 by table lookup, for y = x * multiplier (finite or Inf; NaN blocks are discarded anyway).
  // Nearest even to E2M1 is 0 for |y| <= 0.25 and 6 for |y| >= 6, so clamping |y| to [0.25, 6] is exact.
  // In between, the float's exponent is 125..129 (distinct modulo 8) and the code depends only on its
  // bits 21-25 (exponent mod 8, top two mantissa bits) and on whether any lower bit is set: OR-ing that
  // "sticky" flag into bit 20 (rounding to odd there) leaves a 6-bit class number in bits 20-25, and
  // every float of a class rounds to the same code (rounding to 1 mantissa bit needs the guard bit and
  // a sticky bit, both of which the class keeps). The 64-entry table holds the scalar conversion of one
  // member of each class, so the vector and scalar paths share the one rounding routine.
  struct fp4_table {
    alignas(64) std::uint8_t codes[64] = {};
    fp4_table() noexcept {
      for (std::uint32_t i = 0; i < 64; ++i) {
        for (std::uint32_t exponent = 125; exponent <= 129; ++exponent) {
          if ((exponent & 7u) != i >> 3) continue;  // classes 2-4 are unreachable: left 0
          const float member = bit_cast<float>(exponent << 23 | (i & 7u) << 20);
          codes[i] =
              std::uint8_t(convert_bits<e2m1_format, rounding::nearest_even, overflow::saturate>(member));
        }
      }
    }
  };
  using fp4_encoder = __m512i;  // the table, in a register
  static fp4_encoder make_fp4_encoder() noexcept {
    static const fp4_table table;
    return _mm512_load_si512(table.codes);
  }
  // y = x * multiplier encoded; in each 64-bit lane (elements 2k, 2k + 1) byte 0 is the packed byte
  // code(2k) | code(2k + 1) << 4 (other bytes: don't care).
  static __m512i fp4_pair_bytes(__m512 y, __m512i table) noexcept {
    // vrangeps imm 0x0A: the operand of smaller magnitude, sign cleared = min(|y|, 6).
    const __m512 clamped = _mm512_maskz_range_ps(all_lanes, y, _mm512_set1_ps(6.0f), 0x0A);
    __m512i bits = _mm512_maskz_max_epu32(all_lanes, _mm512_castps_si512(clamped),
                                          _mm512_set1_epi32(int(bit_cast<std::uint32_t>(0.25f))));
    const __mmask16 sticky = _mm512_test_epi32_mask(bits, _mm512_set1_epi32(0xFFFFF));
    bits = _mm512_mask_or_epi32(bits, sticky, bits, _mm512_set1_epi32(1 << 20));
    // Bytes 0 and 1 of each 64-bit lane: bits 20-27 of its two floats (the class numbers), and then
    // bits 28-35 / 60-3 of y, whose bit 3 is each float's sign.
    const __m512i index =
        _mm512_maskz_multishift_epi64_epi8(all_bytes, _mm512_set1_epi64(20 | 52 << 8), bits);
    const __m512i magnitude = _mm512_maskz_permutexvar_epi8(all_bytes, index, table);
    const __m512i signs = _mm512_maskz_multishift_epi64_epi8(all_bytes, _mm512_set1_epi64(28 | 60 << 8),
                                                             _mm512_castps_si512(y));
    const __m512i codes = _mm512_ternarylogic_epi32(signs, _mm512_set1_epi8(8), magnitude, 0xEA);
    // Bytes 0, 1 -> code 0 + 16 * code 1 in the low byte.
    return _mm512_maskz_maddubs_epi16(~__mmask32(0), codes, _mm512_set1_epi16(1 | 16 << 8));
  }
  // The packed bytes of two vectors (elements 0-15 and 16-31): byte 0 of each 64-bit lane, in order.
  static void store_fp4_pair_bytes(__m512i low, __m512i high, std::uint8_t* packed) noexcept {
    alignas(64) static constexpr std::uint8_t order[64] = {0,  8,  16, 24, 32, 40,  48,  56,
                                                           64, 72, 80, 88, 96, 104, 112, 120};
    const __m512i bytes = _mm512_maskz_permutex2var_epi8(all_bytes, low, _mm512_load_si512(order), high);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(packed),
                     _mm512_maskz_extracti32x4_epi32(__mmask8(0xF), bytes, 0));
  }
  // x0 * m0 (elements 0-15) and x1 * m1 (16-31) encoded and packed into 16 bytes.
  static void store_fp4(__m512 x0, __m512 m0, __m512 x1, __m512 m1, std::uint8_t* packed,
                        fp4_encoder table) noexcept {
    store_fp4_pair_bytes(fp4_pair_bytes(_mm512_mul_ps(x0, m0), table),
                         fp4_pair_bytes(_mm512_mul_ps(x1, m1), table), packed);
  }
  // E2M1 codes packed two per byte; n a multiple of 16.
  static void encode_fp4_packed(const float* p, std::size_t n, float multiplier,
                                std::uint8_t* packed) noexcept {
    const __m512 m = _mm512_set1_ps(multiplier);
    const fp4_encoder table = make_fp4_encoder();
    std::size_t i = 0;
    for (; i + 2 * width <= n; i += 2 * width)
      store_fp4(_mm512_loadu_ps(p + i), m, _mm512_loadu_ps(p + i + width), m, packed + i / 2, table);
    if (i < n) {
      const __m512i bytes = fp4_pair_bytes(_mm512_mul_ps(_mm512_loadu_ps(p + i), m), table);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(packed + i / 2),
                       _mm512_maskz_cvtepi64_epi8(all_quadwords, bytes));
    }
  }
#else
  struct fp4_encoder {};
  static fp4_encoder make_fp4_encoder() noexcept { return {}; }
  // x0 * m0 (elements 0-15) and x1 * m1 (16-31) encoded and packed into 16 bytes.
  static void store_fp4(__m512 x0, __m512 m0, __m512 x1, __m512 m1, std::uint8_t* packed,
                        fp4_encoder) noexcept {
    store_fp4_pairs(encode_fp4_signed(x0, m0), encode_fp4_signed(x1, m1), packed);
  }
#endif

  // Two MXFP4 blocks (64 floats) at once: their maxima share one reduction (block A in lanes 0-7,
  // block B in lanes 8-15). Returns the two E8M0 codes as A | B << 8, 0xFF for a block with NaN/Inf
  // (whose 16 packed bytes the caller zeroes).
  static std::uint32_t mx_fp4_block_pair(const float* p, int emax, std::uint8_t* packed) noexcept {
    const __m512 a0 = _mm512_loadu_ps(p), a1 = _mm512_loadu_ps(p + 16);
    const __m512 b0 = _mm512_loadu_ps(p + 32), b1 = _mm512_loadu_ps(p + 48);
    const __m512i ma = _mm512_maskz_max_epu32(all_lanes, abs_bits(a0), abs_bits(a1));
    const __m512i mb = _mm512_maskz_max_epu32(all_lanes, abs_bits(b0), abs_bits(b1));
    // Lanes 0-7: max of A's two halves; lanes 8-15: B's. Then reduce within each 256-bit half.
    __m512i m = _mm512_maskz_max_epu32(
        all_lanes, _mm512_maskz_shuffle_i32x4(all_lanes, ma, mb, _MM_SHUFFLE(1, 0, 1, 0)),
        _mm512_maskz_shuffle_i32x4(all_lanes, ma, mb, _MM_SHUFFLE(3, 2, 3, 2)));
    m = _mm512_maskz_max_epu32(all_lanes, m,
                               _mm512_maskz_shuffle_i32x4(all_lanes, m, m, _MM_SHUFFLE(2, 3, 0, 1)));
    m = _mm512_maskz_max_epu32(all_lanes, m, _mm512_maskz_shuffle_epi32(all_lanes, m, _MM_PERM_BADC));
    m = _mm512_maskz_max_epu32(all_lanes, m, _mm512_maskz_shuffle_epi32(all_lanes, m, _MM_PERM_CDAB));
    const __m512i code = mx_scale_codes(m, emax);
    const __m512 multiplier = mx_multipliers(code);
    const __m512 multiplier_a =
        _mm512_maskz_shuffle_f32x4(all_lanes, multiplier, multiplier, _MM_SHUFFLE(0, 0, 0, 0));
    const __m512 multiplier_b =
        _mm512_maskz_shuffle_f32x4(all_lanes, multiplier, multiplier, _MM_SHUFFLE(3, 3, 3, 3));
    const fp4_encoder encoder = make_fp4_encoder();
    store_fp4(a0, multiplier_a, a1, multiplier_a, packed, encoder);
    store_fp4(b0, multiplier_b, b1, multiplier_b, packed + 16, encoder);
    const __mmask16 special = _mm512_cmpge_epu32_mask(m, _mm512_set1_epi32(int(float_infinity_bits)));
    const __m512i codes = _mm512_mask_mov_epi32(code, special, _mm512_set1_epi32(0xFF));
    alignas(64) std::uint32_t lanes[16];
    _mm512_store_si512(lanes, codes);
    return lanes[0] | lanes[8] << 8;
  }

  // One MXFP4 block, the scale rule of mx_scale_code_from_amax_bits computed in vector registers.
  static std::uint8_t mx_fp4_block(const float* p, int emax, std::uint8_t* packed) noexcept {
    const __m512 x0 = _mm512_loadu_ps(p);
    const __m512 x1 = _mm512_loadu_ps(p + 16);
    const __m512i amax = broadcast_max(_mm512_maskz_max_epu32(all_lanes, abs_bits(x0), abs_bits(x1)));
    if (_mm512_cmpge_epu32_mask(amax, _mm512_set1_epi32(int(float_infinity_bits))) != 0) {
      std::memset(packed, 0, 16);
      return format_traits<e8m0_format>::magnitude_mask;
    }
    const __m512i code = mx_scale_codes(amax, emax);
    const __m512 multiplier = mx_multipliers(code);
    store_fp4(x0, multiplier, x1, multiplier, packed, make_fp4_encoder());
    return std::uint8_t(_mm_cvtsi128_si32(_mm512_maskz_extracti32x4_epi32(__mmask8(0xF), code, 0)));
  }

  // max(a, b) on float vectors holding magnitude bits (non-negative: unsigned compare of the bits).
  static __m512 max_bits(__m512 a, __m512 b) noexcept {
    return _mm512_castsi512_ps(
        _mm512_maskz_max_epu32(all_lanes, _mm512_castps_si512(a), _mm512_castps_si512(b)));
  }
  // Lane j = the largest of the 16 lanes of v[j] (magnitude bits): a reduction tree that halves the
  // vector count at each level while shuffling partial maxima of different blocks together (31
  // shuffles and maxima for 16 blocks instead of 8 per block). The tree leaves block j in lane
  // 4 (j % 4) + j / 4; one permutation puts it back.
  static __m512i transposed_max(const __m512* v) noexcept {
    __m512 w[8];
#pragma GCC unroll 16
    for (int i = 0; i < 8; ++i) {
      w[i] = max_bits(_mm512_maskz_shuffle_f32x4(all_lanes, v[2 * i], v[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                      _mm512_maskz_shuffle_f32x4(all_lanes, v[2 * i], v[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    __m512 x[4];
#pragma GCC unroll 16
    for (int i = 0; i < 4; ++i) {
      x[i] = max_bits(_mm512_maskz_shuffle_f32x4(all_lanes, w[2 * i], w[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                      _mm512_maskz_shuffle_f32x4(all_lanes, w[2 * i], w[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    }
    __m512 y[2];
#pragma GCC unroll 16
    for (int i = 0; i < 2; ++i) {
      y[i] = max_bits(_mm512_maskz_shuffle_ps(all_lanes, x[2 * i], x[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                      _mm512_maskz_shuffle_ps(all_lanes, x[2 * i], x[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    }
    const __m512 z = max_bits(_mm512_maskz_shuffle_ps(all_lanes, y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_maskz_shuffle_ps(all_lanes, y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_maskz_permutexvar_epi32(all_lanes, order, _mm512_castps_si512(z));
  }

  // Sixteen NVFP4 blocks: the block maxima gathered into one vector, all scale codes at once, the
  // multipliers read from the per-tensor table (no division on the way to the elements).
  static std::uint32_t nvfp4_group(const float* p, float encode_times_sixth, const float* multipliers_by_code,
                                   std::uint8_t* scales, std::uint8_t* packed) noexcept {
    __m512 v[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) v[j] = _mm512_castsi512_ps(abs_bits(_mm512_loadu_ps(p + 16 * j)));
    __m512i amax = transposed_max(v);
    const __mmask16 non_finite = _mm512_cmpge_epu32_mask(amax, _mm512_set1_epi32(int(float_infinity_bits)));
    amax = _mm512_maskz_mov_epi32(__mmask16(~non_finite), amax);
    const __m512i code = encode_vector<ue4m3_format>(
        _mm512_mul_ps(_mm512_castsi512_ps(amax), _mm512_set1_ps(encode_times_sixth)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(scales), _mm512_maskz_cvtepi32_epi8(all_lanes, code));
    const fp4_encoder encoder = make_fp4_encoder();
    for (int j = 0; j < 16; j += 2) {
      // Broadcast from memory: a load-port operation, leaving the shuffle port to the packing.
      store_fp4(_mm512_loadu_ps(p + 16 * j), _mm512_set1_ps(multipliers_by_code[scales[j]]),
                _mm512_loadu_ps(p + 16 * j + 16), _mm512_set1_ps(multipliers_by_code[scales[j + 1]]),
                packed + 8 * j, encoder);
    }
    return non_finite;
  }

  // Lane j: the largest |x| bits of MX block j (32 floats) of the 512 at p.
  static __m512i mx_group_max(const float* p) noexcept {
    __m512 v[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      v[j] = _mm512_castsi512_ps(_mm512_maskz_max_epu32(all_lanes, abs_bits(_mm512_loadu_ps(p + 32 * j)),
                                                        abs_bits(_mm512_loadu_ps(p + 32 * j + 16))));
    }
    return transposed_max(v);
  }
  // The E8M0 codes of 16 MX blocks from their maxima (0xFF where NaN or Inf), stored to scales, and
  // the element multipliers 2^(127 - code) stored to multipliers.
  static __mmask16 mx_group_scales(__m512i amax, int emax, std::uint8_t* scales,
                                   float* multipliers) noexcept {
    const __mmask16 non_finite = _mm512_cmpge_epu32_mask(amax, _mm512_set1_epi32(int(float_infinity_bits)));
    const __m512i code = mx_scale_codes(amax, emax);
    _mm512_store_ps(multipliers, mx_multipliers(code));
    const __m512i stored = _mm512_mask_mov_epi32(code, non_finite, _mm512_set1_epi32(0xFF));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(scales), _mm512_maskz_cvtepi32_epi8(all_lanes, stored));
    return non_finite;
  }
  // Sixteen MXFP4 blocks (512 floats): maxima and scales of all sixteen in vector registers, then the
  // elements block by block. Returns the mask of blocks with NaN or Inf, whose elements the caller zeroes.
  static std::uint32_t mx_fp4_group(const float* p, int emax, std::uint8_t* scales,
                                    std::uint8_t* packed) noexcept {
    alignas(64) float multipliers[16];
    const __mmask16 non_finite = mx_group_scales(mx_group_max(p), emax, scales, multipliers);
    const fp4_encoder encoder = make_fp4_encoder();
    for (int j = 0; j < 16; ++j) {
      const __m512 m = _mm512_set1_ps(multipliers[j]);
      store_fp4(_mm512_loadu_ps(p + 32 * j), m, _mm512_loadu_ps(p + 32 * j + 16), m, packed + 16 * j,
                encoder);
    }
    return non_finite;
  }

  static constexpr bool has_mx_fp6_group = true;
  // Two vectors of FP6 codes (elements 0-15 and 16-31, one per 32-bit lane) packed into 24 bytes.
  // packus puts, in 128-bit lane i, codes 4i..4i+3 of both vectors side by side as 16-bit values;
  // madd with (1, 64) joins each pair into a 12-bit value, and x | x >> 20 on each 64-bit lane joins
  // two of those into the 3 bytes of four codes (c0 | c1 << 6 | c2 << 12 | c3 << 18, packed.hpp's
  // layout, the fourth byte zero). Group g (codes 4g..4g+3) is then 32-bit lane 4 (g % 4) + 2 (g / 4).
  static void store_fp6(__m512i codes_low, __m512i codes_high, std::uint8_t* packed) noexcept {
    const __m512i words = _mm512_maskz_packus_epi32(~__mmask32(0), codes_low, codes_high);
    const __m512i pairs = _mm512_maskz_madd_epi16(all_lanes, words, _mm512_set1_epi32(0x00400001));
    const __m512i groups = _mm512_or_si512(pairs, _mm512_maskz_srli_epi64(all_quadwords, pairs, 20));
#if FP8_BLOCK_FP4_LOOKUP
    // One byte permutation gathers the eight 3-byte groups in element order.
    alignas(64) static constexpr std::uint8_t order[64] = {0, 1, 2,  16, 17, 18, 32, 33, 34, 48, 49, 50,
                                                           8, 9, 10, 24, 25, 26, 40, 41, 42, 56, 57, 58};
    const __m512i bytes = _mm512_maskz_permutexvar_epi8(all_bytes, _mm512_load_si512(order), groups);
    _mm256_mask_storeu_epi8(packed, 0xFFFFFF, _mm512_maskz_extracti64x4_epi64(all_quadwords, bytes, 0));
#else
    // Without vpermb: the groups in order as 32-bit lanes 0-7, each 128-bit lane's four squeezed to
    // 12 bytes, and the two 12-byte halves stored.
    const __m512i in_order = _mm512_maskz_permutexvar_epi32(
        all_lanes, _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0), groups);
    const __m512i squeezed = _mm512_maskz_shuffle_epi8(
        ~__mmask64(0), in_order,
        _mm512_maskz_broadcast_i32x4(all_lanes,
                                     _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1)));
    _mm_mask_storeu_epi8(packed, 0x0FFF, _mm512_maskz_extracti32x4_epi32(__mmask8(0xF), squeezed, 0));
    _mm_mask_storeu_epi8(packed + 12, 0x0FFF, _mm512_maskz_extracti32x4_epi32(__mmask8(0xF), squeezed, 1));
#endif
  }
  // Sixteen MXFP6 blocks (512 floats): scales as for MXFP4, elements by the arithmetic encoder and
  // store_fp6. Returns the mask of blocks with NaN or Inf, whose 24 bytes the caller zeroes.
  template <class Format>
  static std::uint32_t mx_fp6_group(const float* p, int emax, std::uint8_t* scales,
                                    std::uint8_t* packed) noexcept {
    alignas(64) float multipliers[16];
    const __mmask16 non_finite = mx_group_scales(mx_group_max(p), emax, scales, multipliers);
    for (int j = 0; j < 16; ++j) {
      const __m512 m = _mm512_set1_ps(multipliers[j]);
      store_fp6(encode_vector<Format>(_mm512_mul_ps(_mm512_loadu_ps(p + 32 * j), m)),
                encode_vector<Format>(_mm512_mul_ps(_mm512_loadu_ps(p + 32 * j + 16), m)), packed + 24 * j);
    }
    return non_finite;
  }
};
using block_ops = block_ops_avx512;
#elif FP8_QUANTIZE_ISA_AVX2
struct block_ops_avx2 : block_ops_base<block_ops_avx2> {
  static constexpr std::size_t width = 8;

  static std::uint32_t amax_bits(const float* p, std::size_t n) noexcept {
    const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
    __m256i m = _mm256_setzero_si256();
    for (std::size_t i = 0; i < n; i += width) {
      m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(p + i)), magnitude));
    }
    __m128i r = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    r = _mm_max_epu32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(1, 0, 3, 2)));
    r = _mm_max_epu32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(2, 3, 0, 1)));
    return std::uint32_t(_mm_cvtsi128_si32(r));
  }
  static std::uint32_t finite_amax_bits(const float* p, std::size_t n) noexcept {
    const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i infinity = _mm256_set1_epi32(0x7F800000);
    __m256i m = _mm256_setzero_si256();
    std::size_t i = 0;
    for (; i + width <= n; i += width) {
      const __m256i a = _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(p + i)), magnitude);
      // Non-finite lanes become 0 (both below 2^31: the signed compare is exact).
      m = _mm256_max_epu32(m, _mm256_and_si256(a, _mm256_cmpgt_epi32(infinity, a)));
    }
    alignas(32) std::uint32_t lanes[width];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), m);
    std::uint32_t result = block_ops_scalar::finite_amax_bits(p + i, n - i);
    for (const std::uint32_t lane : lanes) result = lane > result ? lane : result;
    return result;
  }
  template <class Format>
  static __m256i encode_vector(__m256 x) noexcept {
    using c = small_encoding<Format>;
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i a = _mm256_min_epu32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF)),
                                       _mm256_set1_epi32(int(c::max_finite_bits)));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(a, c::drop), _mm256_set1_epi32(1));
    const __m256i normal = _mm256_srli_epi32(
        _mm256_add_epi32(a, _mm256_add_epi32(lsb, _mm256_set1_epi32(int(c::round_and_rebias)))), c::drop);
    const __m256 magic = _mm256_castsi256_ps(_mm256_set1_epi32(int(c::magic_bits)));
    const __m256i subnormal = _mm256_sub_epi32(
        _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(a), magic)), _mm256_castps_si256(magic));
    // a < min_normal_bits, with the signed compare AVX2 has (both are below 2^31).
    const __m256i is_subnormal = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(c::min_normal_bits)), a);
    __m256i code = _mm256_blendv_epi8(normal, subnormal, is_subnormal);
    if constexpr (c::sign_mask != 0) {
      code = _mm256_or_si256(code, _mm256_and_si256(_mm256_srli_epi32(bits, c::sign_shift),
                                                    _mm256_set1_epi32(int(c::sign_mask))));
    }
    return code;
  }
  template <class Format>
  static void encode(const float* p, std::size_t n, float multiplier, std::uint8_t* codes) noexcept {
    const __m256 m = _mm256_set1_ps(multiplier);
    // The low byte of each 32-bit lane: bytes 0, 4, 8, 12 of each 128-bit half, then the halves joined.
    const __m256i low_bytes =
        _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                         0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    for (std::size_t i = 0; i < n; i += width) {
      const __m256i code = encode_vector<Format>(_mm256_mul_ps(_mm256_loadu_ps(p + i), m));
      const __m256i packed = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(code, low_bytes),
                                                         _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + i), _mm256_castsi256_si128(packed));
    }
  }
  // E2M1 codes packed two per byte; n a multiple of 8. Sixteen or thirty-two codes at a time: packus
  // narrows the 32-bit codes to bytes (leaving, in each 128-bit half, codes 4i..4i+3 of every vector
  // side by side), maddubs with (1, 16) joins each (even, odd) pair into its packed byte, packus narrows
  // again, and one 16-bit interleave of the two halves puts the bytes in element order.
  static void encode_fp4_packed(const float* p, std::size_t n, float multiplier,
                                std::uint8_t* packed) noexcept {
    const __m256 m = _mm256_set1_ps(multiplier);
    const __m256i pair_weights = _mm256_set1_epi16(1 | 16 << 8);
    auto codes = [&](std::size_t i) {
      return encode_vector<e2m1_format>(_mm256_mul_ps(_mm256_loadu_ps(p + i), m));
    };
    // Bytes (2 per vector and 128-bit half) -> element order, as 16-bit units of the two halves.
    auto in_order = [](__m256i bytes) {
      return _mm_unpacklo_epi16(_mm256_castsi256_si128(bytes), _mm256_extracti128_si256(bytes, 1));
    };
    std::size_t i = 0;
    for (; i + 4 * width <= n; i += 4 * width) {
      const __m256i narrow =
          _mm256_packus_epi16(_mm256_packus_epi32(codes(i), codes(i + width)),
                              _mm256_packus_epi32(codes(i + 2 * width), codes(i + 3 * width)));
      const __m256i joined = _mm256_maddubs_epi16(narrow, pair_weights);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(packed + i / 2),
                       in_order(_mm256_packus_epi16(joined, joined)));
    }
    for (; i + 2 * width <= n; i += 2 * width) {
      const __m256i words = _mm256_packus_epi32(codes(i), codes(i + width));
      const __m256i joined = _mm256_maddubs_epi16(_mm256_packus_epi16(words, words), pair_weights);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(packed + i / 2),
                       in_order(_mm256_packus_epi16(joined, joined)));
    }
    if (i < n) {  // 8 codes: the pairs' bytes at 0 and 8 of each half
      const __m256i code = codes(i);
      const __m256i first_bytes =
          _mm256_setr_epi8(0, 8, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                           0, 8, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
      const __m256i pairs =
          _mm256_shuffle_epi8(_mm256_or_si256(code, _mm256_srli_epi64(code, 28)), first_bytes);
      const std::uint32_t word = std::uint32_t(_mm_cvtsi128_si32(in_order(pairs)));
      std::memcpy(packed + i / 2, &word, sizeof word);
    }
  }
  // The codes of 16 finite NVFP4 blocks by the vector encoder (the scalar rule, 8 at a time).
  static void nvfp4_scale_codes(const std::uint32_t* amax_bits, float encode_times_sixth,
                                std::uint8_t* codes) noexcept {
    const __m256 e6 = _mm256_set1_ps(encode_times_sixth);
    for (int j = 0; j < 16; j += 8) {
      const __m256i code = encode_vector<ue4m3_format>(_mm256_mul_ps(
          _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(amax_bits + j))), e6));
      const __m256i words = _mm256_packus_epi32(code, code);
      const __m256i bytes = _mm256_packus_epi16(words, words);  // codes 4i..4i+3 at the front of half i
      const std::uint32_t low = std::uint32_t(_mm_cvtsi128_si32(_mm256_castsi256_si128(bytes)));
      const std::uint32_t high = std::uint32_t(_mm_cvtsi128_si32(_mm256_extracti128_si256(bytes, 1)));
      std::memcpy(codes + j, &low, sizeof low);
      std::memcpy(codes + j + 4, &high, sizeof high);
    }
  }
};
using block_ops = block_ops_avx2;
#else
using block_ops = block_ops_scalar;
#endif

}  // namespace FP8_BLOCK_ABI_NAMESPACE
}  // namespace fp8::detail
