// Element operations of the MX / NVFP4 block quantizers (mx.hpp, nvfp4.hpp): block amax and
// float -> small-format encoding (nearest even, saturating), 16 (AVX-512), 8 (AVX2) or 1 (scalar)
// floats at a time. Every vector result equals fp8::convert_bits<Format, nearest_even, saturate>.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../config.hpp"
#include "../convert.hpp"
#include "../format.hpp"
#include "isa.hpp"

#if FP8_QUANTIZE_ISA_AVX512 || FP8_QUANTIZE_ISA_AVX2
#include <immintrin.h>
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
  static constexpr std::uint32_t rebias = std::uint32_t(float_traits::bias - traits::bias) << traits::mantissa_bits;
  static constexpr std::uint32_t round_and_rebias = ((std::uint32_t(1) << (drop - 1)) - 1) - (rebias << drop);
  static constexpr std::uint32_t max_finite_bits =
      std::uint32_t(traits::max_exponent + float_traits::bias) << float_traits::mantissa_bits |
      (std::uint32_t(traits::max_finite_code & traits::mantissa_mask) << drop);
  static constexpr std::uint32_t min_normal_bits = std::uint32_t(traits::min_normal_exponent + float_traits::bias)
                                                   << float_traits::mantissa_bits;
  static constexpr std::uint32_t magic_bits =
      std::uint32_t(traits::min_normal_exponent - traits::mantissa_bits + float_traits::mantissa_bits + float_traits::bias)
      << float_traits::mantissa_bits;
  static constexpr int sign_shift = 32 - traits::total_bits;
  static constexpr std::uint32_t sign_mask = traits::sign_mask;
  static_assert(((max_finite_bits + ((max_finite_bits >> drop) & 1u) + round_and_rebias) >> drop) == traits::max_finite_code,
                "clamping to the largest value must encode to the largest code");
};

// --- Scalar: one value at a time, through the conversion routine itself. ---
struct block_ops_scalar {
  static constexpr std::size_t width = 1;
  static std::uint32_t amax_bits(const float* p, std::size_t n) noexcept {
    std::uint32_t m = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t a = bit_cast<std::uint32_t>(p[i]) & 0x7FFFFFFFu;
      m = a > m ? a : m;
    }
    return m;
  }
  template <class Format>
  static void encode(const float* p, std::size_t n, float multiplier, std::uint8_t* codes) noexcept {
    for (std::size_t i = 0; i < n; ++i) {
      codes[i] = std::uint8_t(convert_bits<Format, rounding::nearest_even, overflow::saturate>(p[i] * multiplier));
    }
  }
};

#if FP8_QUANTIZE_ISA_AVX512
struct block_ops_avx512 {
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
      m = _mm512_maskz_max_epu32(all_lanes, m, _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(p + i)), magnitude));
    }
    const __m256i halves = _mm256_max_epu32(_mm512_maskz_extracti64x4_epi64(all_quadwords, m, 0),
                                             _mm512_maskz_extracti64x4_epi64(all_quadwords, m, 1));
    __m128i r = _mm_max_epu32(_mm256_castsi256_si128(halves), _mm256_extracti128_si256(halves, 1));
    r = _mm_max_epu32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(1, 0, 3, 2)));
    r = _mm_max_epu32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(2, 3, 0, 1)));
    return std::uint32_t(_mm_cvtsi128_si32(r));
  }
  template <class Format>
  static __m512i encode_vector(__m512 x) noexcept {
    using c = small_encoding<Format>;
    const __m512i bits = _mm512_castps_si512(x);
    const __m512i a = _mm512_maskz_min_epu32(all_lanes, _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF)),
                                             _mm512_set1_epi32(int(c::max_finite_bits)));
    const __m512i lsb = _mm512_and_si512(_mm512_maskz_srli_epi32(all_lanes, a, c::drop), _mm512_set1_epi32(1));
    const __m512i normal = _mm512_maskz_srli_epi32(
        all_lanes, _mm512_add_epi32(a, _mm512_add_epi32(lsb, _mm512_set1_epi32(int(c::round_and_rebias)))), c::drop);
    const __m512 magic = _mm512_castsi512_ps(_mm512_set1_epi32(int(c::magic_bits)));
    const __m512i subnormal =
        _mm512_sub_epi32(_mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(a), magic)), _mm512_castps_si512(magic));
    __m512i code = _mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(a, _mm512_set1_epi32(int(c::min_normal_bits))),
                                           normal, subnormal);
    if constexpr (c::sign_mask != 0) {
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
};
using block_ops = block_ops_avx512;
#elif FP8_QUANTIZE_ISA_AVX2
struct block_ops_avx2 {
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
  template <class Format>
  static __m256i encode_vector(__m256 x) noexcept {
    using c = small_encoding<Format>;
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i a = _mm256_min_epu32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF)),
                                       _mm256_set1_epi32(int(c::max_finite_bits)));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(a, c::drop), _mm256_set1_epi32(1));
    const __m256i normal =
        _mm256_srli_epi32(_mm256_add_epi32(a, _mm256_add_epi32(lsb, _mm256_set1_epi32(int(c::round_and_rebias)))), c::drop);
    const __m256 magic = _mm256_castsi256_ps(_mm256_set1_epi32(int(c::magic_bits)));
    const __m256i subnormal =
        _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(a), magic)), _mm256_castps_si256(magic));
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
    const __m256i low_bytes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                                               0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    for (std::size_t i = 0; i < n; i += width) {
      const __m256i code = encode_vector<Format>(_mm256_mul_ps(_mm256_loadu_ps(p + i), m));
      const __m256i packed =
          _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(code, low_bytes), _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + i), _mm256_castsi256_si128(packed));
    }
  }
};
using block_ops = block_ops_avx2;
#else
using block_ops = block_ops_scalar;
#endif

}  // namespace fp8::detail
