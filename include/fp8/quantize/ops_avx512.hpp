// AVX-512 (F, BW, VL) element operations for the quantize loops: 16 floats at a time, bit-identical to
// the scalar reference (the encoding is described in encoding_constants.hpp).
#pragma once

#include "isa.hpp"

#if FP8_QUANTIZE_ISA_AVX512

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "../float8.hpp"
#include "encoding_constants.hpp"

namespace fp8::detail {

struct avx512_ops {
  static constexpr std::size_t width = 16;
  using vfloat = __m512;
  using vbits = __m512i;

  // GCC 12.2's plain forms of these intrinsics pass an "undefined" source operand that trips a
  // false -Wmaybe-uninitialized (GCC PR 105593) in -Werror builds. The zero-masking forms with every
  // lane selected compile to the same instructions and carry no such operand.
  static constexpr __mmask16 all_lanes = 0xFFFF;   // 16 x 32-bit lanes
  static constexpr __mmask8 all_quadwords = 0xFF;  // 8 x 64-bit lanes
  template <unsigned Count>
  static __m512i shift_right(__m512i a) noexcept {
    return _mm512_maskz_srli_epi32(all_lanes, a, Count);
  }
  template <unsigned Count>
  static __m512i shift_left(__m512i a) noexcept {
    return _mm512_maskz_slli_epi32(all_lanes, a, Count);
  }

