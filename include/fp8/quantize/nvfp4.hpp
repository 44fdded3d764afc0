// NVFP4 on the CPU: FP4 E2M1 elements, one UE4M3 scale per block of 16 consecutive elements of a row
// (or per 16 x 16 tile, for weights), and one FP32 scale per tensor that brings the block scales into
// E4M3's range. This is the arithmetic of NVIDIA Transformer Engine's NVFP4 recipe, float operation for
// float operation, so the codes match it bit for bit on finite inputs:
//
//   S_enc   = min(448 * 6 / amax_tensor, FLT_MAX), or 1 when amax_tensor is 0 (or S_enc underflows to 0)
//   S_dec   = 1 / S_enc                                   the per-tensor FP32 scale (the GEMM's alpha)
//   s_b     = ue4m3(amax_block * (S_enc * (1 / 6.f)))     nearest even, saturating
//   m_b     = min(1 / (float(s_b) * S_dec), FLT_MAX)      what the block's elements are multiplied by
//   q_i     = e2m1(x_i * m_b)                              nearest even (or stochastic), saturating
//   x_i    ~= float(q_i) * float(s_b) * S_dec              dequantization, in this order
//
// Example: amax_tensor 2688 gives S_enc = 1, S_dec = 1; a block with amax 12 gets s_b = 2 (0x40) and
// m_b = 0.5, so 12 -> 6 (0x7), -5 -> -2.5 -> tie, even -2 (0xC), 0.4 -> 0.2 -> 0 (0x0).
//
// NaN / Inf (a documented choice; Transformer Engine does not define one): the tensor amax is taken over
// the finite values only, so one bad value does not flatten every other block; a block containing a NaN
// or an Inf gets the UE4M3 NaN scale 0x7F and all-zero elements and dequantizes to NaN.
//
// Layouts: `in` is rows x cols row-major, cols a multiple of 16; element (r, c) is value r * cols + c
// of the packed E2M1 output (rows * cols / 2 bytes, low nibble first). 1x16 scales: rows x (cols / 16)
// row-major. 16x16 tiles (quantize_nvfp4_2d): ceil(rows / 16) x (cols / 16) row-major; expand them with
// nvfp4_expand_tile_scales for a GEMM that reads one scale per 1x16 block.
#pragma once

#include <cfloat>
#include <cstddef>
#include <cstdint>

#include "../error.hpp"
#include "../float8.hpp"
#include "../packed.hpp"
#include "block_scaled_ops.hpp"
#include "isa.hpp"
#include "mx.hpp"

