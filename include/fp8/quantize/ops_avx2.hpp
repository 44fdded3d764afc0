// AVX2 (+ F16C) element operations for the quantize loops: 8 floats at a time, bit-identical to the
// scalar reference (the encoding is described in encoding_constants.hpp).
#pragma once

#include "isa.hpp"

#if FP8_QUANTIZE_ISA_AVX2

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "../float8.hpp"
#include "encoding_constants.hpp"

namespace fp8::detail {

struct avx2_ops {
  static constexpr std::size_t width = 8;
  using vfloat = __m256;
  using vbits = __m256i;

  static __m256i splat(std::uint32_t v) noexcept { return _mm256_set1_epi32(int(v)); }
  // a > b for values below 2^31 (all magnitudes and codes here are), with the signed compare AVX2 has.
  static __m256i greater(__m256i a, __m256i b) noexcept { return _mm256_cmpgt_epi32(a, b); }
  static __m256i select(__m256i mask, __m256i if_true, __m256i if_false) noexcept {
    return _mm256_blendv_epi8(if_false, if_true, mask);
  }

  static __m256 load(const float* p) noexcept { return _mm256_loadu_ps(p); }
  static __m256 load(const bfloat16* p) noexcept {
    const __m256i halves = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(halves, bf16_constants::shift));
  }
  static __m256 load(const float16* p) noexcept {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }

  static __m256i abs_bits(__m256 x) noexcept {
    return _mm256_and_si256(_mm256_castps_si256(x), splat(format_traits<binary32_format>::magnitude_mask));
  }
  static __m256i zero_bits() noexcept { return _mm256_setzero_si256(); }
  static __m256i max(__m256i a, __m256i b) noexcept { return _mm256_max_epu32(a, b); }
  static std::uint32_t reduce_max(__m256i a) noexcept {
    __m128i m = _mm_max_epu32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
    return std::uint32_t(_mm_cvtsi128_si32(m));
  }
  static __m256 mul(__m256 a, __m256 b) noexcept { return _mm256_mul_ps(a, b); }
  static __m256 broadcast(float x) noexcept { return _mm256_set1_ps(x); }

  template <class Format>
  static __m256i encode(__m256 x) noexcept {
    using c = encoding_constants<Format>;
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i a = _mm256_and_si256(bits, splat(c::magnitude_mask));
    const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, c::sign_shift), splat(c::sign_mask));
    // Saturation: clamp to the largest finite value (NaN is replaced below).
    const __m256i clamped = _mm256_min_epu32(a, splat(c::max_finite_bits));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(clamped, c::drop), splat(1));
    const __m256i normal = _mm256_srli_epi32(
        _mm256_add_epi32(clamped, _mm256_add_epi32(lsb, splat(c::round_and_rebias))), c::drop);
    const __m256 magic = _mm256_castsi256_ps(splat(c::subnormal_magic_bits));
    const __m256i subnormal = _mm256_sub_epi32(
        _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(a), magic)), _mm256_castps_si256(magic));
    __m256i code = select(greater(splat(c::min_normal_bits), a), subnormal, normal);
    code = _mm256_or_si256(code, sign);
    return select(greater(a, splat(c::infinity_bits)), splat(c::nan_code), code);
  }
  template <class Format>
  static void encode_store(__m256 x, std::uint8_t* out) noexcept {
    // Gather the low byte of each 32-bit lane: bytes 0, 4, 8, 12 of each 128-bit half, then the
    // two halves' 4-byte groups side by side.
    const __m256i low_bytes =
        _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                         0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i packed = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(encode<Format>(x), low_bytes),
                                                       _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(packed));
  }

  template <class Format>
  static __m256 decode(__m256i code) noexcept {
    using c = encoding_constants<Format>;
    const __m256i magnitude = _mm256_and_si256(code, splat(c::code_magnitude_mask));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(code, splat(c::sign_mask)), c::sign_shift);
    const __m256i normal = _mm256_add_epi32(_mm256_slli_epi32(magnitude, c::drop), splat(c::rebias_bits));
    const __m256 subnormal =
        _mm256_mul_ps(_mm256_cvtepi32_ps(magnitude), _mm256_castsi256_ps(splat(c::subnormal_quantum_bits)));
    __m256i value =
        select(greater(splat(c::first_normal_code), magnitude), _mm256_castps_si256(subnormal), normal);
    if constexpr (c::traits::has_infinity) {
      value =
          select(_mm256_cmpeq_epi32(magnitude, splat(c::first_special_code)), splat(c::infinity_bits), value);
      value = select(greater(magnitude, splat(c::first_special_code)), splat(c::float_quiet_nan), value);
    } else {
      value = select(_mm256_cmpeq_epi32(magnitude, splat(c::first_special_code)), splat(c::float_quiet_nan),
                     value);
    }
    return _mm256_castsi256_ps(_mm256_or_si256(value, sign));
  }
  template <class Format>
  static __m256 decode_load(const std::uint8_t* in) noexcept {
    return decode<Format>(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in))));
  }

  static void store(float* p, __m256 x) noexcept { _mm256_storeu_ps(p, x); }
  static void store(bfloat16* p, __m256 x) noexcept {
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, bf16_constants::shift), splat(1));
    __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(bits, _mm256_add_epi32(lsb, splat(bf16_constants::half_ulp_minus_one))),
        bf16_constants::shift);
    rounded = select(_mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)),
                     splat(bf16_constants::canonical_nan), rounded);
    // 32 -> 16 bits (values fit, so the saturating pack is exact); packs work per 128-bit half.
    const __m256i packed =
        _mm256_permute4x64_epi64(_mm256_packus_epi32(rounded, rounded), _MM_SHUFFLE(3, 1, 2, 0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  }
  static void store(float16* p, __m256 x) noexcept {
    const __m128i halves = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i nan32 = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    const __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan32), _mm256_extracti128_si256(nan32, 1));
    const __m128i result =
        _mm_blendv_epi8(halves, _mm_set1_epi16(short(fp16_constants::canonical_nan)), nan16);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), result);
  }

  static __m256i load_bits(const std::uint32_t* p) noexcept {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static void store_bits(std::uint32_t* p, __m256i v) noexcept {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  }
};

}  // namespace fp8::detail

#endif  // FP8_QUANTIZE_ISA_AVX2