  static __m512 load(const float* p) noexcept { return _mm512_loadu_ps(p); }
  // bfloat16 is the top half of a float: widen and shift.
  static __m512 load(const bfloat16* p) noexcept {
    const __m512i halves =
        _mm512_maskz_cvtepu16_epi32(all_lanes, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(shift_left<bf16_constants::shift>(halves));
  }
  // vcvtph2ps widens exactly (NaNs stay NaN, which is all that matters: the cast maps every NaN to
  // one code and the amax maps every NaN to one NaN).
  static __m512 load(const float16* p) noexcept {
    return _mm512_maskz_cvtph_ps(all_lanes, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }

  static __m512i abs_bits(__m512 x) noexcept {
    return _mm512_and_si512(_mm512_castps_si512(x),
                            _mm512_set1_epi32(int(format_traits<binary32_format>::magnitude_mask)));
  }
  static __m512i zero_bits() noexcept { return _mm512_setzero_si512(); }
  static __m512i max(__m512i a, __m512i b) noexcept { return _mm512_maskz_max_epu32(all_lanes, a, b); }
  static std::uint32_t reduce_max(__m512i a) noexcept {
    const __m256i halves = _mm256_max_epu32(_mm512_maskz_extracti64x4_epi64(all_quadwords, a, 0),
                                            _mm512_maskz_extracti64x4_epi64(all_quadwords, a, 1));
    __m128i m = _mm_max_epu32(_mm256_castsi256_si128(halves), _mm256_extracti128_si256(halves, 1));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
    return std::uint32_t(_mm_cvtsi128_si32(m));
  }
  static __m512 mul(__m512 a, __m512 b) noexcept { return _mm512_mul_ps(a, b); }
  static __m512 broadcast(float x) noexcept { return _mm512_set1_ps(x); }

  template <class Format>
  static __m512i encode(__m512 x) noexcept {
    using c = encoding_constants<Format>;
    const __m512i bits = _mm512_castps_si512(x);
    const __m512i a = _mm512_and_si512(bits, _mm512_set1_epi32(int(c::magnitude_mask)));
    const __m512i sign =
        _mm512_and_si512(shift_right<c::sign_shift>(bits), _mm512_set1_epi32(int(c::sign_mask)));
    // Saturation: clamp to the largest finite value (NaN is replaced below).
    const __m512i clamped = _mm512_maskz_min_epu32(all_lanes, a, _mm512_set1_epi32(int(c::max_finite_bits)));
    // Normal: round the mantissa to nearest even in integer arithmetic, then rebias.
    const __m512i lsb = _mm512_and_si512(shift_right<c::drop>(clamped), _mm512_set1_epi32(1));
    const __m512i normal = shift_right<c::drop>(
        _mm512_add_epi32(clamped, _mm512_add_epi32(lsb, _mm512_set1_epi32(int(c::round_and_rebias)))));
    // Subnormal: let the FPU round |x| + magic.
    const __m512 magic = _mm512_castsi512_ps(_mm512_set1_epi32(int(c::subnormal_magic_bits)));
    const __m512i subnormal = _mm512_sub_epi32(
        _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(a), magic)), _mm512_castps_si512(magic));
    __m512i code = _mm512_mask_blend_epi32(
        _mm512_cmplt_epi32_mask(a, _mm512_set1_epi32(int(c::min_normal_bits))), normal, subnormal);
    code = _mm512_or_si512(code, sign);
    return _mm512_mask_mov_epi32(code, _mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(int(c::infinity_bits))),
                                 _mm512_set1_epi32(int(c::nan_code)));
  }
  template <class Format>
  static void encode_store(__m512 x, std::uint8_t* out) noexcept {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                     _mm512_maskz_cvtepi32_epi8(all_lanes, encode<Format>(x)));
  }

  template <class Format>
  static __m512 decode(__m512i code) noexcept {
    using c = encoding_constants<Format>;
    const __m512i magnitude = _mm512_and_si512(code, _mm512_set1_epi32(int(c::code_magnitude_mask)));
    const __m512i sign =
        shift_left<c::sign_shift>(_mm512_and_si512(code, _mm512_set1_epi32(int(c::sign_mask))));
    const __m512i normal =
        _mm512_add_epi32(shift_left<c::drop>(magnitude), _mm512_set1_epi32(int(c::rebias_bits)));
    // Subnormal: mantissa * quantum, both exact in float (no float denormals involved).
    const __m512 subnormal =
        _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(all_lanes, magnitude),
                      _mm512_castsi512_ps(_mm512_set1_epi32(int(c::subnormal_quantum_bits))));
    __m512i value = _mm512_mask_blend_epi32(
        _mm512_cmplt_epi32_mask(magnitude, _mm512_set1_epi32(int(c::first_normal_code))), normal,
        _mm512_castps_si512(subnormal));
    if constexpr (c::traits::has_infinity) {
      value = _mm512_mask_mov_epi32(
          value, _mm512_cmpeq_epi32_mask(magnitude, _mm512_set1_epi32(int(c::first_special_code))),
          _mm512_set1_epi32(int(c::infinity_bits)));
      value = _mm512_mask_mov_epi32(
          value, _mm512_cmpgt_epi32_mask(magnitude, _mm512_set1_epi32(int(c::first_special_code))),
          _mm512_set1_epi32(int(c::float_quiet_nan)));
    } else {
      value = _mm512_mask_mov_epi32(
          value, _mm512_cmpeq_epi32_mask(magnitude, _mm512_set1_epi32(int(c::first_special_code))),
          _mm512_set1_epi32(int(c::float_quiet_nan)));
    }
    return _mm512_castsi512_ps(_mm512_or_si512(value, sign));
  }
  template <class Format>
  static __m512 decode_load(const std::uint8_t* in) noexcept {
    return decode<Format>(
        _mm512_maskz_cvtepu8_epi32(all_lanes, _mm_loadu_si128(reinterpret_cast<const __m128i*>(in))));
  }

  static void store(float* p, __m512 x) noexcept { _mm512_storeu_ps(p, x); }
  static void store(bfloat16* p, __m512 x) noexcept {
    const __m512i bits = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(shift_right<bf16_constants::shift>(bits), _mm512_set1_epi32(1));
    __m512i rounded = shift_right<bf16_constants::shift>(_mm512_add_epi32(
        bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(int(bf16_constants::half_ulp_minus_one)))));
    rounded = _mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q),
                                    _mm512_set1_epi32(int(bf16_constants::canonical_nan)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_maskz_cvtepi32_epi16(all_lanes, rounded));
  }
  static void store(float16* p, __m512 x) noexcept {
    __m256i halves = _mm512_maskz_cvtps_ph(all_lanes, x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    halves = _mm256_mask_mov_epi16(halves, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q),
                                   _mm256_set1_epi16(short(fp16_constants::canonical_nan)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), halves);
  }

  static __m512i load_bits(const std::uint32_t* p) noexcept { return _mm512_loadu_si512(p); }
  static void store_bits(std::uint32_t* p, __m512i v) noexcept { _mm512_storeu_si512(p, v); }
};

}  // namespace fp8::detail

#endif  // FP8_QUANTIZE_ISA_AVX512