namespace fp8 {

inline constexpr std::size_t nvfp4_block_size = 16;

// The per-tensor pair: encode multiplies into range, decode (= 1 / encode) is what is stored and what
// the GEMM multiplies the product by.
struct nvfp4_tensor_scale {
  float encode;
  float decode;
};

// S_enc and S_dec from the tensor's amax (see the header comment).
inline nvfp4_tensor_scale nvfp4_tensor_scale_from_amax(float amax) noexcept {
  constexpr float fp8_max = 448.0f;
  constexpr float fp4_max = 6.0f;
  float encode = fp8_max * fp4_max / amax;
  encode = encode < FLT_MAX ? encode : FLT_MAX;  // also turns +Inf (amax subnormal) into FLT_MAX
  if (amax == 0.0f || encode == 0.0f || encode != encode) encode = 1.0f;
  return {encode, 1.0f / encode};
}

namespace detail {

inline constexpr std::uint8_t ue4m3_nan = format_traits<ue4m3_format>::magnitude_mask;  // 0x7F

// Largest finite |x| of n floats (NaN and Inf ignored).
// (Templates on the kernel set: translation units built for different instruction sets must not
// share one definition; see isa.hpp.)
template <class Ops>
float finite_amax(const float* in, std::size_t n) noexcept {
  return bit_cast<float>(Ops::finite_amax_bits(in, n));
}

// The block scale code and the element multiplier of a finite block.
struct nvfp4_block_scale {
  std::uint8_t code;
  float multiplier;
};
inline nvfp4_block_scale nvfp4_block_scale_from_amax(std::uint32_t amax_bits, float encode_times_sixth,
                                                     float tensor_decode) noexcept {
  nvfp4_block_scale s{};
  block_ops_scalar::nvfp4_scale(amax_bits, encode_times_sixth, tensor_decode, s.code, s.multiplier);
  return s;
}

// The elements of one finite 16-element block, packed: nearest even (vectorised) or stochastic.
template <class Ops>
void nvfp4_encode_block(const float* in, float multiplier, std::uint8_t* packed,
                        const std::uint32_t* random_bits) noexcept {
  if (random_bits == nullptr) {
    Ops::encode_fp4_packed(in, nvfp4_block_size, multiplier, packed);
    return;
  }
  std::uint8_t codes[nvfp4_block_size];
  for (std::size_t i = 0; i < nvfp4_block_size; ++i) {
    codes[i] = std::uint8_t(convert_bits<e2m1_format, rounding::stochastic, overflow::saturate>(
        in[i] * multiplier, random_bits[i]));
  }
  pack<e2m1_format>(codes, nvfp4_block_size, packed);
}

}  // namespace detail

inline namespace FP8_QUANTIZE_ABI_NAMESPACE {
inline namespace FP8_BLOCK_ABI_NAMESPACE {  // block_scaled_ops.hpp: with or without VBMI

// 1x16 blocks along rows, with a given per-tensor scale (e.g. from an amax reduced across devices).
// `random_bits`: null for nearest-even, else one word per element (row-major) for stochastic rounding.
inline void quantize_nvfp4(const float* in, std::size_t rows, std::size_t cols,
                           nvfp4_tensor_scale tensor_scale, std::uint8_t* packed_out,
                           std::uint8_t* scales_ue4m3, const std::uint32_t* random_bits = nullptr) {
  detail::check_block_shape(rows, cols, nvfp4_block_size, "fp8::quantize_nvfp4");
  detail::check_pointers(in, packed_out, scales_ue4m3, rows * cols, "fp8::quantize_nvfp4");
  const float encode_times_sixth = tensor_scale.encode * (1.0f / 6.0f);
  const std::size_t blocks = rows * cols / nvfp4_block_size;
  // Sixteen blocks at a time under nearest-even: their scales are computed in one vector, and the
  // element multipliers come from a table of the 127 possible ones.
  const std::size_t grouped = random_bits == nullptr ? blocks / 16 * 16 : 0;
  alignas(64) float multipliers_by_code[128];
  if (grouped != 0) detail::block_ops::nvfp4_multipliers(tensor_scale.decode, multipliers_by_code);
  for (std::size_t k = 0; k < grouped; k += 16) {
    const std::uint32_t non_finite =
        detail::block_ops::nvfp4_group(in + k * nvfp4_block_size, encode_times_sixth, multipliers_by_code,
                                       scales_ue4m3 + k, packed_out + k * nvfp4_block_size / 2);
    for (std::size_t j = 0; non_finite != 0 && j < 16; ++j) {
      if (((non_finite >> j) & 1u) == 0) continue;
      scales_ue4m3[k + j] = detail::ue4m3_nan;
      for (std::size_t b = 0; b < nvfp4_block_size / 2; ++b)
        packed_out[(k + j) * nvfp4_block_size / 2 + b] = 0;
    }
  }
  for (std::size_t k = grouped; k < blocks; ++k) {  // the rest, and every block under stochastic rounding
    const float* block = in + k * nvfp4_block_size;
    std::uint8_t* out = packed_out + k * nvfp4_block_size / 2;
    const std::uint32_t amax_bits = detail::block_ops::amax_bits(block, nvfp4_block_size);
    if (amax_bits >= detail::float_infinity_bits) {
      scales_ue4m3[k] = detail::ue4m3_nan;
      for (std::size_t b = 0; b < nvfp4_block_size / 2; ++b) out[b] = 0;
      continue;
    }
    const auto s = detail::nvfp4_block_scale_from_amax(amax_bits, encode_times_sixth, tensor_scale.decode);
    scales_ue4m3[k] = s.code;
    detail::nvfp4_encode_block<detail::block_ops>(block, s.multiplier, out,
                                                  random_bits ? random_bits + k * nvfp4_block_size : nullptr);
  }
}

// The same, computing the per-tensor scale from this tensor's finite amax; returns it.
inline nvfp4_tensor_scale quantize_nvfp4(const float* in, std::size_t rows, std::size_t cols,
                                         std::uint8_t* packed_out, std::uint8_t* scales_ue4m3,
                                         const std::uint32_t* random_bits = nullptr) {
  const nvfp4_tensor_scale tensor_scale =
      nvfp4_tensor_scale_from_amax(detail::finite_amax<detail::block_ops>(in, rows * cols));
  quantize_nvfp4(in, rows, cols, tensor_scale, packed_out, scales_ue4m3, random_bits);
  return tensor_scale;
}

// 16x16 tiles (weights): one scale per tile, so the quantized tensor and its transpose share codes and
// scales. The last tile row may be partial (rows need not be a multiple of 16).
inline nvfp4_tensor_scale quantize_nvfp4_2d(const float* in, std::size_t rows, std::size_t cols,
                                            std::uint8_t* packed_out, std::uint8_t* tile_scales_ue4m3,
                                            const std::uint32_t* random_bits = nullptr) {
  detail::check_block_shape(rows, cols, nvfp4_block_size, "fp8::quantize_nvfp4_2d");
  detail::check_pointers(in, packed_out, tile_scales_ue4m3, rows * cols, "fp8::quantize_nvfp4_2d");
  const nvfp4_tensor_scale tensor_scale =
      nvfp4_tensor_scale_from_amax(detail::finite_amax<detail::block_ops>(in, rows * cols));
  const float encode_times_sixth = tensor_scale.encode * (1.0f / 6.0f);
  const std::size_t tile_cols = cols / nvfp4_block_size;
  for (std::size_t r0 = 0; r0 < rows; r0 += nvfp4_block_size) {
    const std::size_t r1 = r0 + nvfp4_block_size < rows ? r0 + nvfp4_block_size : rows;
    for (std::size_t t = 0; t < tile_cols; ++t) {
      const std::size_t c0 = t * nvfp4_block_size;
      std::uint32_t amax_bits = 0;
      for (std::size_t r = r0; r < r1; ++r) {
        const std::uint32_t a = detail::block_ops::amax_bits(in + r * cols + c0, nvfp4_block_size);
        amax_bits = a > amax_bits ? a : amax_bits;
      }
      const bool finite = amax_bits < detail::float_infinity_bits;
      detail::nvfp4_block_scale s{detail::ue4m3_nan, 0.0f};
      if (finite) s = detail::nvfp4_block_scale_from_amax(amax_bits, encode_times_sixth, tensor_scale.decode);
      tile_scales_ue4m3[(r0 / nvfp4_block_size) * tile_cols + t] = s.code;
      for (std::size_t r = r0; r < r1; ++r) {
        const std::size_t first = r * cols + c0;
        if (finite) {
          detail::nvfp4_encode_block<detail::block_ops>(in + first, s.multiplier, packed_out + first / 2,
                                                        random_bits ? random_bits + first : nullptr);
        } else {
          for (std::size_t b = 0; b < nvfp4_block_size / 2; ++b) packed_out[first / 2 + b] = 0;
        }
      }
    }
  }
  return tensor_scale;
}

// One scale per 1x16 block from the 16x16 tile scales (row r of tile row r / 16 repeats it).
inline void nvfp4_expand_tile_scales(const std::uint8_t* tile_scales, std::size_t rows, std::size_t cols,
                                     std::uint8_t* block_scales) {
  detail::check_block_shape(rows, cols, nvfp4_block_size, "fp8::nvfp4_expand_tile_scales");
  const std::size_t tile_cols = cols / nvfp4_block_size;
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t t = 0; t < tile_cols; ++t) {
      block_scales[r * tile_cols + t] = tile_scales[(r / nvfp4_block_size) * tile_cols + t];
    }
  }
}

// Back to float with 1x16 block scales: float(q) * float(s_b) * S_dec (NaN for NaN-scaled blocks).
inline void dequantize_nvfp4(const std::uint8_t* packed_in, const std::uint8_t* scales_ue4m3,
                             std::size_t rows, std::size_t cols, nvfp4_tensor_scale tensor_scale,
                             float* out) {
  detail::check_block_shape(rows, cols, nvfp4_block_size, "fp8::dequantize_nvfp4");
  detail::check_pointers(packed_in, scales_ue4m3, out, rows * cols, "fp8::dequantize_nvfp4");
  const std::size_t blocks = rows * cols / nvfp4_block_size;
  for (std::size_t k = 0; k < blocks; ++k) {
    const float scale = decode<float, ue4m3_format>(scales_ue4m3[k]);
    for (std::size_t i = 0; i < nvfp4_block_size; ++i) {
      const std::size_t index = k * nvfp4_block_size + i;
      out[index] =
          decode<float, e2m1_format>(packed_get<e2m1_format>(packed_in, index)) * scale * tensor_scale.decode;
    }
  }
}

}  // namespace FP8_BLOCK_ABI_NAMESPACE
}  // namespace FP8_QUANTIZE_ABI_NAMESPACE
}  // namespace fp8
